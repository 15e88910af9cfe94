// A tiny TCP key-value store for bringing up a data-parallel job: exchanging the NCCL unique
// id (128 bytes) and barriers. Rank 0 hosts the store (listening on MASTER_PORT, by default on
// all interfaces; tests bind 127.0.0.1) and uses it in-process; other ranks connect to
// MASTER_ADDR:MASTER_PORT, retrying until a connect deadline.
// Wire format: every message is a u32 little-endian length followed by that many bytes;
// requests are HELLO(rank, world), SET(key, value), GET(key, timeout_ms),
// BARRIER(key, timeout_ms); replies are a status byte and a string (value or error text).
// Invariants: every wait is bounded (get/barrier timeouts, connect deadline, reply margin);
// on timeout or a lost peer the call throws dskc::Error(Device) naming the ranks involved
// (e.g. "rendezvous barrier 'init' timed out after 30 s: ranks 1, 3 did not arrive").
// A barrier name may be reused: each call on one rank is matched with the same-numbered call
// on the other ranks. Keys are write-once-or-overwrite; get() blocks until a key exists.
// The store is not thread-safe per Rendezvous object (one user thread per rank).
#pragma once
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace dskc {

struct RendezvousOptions {
  int rank = 0;
  int world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;  // rank 0 may pass 0 to bind an ephemeral port (tests), see port()
  std::string bind_addr;    // rank 0 only: "" = all interfaces, "127.0.0.1" = loopback
  std::chrono::milliseconds timeout{30000};          // get / barrier bound
  std::chrono::milliseconds connect_timeout{60000};  // how long ranks > 0 retry connecting
  // Rank 0's store waits at most this long at destruction for in-flight replies.
  std::chrono::milliseconds shutdown_grace{2000};
};

class StoreServer;

class Rendezvous {
 public:
  explicit Rendezvous(const RendezvousOptions& opts);
  ~Rendezvous();
  Rendezvous(const Rendezvous&) = delete;
  Rendezvous& operator=(const Rendezvous&) = delete;

  void set(const std::string& key, const std::string& value);
  // Blocks until `key` is set or the timeout passes (Error(Device)).
  std::string get(const std::string& key);
  // Returns once all world_size ranks called barrier(name) (the same number of times).
  void barrier(const std::string& name);

  int rank() const { return opts_.rank; }
  int world_size() const { return opts_.world_size; }
  int port() const;  // the port the store listens on (rank 0) or connected to

 private:
  // Sends one request and returns the reply value; throws on error status.
  std::string request(const std::string& payload, std::chrono::milliseconds wait);
  RendezvousOptions opts_;
  std::unique_ptr<StoreServer> server_;  // rank 0 only
  int fd_ = -1;                          // ranks > 0
  int bound_port_ = 0;
  std::map<std::string, int> barrier_counts_;
};

// Formats a rank list as "rank 2" or "ranks 1, 3".
std::string format_rank_list(const std::vector<int>& ranks);

}  // namespace dskc
