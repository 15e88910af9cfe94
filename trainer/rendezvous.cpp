// TCP rendezvous store (see rendezvous.h). The server runs on rank 0: an accept thread plus
// one thread per connected rank; state (keys, barrier arrivals, connected ranks) lives under
// one mutex with a condition variable that every state change notifies. Socket I/O retries
// EINTR and partial transfers, never raises SIGPIPE (MSG_NOSIGNAL), and polls with deadlines
// so no call can block forever.
#include "trainer/rendezvous.h"

#include <arpa/inet.h>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <fmt/format.h>
#include <mutex>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <set>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "compiler/errors.h"

namespace dskc {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

constexpr uint32_t kMaxMessage = 64u << 20;
enum Op : uint8_t { kHello = 1, kSet = 2, kGet = 3, kBarrier = 4 };
enum Status : uint8_t { kOk = 0, kFail = 1 };

std::string seconds_text(milliseconds ms) { return fmt::format("{:g} s", ms.count() / 1000.0); }

// ---- serialization ----
void put_u32(std::string& s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_str(std::string& s, const std::string& v) {
  put_u32(s, static_cast<uint32_t>(v.size()));
  s += v;
}
struct Reader {
  const std::string& s;
  size_t pos = 0;
  uint32_t u32() {
    if (pos + 4 > s.size()) throw Error(ErrorKind::Device, "rendezvous: truncated message");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= uint32_t(uint8_t(s[pos + i])) << (8 * i);
    pos += 4;
    return v;
  }
  uint8_t u8() {
    if (pos + 1 > s.size()) throw Error(ErrorKind::Device, "rendezvous: truncated message");
    return uint8_t(s[pos++]);
  }
  std::string str() {
    uint32_t n = u32();
    if (pos + n > s.size()) throw Error(ErrorKind::Device, "rendezvous: truncated message");
    std::string v = s.substr(pos, n);
    pos += n;
    return v;
  }
};

// ---- socket I/O ----
enum class IoResult { Ok, Eof, Timeout, Error };

IoResult write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EPIPE || errno == ECONNRESET) return IoResult::Eof;
      return IoResult::Error;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return IoResult::Ok;
}

// Reads exactly n bytes before `deadline` (Clock::time_point::max() = no deadline, but then
// `stop` polling every 100 ms lets servers shut down).
IoResult read_exact(int fd, char* p, size_t n, Clock::time_point deadline) {
  while (n > 0) {
    auto now = Clock::now();
    if (now >= deadline) return IoResult::Timeout;
    auto left = std::chrono::duration_cast<milliseconds>(deadline - now).count();
    int wait = static_cast<int>(std::min<long long>(left, 1000));
    pollfd pfd{fd, POLLIN, 0};
    int r = ::poll(&pfd, 1, wait);
    if (r < 0) {
      if (errno == EINTR) continue;
      return IoResult::Error;
    }
    if (r == 0) continue;
    ssize_t got = ::recv(fd, p, n, 0);
    if (got < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      if (errno == ECONNRESET) return IoResult::Eof;
      return IoResult::Error;
    }
    if (got == 0) return IoResult::Eof;
    p += got;
    n -= static_cast<size_t>(got);
  }
  return IoResult::Ok;
}

IoResult send_msg(int fd, const std::string& payload) {
  std::string frame;
  put_u32(frame, static_cast<uint32_t>(payload.size()));
  frame += payload;
  return write_all(fd, frame.data(), frame.size());
}

IoResult recv_msg(int fd, std::string& out, Clock::time_point deadline) {
  char hdr[4];
  IoResult r = read_exact(fd, hdr, 4, deadline);
  if (r != IoResult::Ok) return r;
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n |= uint32_t(uint8_t(hdr[i])) << (8 * i);
  if (n > kMaxMessage) return IoResult::Error;
  out.assign(n, '\0');
  return n ? read_exact(fd, out.data(), n, deadline) : IoResult::Ok;
}

std::string reply(Status st, const std::string& text) {
  std::string s(1, static_cast<char>(st));
  s += text;
  return s;
}

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

}  // namespace

std::string format_rank_list(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

// ---------------------------------------------------------------------------------------
class StoreServer {
 public:
  StoreServer(const RendezvousOptions& o) : opts_(o) {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    addrinfo* res = nullptr;
    std::string port = std::to_string(o.master_port);
    int rc = ::getaddrinfo(o.bind_addr.empty() ? nullptr : o.bind_addr.c_str(), port.c_str(),
                           &hints, &res);
    if (rc != 0)
      throw Error(ErrorKind::Config, fmt::format("rendezvous: cannot resolve bind address '{}': {}",
                                                 o.bind_addr, ::gai_strerror(rc)));
    listen_fd_ = ::socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC, res->ai_protocol);
    int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (listen_fd_ < 0 || ::bind(listen_fd_, res->ai_addr, res->ai_addrlen) != 0 ||
        ::listen(listen_fd_, 128) != 0) {
      int err = errno;
      ::freeaddrinfo(res);
      if (listen_fd_ >= 0) ::close(listen_fd_);
      throw Error(ErrorKind::Device,
                  fmt::format("rendezvous: rank 0 cannot listen on {}:{}: {} (is MASTER_PORT "
                              "already in use? pick another with --master_port / MASTER_PORT)",
                              o.bind_addr.empty() ? "0.0.0.0" : o.bind_addr, o.master_port,
                              std::strerror(err)));
    }
    ::freeaddrinfo(res);
    sockaddr_in sa{};
    socklen_t len = sizeof sa;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&sa), &len);
    port_ = ntohs(sa.sin_port);
    connected_.insert(0);
    accept_thread_ = std::thread([this] { accept_loop(); });
  }

  ~StoreServer() {
    {
      // Let in-flight replies (e.g. the last barrier) reach the other ranks first.
      std::unique_lock lk(mu_);
      cv_.wait_for(lk, opts_.shutdown_grace, [&] { return busy_ == 0 && clients_.empty(); });
      stopping_ = true;
      for (int fd : clients_) ::shutdown(fd, SHUT_RDWR);
      cv_.notify_all();
    }
    ::shutdown(listen_fd_, SHUT_RDWR);
    if (accept_thread_.joinable()) accept_thread_.join();
    for (auto& t : threads_) t.join();
    ::close(listen_fd_);
  }

  int port() const { return port_; }

  void set(const std::string& key, const std::string& value) {
    std::lock_guard lk(mu_);
    kv_[key] = value;
    cv_.notify_all();
  }

  // Returns {ok, value-or-error}.
  std::pair<bool, std::string> get(const std::string& key, milliseconds timeout) {
    std::unique_lock lk(mu_);
    bool ok = cv_.wait_for(lk, timeout, [&] { return stopping_ || kv_.count(key) > 0; });
    if (ok && kv_.count(key)) return {true, kv_[key]};
    if (stopping_) return {false, "rendezvous store on rank 0 is shutting down"};
    return {false, fmt::format("rendezvous get '{}' timed out after {}: no rank set the key",
                               key, seconds_text(timeout))};
  }

  std::pair<bool, std::string> barrier(const std::string& key, const std::string& name, int rank,
                                       milliseconds timeout) {
    std::unique_lock lk(mu_);
    auto& arrived = barriers_[key];
    arrived.insert(rank);
    cv_.notify_all();
    auto missing = [&] {
      std::vector<int> m;
      for (int r = 0; r < opts_.world_size; ++r)
        if (!arrived.count(r)) m.push_back(r);
      return m;
    };
    auto lost = [&] {
      std::vector<int> l;
      for (int r : missing())
        if (departed_.count(r)) l.push_back(r);
      return l;
    };
    bool done = cv_.wait_for(lk, timeout, [&] {
      return stopping_ || static_cast<int>(arrived.size()) == opts_.world_size || !lost().empty();
    });
    if (static_cast<int>(arrived.size()) == opts_.world_size) return {true, ""};
    if (auto l = lost(); !l.empty())
      return {false, fmt::format("rendezvous barrier '{}' failed: {} disconnected before arriving "
                                 "(the process exited or crashed)",
                                 name, format_rank_list(l))};
    if (stopping_) return {false, "rendezvous store on rank 0 is shutting down"};
    (void)done;
    return {false, fmt::format("rendezvous barrier '{}' timed out after {}: {} did not arrive",
                               name, seconds_text(timeout), format_rank_list(missing()))};
  }

 private:
  void accept_loop() {
    while (true) {
      pollfd pfd{listen_fd_, POLLIN, 0};
      int r = ::poll(&pfd, 1, 100);
      {
        std::lock_guard lk(mu_);
        if (stopping_) return;
      }
      if (r <= 0) continue;
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      set_nodelay(fd);
      std::lock_guard lk(mu_);
      if (stopping_) {
        ::close(fd);
        return;
      }
      clients_.insert(fd);
      threads_.emplace_back([this, fd] { serve(fd); });
    }
  }

  void serve(int fd) {
    int rank = -1;
    std::string msg;
    while (true) {
      IoResult r = recv_msg(fd, msg, Clock::time_point::max());
      if (r != IoResult::Ok) break;
      {
        std::lock_guard lk(mu_);
        if (stopping_) break;
        ++busy_;
      }
      std::string out;
      try {
        Reader rd{msg};
        uint8_t op = rd.u8();
        if (op == kHello) {
          int peer = static_cast<int>(rd.u32());
          int world = static_cast<int>(rd.u32());
          std::lock_guard lk(mu_);
          if (world != opts_.world_size)
            out = reply(kFail, fmt::format("rank {} was started with world size {} but rank 0 "
                                           "with {}: all ranks need the same WORLD_SIZE",
                                           peer, world, opts_.world_size));
          else if (peer <= 0 || peer >= opts_.world_size)
            out = reply(kFail, fmt::format("rank {} is outside [1, {})", peer, opts_.world_size));
          else if (connected_.count(peer))
            out = reply(kFail, fmt::format("two processes claim rank {}: check RANK / "
                                           "--node_rank of each launcher",
                                           peer));
          else {
            rank = peer;
            connected_.insert(peer);
            departed_.erase(peer);
            out = reply(kOk, "");
          }
        } else if (op == kSet) {
          std::string k = rd.str(), v = rd.str();
          set(k, v);
          out = reply(kOk, "");
        } else if (op == kGet) {
          std::string k = rd.str();
          auto [ok, v] = get(k, milliseconds(rd.u32()));
          out = reply(ok ? kOk : kFail, v);
        } else if (op == kBarrier) {
          std::string k = rd.str(), name = rd.str();
          auto [ok, v] = barrier(k, name, rank, milliseconds(rd.u32()));
          out = reply(ok ? kOk : kFail, v);
        } else {
          out = reply(kFail, fmt::format("unknown rendezvous request {}", op));
        }
      } catch (const std::exception& e) {
        out = reply(kFail, e.what());
      }
      IoResult w = send_msg(fd, out);
      {
        std::lock_guard lk(mu_);
        --busy_;
        cv_.notify_all();
      }
      if (w != IoResult::Ok) break;
    }
    std::lock_guard lk(mu_);
    clients_.erase(fd);
    if (rank >= 0) {
      connected_.erase(rank);
      departed_.insert(rank);
    }
    ::close(fd);
    cv_.notify_all();
  }

  RendezvousOptions opts_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  int busy_ = 0;
  std::map<std::string, std::string> kv_;
  std::map<std::string, std::set<int>> barriers_;
  std::set<int> connected_, departed_, clients_;
  std::thread accept_thread_;
  std::vector<std::thread> threads_;
};

// ---------------------------------------------------------------------------------------
Rendezvous::Rendezvous(const RendezvousOptions& opts) : opts_(opts) {
  if (opts.world_size < 1 || opts.rank < 0 || opts.rank >= opts.world_size)
    throw Error(ErrorKind::Config, fmt::format("rendezvous: rank {} is outside [0, {})", opts.rank,
                                               opts.world_size));
  if (opts.rank == 0) {
    server_ = std::make_unique<StoreServer>(opts);
    bound_port_ = server_->port();
    return;
  }
  auto deadline = Clock::now() + opts.connect_timeout;
  std::string last_error = "no attempt";
  std::string port = std::to_string(opts.master_port);
  milliseconds backoff{20};
  while (true) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    int rc = ::getaddrinfo(opts.master_addr.c_str(), port.c_str(), &hints, &res);
    if (rc != 0) {
      last_error = fmt::format("cannot resolve '{}': {}", opts.master_addr, ::gai_strerror(rc));
    } else {
      for (addrinfo* a = res; a && fd_ < 0; a = a->ai_next) {
        int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) continue;
        int c;
        do c = ::connect(fd, a->ai_addr, a->ai_addrlen);
        while (c != 0 && errno == EINTR);
        if (c == 0) {
          fd_ = fd;
        } else {
          last_error = std::strerror(errno);
          ::close(fd);
        }
      }
      ::freeaddrinfo(res);
    }
    if (fd_ >= 0) break;
    if (Clock::now() + backoff >= deadline)
      throw Error(ErrorKind::Device,
                  fmt::format("rank {} could not connect to the rendezvous store of rank 0 at "
                              "{}:{} within {}: {}; check MASTER_ADDR / MASTER_PORT and that "
                              "rank 0 started",
                              opts.rank, opts.master_addr, opts.master_port,
                              seconds_text(opts.connect_timeout), last_error));
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, milliseconds(500));
  }
  set_nodelay(fd_);
  bound_port_ = opts.master_port;
  std::string hello(1, static_cast<char>(kHello));
  put_u32(hello, static_cast<uint32_t>(opts.rank));
  put_u32(hello, static_cast<uint32_t>(opts.world_size));
  try {
    request(hello, opts.timeout);
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

Rendezvous::~Rendezvous() {
  if (fd_ >= 0) {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
  }
}

int Rendezvous::port() const { return bound_port_; }

std::string Rendezvous::request(const std::string& payload, milliseconds wait) {
  auto lost = [&] {
    return Error(ErrorKind::Device,
                 fmt::format("rank {} lost its connection to the rendezvous store on rank 0 "
                             "({}:{}): rank 0 exited or crashed",
                             opts_.rank, opts_.master_addr, opts_.master_port));
  };
  if (send_msg(fd_, payload) != IoResult::Ok) throw lost();
  // The server bounds its own waits by `wait`; the margin covers the network.
  std::string msg;
  IoResult r = recv_msg(fd_, msg, Clock::now() + wait + milliseconds(10000));
  if (r == IoResult::Timeout)
    throw Error(ErrorKind::Device,
                fmt::format("rank {}: no reply from the rendezvous store on rank 0 ({}:{}) "
                            "within {}",
                            opts_.rank, opts_.master_addr, opts_.master_port,
                            seconds_text(wait + milliseconds(10000))));
  if (r != IoResult::Ok || msg.empty()) throw lost();
  if (static_cast<uint8_t>(msg[0]) != kOk) throw Error(ErrorKind::Device, msg.substr(1));
  return msg.substr(1);
}

void Rendezvous::set(const std::string& key, const std::string& value) {
  if (server_) return server_->set(key, value);
  std::string p(1, static_cast<char>(kSet));
  put_str(p, key);
  put_str(p, value);
  request(p, opts_.timeout);
}

std::string Rendezvous::get(const std::string& key) {
  if (server_) {
    auto [ok, v] = server_->get(key, opts_.timeout);
    if (!ok) throw Error(ErrorKind::Device, v);
    return v;
  }
  std::string p(1, static_cast<char>(kGet));
  put_str(p, key);
  put_u32(p, static_cast<uint32_t>(opts_.timeout.count()));
  return request(p, opts_.timeout);
}

void Rendezvous::barrier(const std::string& name) {
  int n = barrier_counts_[name]++;
  std::string key = fmt::format("{}#{}", name, n);
  if (server_) {
    auto [ok, v] = server_->barrier(key, name, 0, opts_.timeout);
    if (!ok) throw Error(ErrorKind::Device, v);
    return;
  }
  std::string p(1, static_cast<char>(kBarrier));
  put_str(p, key);
  put_str(p, name);
  put_u32(p, static_cast<uint32_t>(opts_.timeout.count()));
  request(p, opts_.timeout);
}

}  // namespace dskc
