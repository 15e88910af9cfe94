// ProcessGroup: this process's membership in a data-parallel job (one process per GPU): the
// rendezvous store (trainer/rendezvous.h) for start-up and barriers, and an NCCL communicator
// with its own stream for gradient all-reduces that overlap the backward pass.
//
// Start-up: every rank connects to rank 0's store; after a barrier (bounded: a rank that never
// arrives is named) rank 0 creates the NCCL unique id and publishes it under "nccl_id", the
// others read it, and all create the communicator on their Context's device. NVLink multicast
// (NVLS) is left off unless NCCL_NVLS_ENABLE is set.
//
// Bounded waits: every host wait on NCCL work polls with a deadline (`timeout`) and checks the
// communicator's asynchronous error. When a wait fails, the rank asks the store which ranks are
// alive with a barrier of its own: its error then names the ranks that did not arrive (hung or
// dead) or, when all arrived, says every rank is stuck in the collective. The communicator is
// then aborted (never destroyed while work may be pending), and the error is thrown: the
// process ends with a message naming the ranks, and `dskc launch` stops the others.
//
// Ordering contract: every rank issues the same collectives in the same order (the gradient
// bucket plan, grad_buckets.h, releases buckets in plan order on every rank).
#pragma once
#include <cuda.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/context.h"
#include "runtime/nccl_api.h"
#include "trainer/dist_env.h"
#include "trainer/rendezvous.h"

namespace dskc {

class ProcessGroup {
 public:
  // Connects to the store (rank 0 hosts it). No GPU needed yet.
  ProcessGroup(const DistEnv& env, std::chrono::milliseconds timeout);
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return env_.rank; }
  int world_size() const { return env_.world_size; }
  const DistEnv& env() const { return env_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  // Bounded barrier over the store; Error(Device) names the missing ranks.
  void barrier(const std::string& name);
  // Small set-up exchanges through the store (get: bounded wait, Error(Device) naming the key).
  void store_set(const std::string& key, const std::string& value);
  std::string store_get(const std::string& key);

  // Creates the NCCL communicator on ctx's device (ctx must outlive this group's NCCL use).
  void init_nccl(Context& ctx);
  bool nccl_ready() const { return comm_ != nullptr; }
  // Ends NCCL use (abort after a failure, else destroy) and frees the stream, events and buffer;
  // called before the Context goes away. Idempotent.
  void release_nccl();
  // Makes release_nccl abort instead of destroy (an error is unwinding this rank).
  void mark_failed() { failed_ = true; }

  // The group's stream (highest priority, so its all-reduce kernels get SMs while backward
  // kernels queue on the compute stream) and ordering against the Context's stream.
  CUstream stream() const { return stream_; }
  // Makes the group's stream wait for all work enqueued so far on the Context's stream.
  void wait_for_compute();
  // Enqueues an in-place sum all-reduce of `n` elements of `type` at `buf` on the group's stream.
  void all_reduce(CUdeviceptr buf, size_t n, ncclDataType_t type);
  // Enqueues on the group's stream: an in-place sum all-reduce of `n` int32 at `buf`, then a copy
  // of the result to page-locked host memory `host`; wait_host_copy blocks (bounded) until it is
  // there, so the host can enqueue other work meanwhile.
  void all_reduce_to_host(CUdeviceptr buf, size_t n, int32_t* host);
  void wait_host_copy(const std::string& what);
  // Blocks (bounded) until everything enqueued on the group's stream has finished. `what`
  // names the operation in errors, e.g. "the gradient all-reduce". Records how long the
  // all-reduces ran past the compute enqueued before this call (the exposed communication).
  void wait_all_reduces(const std::string& what);
  // Sum over ranks of a few host values (blocking, bounded).
  std::vector<double> all_reduce_host(const std::vector<double>& v, const std::string& what);

  // Error(Internal) unless every rank passes the same 64-bit value (e.g. a hash of its
  // parameters); `what` names the value in the message.
  void check_identical(uint64_t value, const std::string& what);

  // Sum over the wait_all_reduces calls since the last take of the time the group's stream
  // finished after the compute stream (seconds): the all-reduce time backward did not hide.
  double take_exposed_seconds();

 private:
  [[noreturn]] void fail(const std::string& what, const std::string& why);

  DistEnv env_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<Rendezvous> store_;
  Context* ctx_ = nullptr;
  ncclComm_t comm_ = nullptr;
  CUstream stream_ = nullptr;
  CUevent compute_done_ = nullptr;  // orders the group's stream after the compute stream
  CUevent compute_end_ = nullptr, comm_end_ = nullptr;  // timing events for the exposed time
  CUevent host_copy_done_ = nullptr;                     // all_reduce_to_host's copy
  DeviceBuffer host_buf_;
  bool failed_ = false;
  double exposed_ = 0.0;
};

}  // namespace dskc
