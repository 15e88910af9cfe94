// PeerSum: the gradient sum of a two-rank job whose GPUs are peers on one host, moved by the
// GPUs' copy engines instead of NCCL kernels. An NCCL all-reduce runs on SMs (24 CTAs on the
// H200 pair) while backward runs: the backward GEMMs lose those SMs for the whole transfer.
// With PeerSum each rank copies a layer's dtype gradients into the other rank's receive buffer
// (cuMemcpyDtoDAsync into CUDA-IPC-mapped peer memory: a copy engine over NVLink, no SM), then
// raises a per-slot flag in the peer's memory; the receiver's stream waits for its own flag
// (cuStreamWaitValue32) and writes T(own + other) into the fp32 accumulators (model_add_pair):
// the correctly rounded dtype sum, bit for bit what the NCCL all-reduce gives, and the same on
// both ranks (a + b == b + a).
//
// Protocol (per step, sequence number seq = 1, 2, ...): send(slot) = copy into the peer's
// buffer, then set the peer's flag[slot] = seq; wait(slot) = the stream waits until its own
// flag[slot] >= seq. Every rank sends a slot before it waits for it, so neither can block the
// other. A slot's receive region is rewritten only in the next step, after both ranks finished
// the step (the trainer's per-step loss all-reduce orders that).
//
// create() is collective (both ranks call it after the NCCL communicator exists): the ranks
// exchange host name, PCI bus id and an IPC handle of their receive buffer through the
// rendezvous store, each checks what it can, and both use PeerSum only if both can (decided
// with one host all-reduce), otherwise neither does and the caller keeps NCCL.
#pragma once
#include <cuda.h>

#include <memory>
#include <string>

#include "runtime/context.h"

namespace dskc {

class ProcessGroup;

class PeerSum {
 public:
  static constexpr int kMaxSlots = 1024;

  // Receive buffer of `bytes` per rank. Returns nullptr when the pair cannot use copy engines;
  // `why` then says why (for the log). Error(Device) only for failures of the collective itself.
  static std::unique_ptr<PeerSum> create(ProcessGroup& pg, Context& ctx, size_t bytes, std::string& why);
  ~PeerSum();
  PeerSum(const PeerSum&) = delete;
  PeerSum& operator=(const PeerSum&) = delete;

  // A new step: sends and waits from here on belong to it.
  void next_step() { ++seq_; }
  // On `stream`: copies `bytes` at `src` to the peer's receive buffer at `offset`, then raises
  // the peer's flag `slot`.
  void send(CUstream stream, CUdeviceptr src, size_t offset, size_t bytes, int slot);
  // On `stream`: waits until the peer's data for `slot` of this step has arrived; returns this
  // rank's receive address at `offset`.
  CUdeviceptr wait(CUstream stream, size_t offset, int slot);
  // After a failure: raises this rank's own flags past any pending wait, so a stream blocked on
  // a peer that died or hangs drains (the process can then exit). Never throws.
  void release_waits() noexcept;
  // "copy engines over NVLink between GPU 0000:19:00.0 and 0000:3b:00.0" for the log.
  const std::string& description() const { return description_; }

 private:
  PeerSum() = default;

  Context* ctx_ = nullptr;
  DeviceBuffer recv_;            // [bytes] receive region, then kMaxSlots 32-bit flags
  size_t bytes_ = 0;             // receive region (the flags follow at flags_offset())
  CUdeviceptr peer_recv_ = 0;    // the peer's receive buffer, IPC-mapped
  CUstream flag_stream_ = nullptr;  // release_waits' own stream (the others may be blocked)
  uint32_t seq_ = 0;
  unsigned wait_flags_ = 0;      // CU_STREAM_WAIT_VALUE_GEQ (| FLUSH where supported)
  std::string description_;

  size_t flags_offset() const;
};

}  // namespace dskc
