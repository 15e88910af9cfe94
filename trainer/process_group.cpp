// ProcessGroup (see process_group.h).
#include "trainer/process_group.h"

#include <fmt/format.h>

#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <functional>
#include <thread>

#include "compiler/errors.h"
#include "runtime/driver.h"

namespace dskc {

using Clock = std::chrono::steady_clock;

ProcessGroup::ProcessGroup(const DistEnv& env, std::chrono::milliseconds timeout) : env_(env), timeout_(timeout) {
  validate_dist_env(env_);
  RendezvousOptions o;
  o.rank = env_.rank;
  o.world_size = env_.world_size;
  o.master_addr = env_.master_addr;
  o.master_port = env_.master_port;
  o.timeout = timeout_;
  o.connect_timeout = timeout_;
  store_ = std::make_unique<Rendezvous>(o);
}

ProcessGroup::~ProcessGroup() { release_nccl(); }

void ProcessGroup::release_nccl() {
  if (comm_) {
    // Abort when anything failed: destroy waits for pending work, which may never finish.
    if (failed_)
      nccl().ncclCommAbort(comm_);
    else
      nccl().ncclCommDestroy(comm_);
    comm_ = nullptr;
  }
  if (ctx_) {
    const DriverApi& d = driver();
    for (CUevent e : {compute_done_, compute_end_, comm_end_, host_copy_done_})
      if (e) d.cuEventDestroy(e);
    if (stream_) d.cuStreamDestroy(stream_);
    compute_done_ = compute_end_ = comm_end_ = host_copy_done_ = nullptr;
    stream_ = nullptr;
    host_buf_ = DeviceBuffer();
    ctx_ = nullptr;
  }
}

void ProcessGroup::barrier(const std::string& name) { store_->barrier(name); }
void ProcessGroup::store_set(const std::string& key, const std::string& value) { store_->set(key, value); }
std::string ProcessGroup::store_get(const std::string& key) { return store_->get(key); }

void ProcessGroup::init_nccl(Context& ctx) {
  DSKC_ASSERT(!comm_, "init_nccl twice");
  ctx_ = &ctx;
  ctx.make_current();
  setenv("NCCL_NVLS_ENABLE", "0", 0);  // NVLink multicast off unless the user chose otherwise
  const NcclApi& n = nccl();
  store_->barrier("nccl-init");  // every rank is here: NCCL's own (unbounded) init cannot hang on a missing one
  ncclUniqueId id{};
  if (env_.rank == 0) {
    DSKC_NCCL(ncclGetUniqueId(&id));
    store_->set("nccl_id", std::string(id.internal, sizeof(id.internal)));
  } else {
    const std::string v = store_->get("nccl_id");
    DSKC_ASSERT(v.size() == sizeof(id.internal), "NCCL unique id size");
    std::memcpy(id.internal, v.data(), v.size());
  }
  ncclComm_t comm = nullptr;
  const ncclResult_t r = n.ncclCommInitRank(&comm, env_.world_size, id, env_.rank);
  if (r != ncclSuccess) {
    failed_ = true;
    fail("NCCL communicator set-up", fmt::format("ncclCommInitRank: {}", n.ncclGetErrorString(r)));
  }
  comm_ = comm;
  int least = 0, greatest = 0;
  DSKC_CU(cuCtxGetStreamPriorityRange(&least, &greatest));
  DSKC_CU(cuStreamCreateWithPriority(&stream_, CU_STREAM_NON_BLOCKING, greatest));
  DSKC_CU(cuEventCreate(&compute_done_, CU_EVENT_DISABLE_TIMING));
  DSKC_CU(cuEventCreate(&compute_end_, CU_EVENT_DEFAULT));
  DSKC_CU(cuEventCreate(&comm_end_, CU_EVENT_DEFAULT));
  DSKC_CU(cuEventCreate(&host_copy_done_, CU_EVENT_DISABLE_TIMING));
  host_buf_ = DeviceBuffer(ctx, 64 * sizeof(double));
}

void ProcessGroup::wait_for_compute() {
  DSKC_ASSERT(comm_, "wait_for_compute before init_nccl");
  DSKC_CU(cuEventRecord(compute_done_, ctx_->stream()));
  DSKC_CU(cuStreamWaitEvent(stream_, compute_done_, 0));
}

void ProcessGroup::all_reduce(CUdeviceptr buf, size_t n, ncclDataType_t type) {
  DSKC_ASSERT(comm_, "all-reduce before init_nccl");
  void* p = reinterpret_cast<void*>(buf);
  DSKC_NCCL(ncclAllReduce(p, p, n, type, ncclSum, comm_, stream_));
}

// Polls `ev` until it completes; bounded by the timeout, and NCCL's asynchronous errors end it
// early. Both failures go through fail(), which names the ranks that are not responding.
static void poll_event(CUevent ev, ncclComm_t comm, std::chrono::milliseconds timeout,
                       const std::function<void(const std::string&)>& fail_with) {
  const DriverApi& d = driver();
  const auto start = Clock::now(), deadline = start + timeout;
  // Yield-spin for the first 200 ms (a step's wait ends within microseconds of the GPU; a sleep
  // would add the timer slack, ~50 µs), then poll every 50 µs.
  bool patient = false;
  for (int spin = 0;; ++spin) {
    const CUresult q = d.cuEventQuery(ev);
    if (q == CUDA_SUCCESS) return;
    if (q != CUDA_ERROR_NOT_READY) throw_cuda_error(q, "cuEventQuery", __FILE__, __LINE__);
    if ((spin & 63) == 63) {
      ncclResult_t async = ncclSuccess;
      nccl().ncclCommGetAsyncError(comm, &async);
      if (async != ncclSuccess && async != ncclInProgress)
        fail_with(fmt::format("NCCL reported: {}", nccl().ncclGetErrorString(async)));
      const auto now = Clock::now();
      if (now > deadline) fail_with(fmt::format("it did not complete within {:g} s", timeout.count() / 1000.0));
      patient = now - start > std::chrono::milliseconds(200);
    }
    if (patient)
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    else
      std::this_thread::yield();
  }
}

void ProcessGroup::all_reduce_to_host(CUdeviceptr buf, size_t n, int32_t* host) {
  all_reduce(buf, n, ncclInt32);
  DSKC_CU(cuMemcpyDtoHAsync(host, buf, n * sizeof(int32_t), stream_));
  DSKC_CU(cuEventRecord(host_copy_done_, stream_));
}

void ProcessGroup::wait_host_copy(const std::string& what) {
  DSKC_ASSERT(comm_, "wait before init_nccl");
  poll_event(host_copy_done_, comm_, timeout_, [&](const std::string& why) { fail(what, why); });
}

void ProcessGroup::wait_all_reduces(const std::string& what) {
  DSKC_ASSERT(comm_, "wait before init_nccl");
  DSKC_CU(cuEventRecord(compute_end_, ctx_->stream()));
  DSKC_CU(cuEventRecord(comm_end_, stream_));
  const auto fail_with = [&](const std::string& why) { fail(what, why); };
  poll_event(comm_end_, comm_, timeout_, fail_with);
  poll_event(compute_end_, comm_, timeout_, fail_with);
  float ms = 0.f;
  DSKC_CU(cuEventElapsedTime(&ms, compute_end_, comm_end_));
  exposed_ += std::max(0.f, ms) / 1e3;
}

std::vector<double> ProcessGroup::all_reduce_host(const std::vector<double>& v, const std::string& what) {
  DSKC_ASSERT(comm_ && v.size() <= 64, "small host all-reduce");
  std::vector<double> out(v);
  if (v.empty()) return out;
  const size_t bytes = v.size() * sizeof(double);
  DSKC_CU(cuMemcpyHtoDAsync(host_buf_.ptr(), v.data(), bytes, stream_));
  void* p = reinterpret_cast<void*>(host_buf_.ptr());
  DSKC_NCCL(ncclAllReduce(p, p, v.size(), ncclFloat64, ncclSum, comm_, stream_));
  // A bounded wait for the all-reduce (not timed: it is not gradient traffic); only then the
  // blocking copy back.
  DSKC_CU(cuEventRecord(comm_end_, stream_));
  poll_event(comm_end_, comm_, timeout_, [&](const std::string& why) { fail(what, why); });
  DSKC_CU(cuMemcpyDtoHAsync(out.data(), host_buf_.ptr(), bytes, stream_));
  DSKC_CU(cuStreamSynchronize(stream_));
  return out;
}

void ProcessGroup::check_identical(uint64_t value, const std::string& what) {
  // Halves below 2^32 sum exactly in doubles (world < 2^21), so equality is exact.
  const double lo = static_cast<double>(value & 0xffffffffu), hi = static_cast<double>(value >> 32);
  const std::vector<double> sum = all_reduce_host({lo, hi}, "the consistency check of " + what);
  const double w = env_.world_size;
  if (sum[0] != w * lo || sum[1] != w * hi)
    throw Error(ErrorKind::Internal,
                fmt::format("rank {}: {} differs between ranks (this rank: {:016x}); the data-parallel replicas "
                            "diverged",
                            env_.rank, what, value));
}

double ProcessGroup::take_exposed_seconds() {
  const double s = exposed_;
  exposed_ = 0.0;
  return s;
}

void ProcessGroup::fail(const std::string& what, const std::string& why) {
  failed_ = true;
  // Which ranks are alive? The healthy ones reach this barrier too (their waits fail as well).
  std::string who;
  try {
    store_->barrier("dskc-failure-check");
    who = "every rank reached the failure check, so all are stuck in the collective (an NCCL or GPU problem)";
  } catch (const Error& e) {
    who = e.what();
  }
  throw Error(ErrorKind::Device,
              fmt::format("rank {}: {} failed: {}; {}", env_.rank, what, why, who));
}

}  // namespace dskc
