// Rendezvous store over loopback TCP with one thread per rank: exchanging a 128-byte id,
// barriers, timeouts naming the missing ranks, disconnects naming the rank, connect deadline.
// Rank 0 binds 127.0.0.1 on an ephemeral port; every wait is bounded by short timeouts.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <netinet/in.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

#include "compiler/errors.h"
#include "trainer/rendezvous.h"

using namespace dskc;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {
RendezvousOptions opts(int rank, int world, int port, std::chrono::milliseconds timeout = 5000ms) {
  RendezvousOptions o;
  o.rank = rank;
  o.world_size = world;
  o.master_addr = "127.0.0.1";
  o.bind_addr = "127.0.0.1";
  o.master_port = port;
  o.timeout = timeout;
  o.connect_timeout = 5000ms;
  o.shutdown_grace = 1000ms;
  return o;
}
std::string error_text(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Device);
    return e.what();
  }
  return "(no error)";
}
bool contains(const std::string& s, const std::string& sub) { return s.find(sub) != std::string::npos; }
}  // namespace

TEST_CASE("format_rank_list") {
  CHECK(format_rank_list({3}) == "rank 3");
  CHECK(format_rank_list({1, 3}) == "ranks 1, 3");
}

TEST_CASE("4 ranks exchange a 128-byte id and pass barriers") {
  const int world = 4;
  std::string id(128, '\0');
  for (int i = 0; i < 128; ++i) id[i] = static_cast<char>((i * 37) & 0xff);  // includes zeros
  Rendezvous r0(opts(0, world, 0));
  int port = r0.port();
  REQUIRE(port > 0);
  std::vector<std::future<std::string>> others;
  for (int r = 1; r < world; ++r)
    others.push_back(std::async(std::launch::async, [r, port] {
      Rendezvous rz(opts(r, world, port));
      rz.barrier("init");
      std::string got = rz.get("nccl_id");
      rz.set("from_" + std::to_string(r), std::to_string(r * 10));
      rz.barrier("init");  // the same name again: a second, separate barrier
      rz.barrier("done");
      return got;
    }));
  r0.barrier("init");
  r0.set("nccl_id", id);
  r0.barrier("init");
  for (int r = 1; r < world; ++r) CHECK(r0.get("from_" + std::to_string(r)) == std::to_string(r * 10));
  r0.barrier("done");
  for (auto& f : others) CHECK(f.get() == id);
}

TEST_CASE("get blocks until the key is set") {
  Rendezvous r0(opts(0, 2, 0));
  int port = r0.port();
  auto f = std::async(std::launch::async, [port] {
    Rendezvous r1(opts(1, 2, port));
    std::string v = r1.get("late");
    r1.barrier("end");
    return v;
  });
  std::this_thread::sleep_for(300ms);
  r0.set("late", "value");
  r0.barrier("end");
  CHECK(f.get() == "value");
}

TEST_CASE("a missing rank makes the barrier time out within the bound, naming it") {
  const int world = 4;
  Rendezvous r0(opts(0, world, 0, 1000ms));
  int port = r0.port();
  auto start = Clock::now();
  std::vector<std::future<std::string>> others;
  for (int r : {2})  // ranks 1 and 3 never start
    others.push_back(std::async(std::launch::async, [r, port] {
      Rendezvous rz(opts(r, world, port, 1000ms));
      return error_text([&] { rz.barrier("init"); });
    }));
  std::string msg = error_text([&] { r0.barrier("init"); });
  auto elapsed = Clock::now() - start;
  CHECK(contains(msg, "rendezvous barrier 'init' timed out after 1 s: ranks 1, 3 did not arrive"));
  for (auto& f : others) CHECK(contains(f.get(), "ranks 1, 3 did not arrive"));
  CHECK(elapsed < 5s);
}

TEST_CASE("get of a key nobody sets times out") {
  Rendezvous r0(opts(0, 1, 0, 300ms));
  CHECK(contains(error_text([&] { r0.get("nccl_id"); }), "get 'nccl_id' timed out after 0.3 s"));
}

TEST_CASE("a rank that disconnects fails the barrier at once, naming it") {
  Rendezvous r0(opts(0, 3, 0, 10000ms));
  int port = r0.port();
  { Rendezvous r2(opts(2, 3, port)); }  // connects, then exits before the barrier
  auto start = Clock::now();
  auto f = std::async(std::launch::async, [port] {
    Rendezvous r1(opts(1, 3, port, 10000ms));
    return error_text([&] { r1.barrier("init"); });
  });
  std::string msg = error_text([&] { r0.barrier("init"); });
  CHECK(contains(msg, "rank 2 disconnected"));
  CHECK(contains(f.get(), "rank 2 disconnected"));
  CHECK(Clock::now() - start < 5s);
}

TEST_CASE("rank 0 going away is a clear error on the other ranks") {
  auto r0 = std::make_unique<Rendezvous>(opts(0, 2, 0, 3000ms));
  int port = r0->port();
  std::promise<void> connected;
  auto f = std::async(std::launch::async, [&, port] {
    Rendezvous r1(opts(1, 2, port, 3000ms));
    connected.set_value();
    return error_text([&] { r1.get("never"); });
  });
  connected.get_future().wait();
  std::this_thread::sleep_for(100ms);
  r0.reset();
  std::string msg = f.get();
  CHECK((contains(msg, "rank 0") || contains(msg, "shutting down")));
}

TEST_CASE("connecting to a store that never starts fails after the deadline") {
  // A port that is free: bind an ephemeral one and close it.
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof sa;
  REQUIRE(::bind(s, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
  ::getsockname(s, reinterpret_cast<sockaddr*>(&sa), &len);
  int port = ntohs(sa.sin_port);
  ::close(s);
  auto o = opts(1, 2, port);
  o.connect_timeout = 500ms;
  auto start = Clock::now();
  std::string msg = error_text([&] { Rendezvous r1(o); });
  CHECK(contains(msg, "rank 1 could not connect"));
  CHECK(contains(msg, "127.0.0.1:" + std::to_string(port)));
  CHECK(Clock::now() - start < 3s);
}

TEST_CASE("duplicate ranks and mismatched world sizes are rejected") {
  Rendezvous r0(opts(0, 3, 0));
  int port = r0.port();
  Rendezvous r1(opts(1, 3, port));
  CHECK(contains(error_text([&] { Rendezvous dup(opts(1, 3, port)); }), "two processes claim rank 1"));
  CHECK(contains(error_text([&] { Rendezvous bad(opts(2, 4, port)); }), "world size 4"));
}
