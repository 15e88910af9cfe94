// PeerSum (see peer_sum.h).
#include "trainer/peer_sum.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <sstream>
#include <vector>

#include "compiler/errors.h"
#include "runtime/driver.h"
#include "trainer/process_group.h"

namespace dskc {
namespace {

constexpr size_t kAlign = 4096;
size_t align_up(size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

std::string to_hex(const void* p, size_t n) {
  std::string s;
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) s += fmt::format("{:02x}", b[i]);
  return s;
}

bool from_hex(const std::string& s, void* out, size_t n) {
  if (s.size() != 2 * n) return false;
  auto* b = static_cast<unsigned char*>(out);
  for (size_t i = 0; i < n; ++i) {
    unsigned v = 0;
    if (std::sscanf(s.c_str() + 2 * i, "%2x", &v) != 1) return false;
    b[i] = static_cast<unsigned char>(v);
  }
  return true;
}

// This rank's record for the other: host, PCI bus id, IPC handle (hex; empty when unavailable).
struct Record {
  std::string host, bus, handle_hex;
};
std::string encode(const Record& r) { return r.host + "\n" + r.bus + "\n" + r.handle_hex; }
Record decode(const std::string& s) {
  Record r;
  std::istringstream in(s);
  std::getline(in, r.host);
  std::getline(in, r.bus);
  std::getline(in, r.handle_hex);
  return r;
}

}  // namespace

size_t PeerSum::flags_offset() const { return bytes_; }

std::unique_ptr<PeerSum> PeerSum::create(ProcessGroup& pg, Context& ctx, size_t bytes, std::string& why) {
  if (pg.world_size() != 2) {
    why = fmt::format("{} ranks (copy engines pair two)", pg.world_size());
    return nullptr;
  }
  const DriverApi& d = driver();
  ctx.make_current();
  std::unique_ptr<PeerSum> ps(new PeerSum());
  ps->ctx_ = &ctx;
  ps->bytes_ = align_up(bytes);
  ps->recv_ = DeviceBuffer(ctx, ps->bytes_ + kMaxSlots * sizeof(uint32_t));
  DSKC_CU(cuMemsetD32Async(ps->recv_.ptr() + ps->flags_offset(), 0, kMaxSlots, ctx.stream()));
  ctx.synchronize();

  CUdevice dev = 0;
  DSKC_CU(cuDeviceGet(&dev, ctx.device()));
  Record mine;
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  mine.host = host;
  mine.bus = pci_bus_id(dev);
  std::string problem;
  CUipcMemHandle handle{};
  if (const CUresult r = d.cuIpcGetMemHandle(&handle, ps->recv_.ptr()); r == CUDA_SUCCESS)
    mine.handle_hex = to_hex(&handle, sizeof(handle));
  else
    problem = fmt::format("cuIpcGetMemHandle failed ({})", cuda_error_name(r));
  const int other = 1 - pg.rank();
  pg.store_set(fmt::format("peer_sum/{}", pg.rank()), encode(mine));
  const Record theirs = decode(pg.store_get(fmt::format("peer_sum/{}", other)));

  CUipcMemHandle their_handle{};
  if (!problem.empty()) {
  } else if (theirs.host != mine.host) {
    problem = fmt::format("the ranks run on different hosts ({}, {})", mine.host, theirs.host);
  } else if (theirs.bus == mine.bus) {
    problem = fmt::format("both ranks use GPU {}", mine.bus);
  } else if (!from_hex(theirs.handle_hex, &their_handle, sizeof(their_handle))) {
    problem = "the other rank has no IPC handle";
  } else {
    int count = 0, can = 0;
    DSKC_CU(cuDeviceGetCount(&count));
    CUdevice peer = -1;
    for (int i = 0; i < count && peer < 0; ++i) {
      CUdevice c = 0;
      DSKC_CU(cuDeviceGet(&c, i));
      if (pci_bus_id(c) == theirs.bus) peer = c;
    }
    if (peer >= 0) DSKC_CU(cuDeviceCanAccessPeer(&can, dev, peer));
    if (peer < 0) {
      problem = fmt::format("GPU {} of the other rank is not visible to this process", theirs.bus);
    } else if (!can) {
      problem = fmt::format("GPUs {} and {} are not peers", mine.bus, theirs.bus);
    } else if (const CUresult r = d.cuIpcOpenMemHandle(&ps->peer_recv_, their_handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
               r != CUDA_SUCCESS) {
      ps->peer_recv_ = 0;
      problem = fmt::format("cuIpcOpenMemHandle failed ({})", cuda_error_name(r));
    } else {
      // The operations the protocol uses, once: a wait on our own flag (already satisfied) and
      // a write of the value the other's flag already holds.
      CUresult t = d.cuStreamWaitValue32(ctx.stream(), ps->recv_.ptr() + ps->flags_offset(), 0, CU_STREAM_WAIT_VALUE_GEQ);
      if (t == CUDA_SUCCESS) t = d.cuMemsetD32Async(ps->peer_recv_ + ps->flags_offset(), 0, 1, ctx.stream());
      if (t == CUDA_SUCCESS) t = d.cuStreamSynchronize(ctx.stream());
      if (t != CUDA_SUCCESS) problem = fmt::format("stream memory operations on peer memory failed ({})", cuda_error_name(t));
    }
  }
  // Both or neither.
  const std::vector<double> ok = pg.all_reduce_host({problem.empty() ? 1.0 : 0.0}, "the copy-engine set-up");
  if (ok[0] < 2) {
    why = problem.empty() ? "the other rank cannot use them" : problem;
    return nullptr;  // the destructor closes the mapping
  }
  int flush = 0;
  DSKC_CU(cuDeviceGetAttribute(&flush, CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES, dev));
  ps->wait_flags_ = static_cast<unsigned>(CU_STREAM_WAIT_VALUE_GEQ) |
                    (flush ? static_cast<unsigned>(CU_STREAM_WAIT_VALUE_FLUSH) : 0u);
  DSKC_CU(cuStreamCreate(&ps->flag_stream_, CU_STREAM_NON_BLOCKING));
  ps->description_ = fmt::format("copy engines between GPUs {} and {}", mine.bus, theirs.bus);
  return ps;
}

PeerSum::~PeerSum() {
  if (!ctx_) return;
  ctx_->make_current();
  const DriverApi& d = driver();
  if (peer_recv_) d.cuIpcCloseMemHandle(peer_recv_);
  if (flag_stream_) d.cuStreamDestroy(flag_stream_);
}

void PeerSum::send(CUstream stream, CUdeviceptr src, size_t offset, size_t bytes, int slot) {
  DSKC_ASSERT(slot >= 0 && slot < kMaxSlots && offset + bytes <= bytes_, "peer send within the receive buffer");
  DSKC_CU(cuMemcpyDtoDAsync(peer_recv_ + offset, src, bytes, stream));
  DSKC_CU(cuMemsetD32Async(peer_recv_ + flags_offset() + 4 * static_cast<size_t>(slot), seq_, 1, stream));
}

CUdeviceptr PeerSum::wait(CUstream stream, size_t offset, int slot) {
  DSKC_ASSERT(slot >= 0 && slot < kMaxSlots && offset <= bytes_, "peer wait within the receive buffer");
  DSKC_CU(cuStreamWaitValue32(stream, recv_.ptr() + flags_offset() + 4 * static_cast<size_t>(slot), seq_,
                              wait_flags_));
  return recv_.ptr() + offset;
}

void PeerSum::release_waits() noexcept {
  if (!ctx_ || !flag_stream_) return;
  const DriverApi& d = driver();
  // GEQ compares (int32)(flag - value) >= 0: a value 2^30 ahead satisfies every wait issued so far.
  if (d.cuMemsetD32Async(recv_.ptr() + flags_offset(), seq_ + (1u << 30), kMaxSlots, flag_stream_) == CUDA_SUCCESS)
    d.cuStreamSynchronize(flag_stream_);
}

}  // namespace dskc
