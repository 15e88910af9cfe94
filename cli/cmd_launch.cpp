// `dskc launch`: starts one process per local GPU with the launcher environment that
// `dskc train` (and torchrun-style programs) read: RANK, LOCAL_RANK, WORLD_SIZE,
// LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT; NCCL_NVLS_ENABLE=0 unless the user set it.
// No --local_rank argument is appended (unlike deepspeed's launcher): dskc train reads
// LOCAL_RANK from the environment.
// Invariants: each child runs in its own process group so the whole tree of a rank can be
// signalled; every output line of rank K is prefixed "[rank K] " (stdout to stdout, stderr to
// stderr); when any rank exits non-zero or is killed, or the launcher gets SIGINT/SIGTERM,
// the other ranks get SIGTERM and, after a grace period, SIGKILL; the launcher exits 0 only
// when every rank exited 0, and otherwise names the first failed rank and its status.
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <optional>
#include <poll.h>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "cli/args.h"
#include "cli/commands.h"
#include "compiler/errors.h"

namespace dskc::cli {
namespace {

using Clock = std::chrono::steady_clock;
int g_signal_pipe[2] = {-1, -1};

void on_signal(int sig) {
  int saved = errno;
  unsigned char b = static_cast<unsigned char>(sig);
  [[maybe_unused]] ssize_t r = ::write(g_signal_pipe[1], &b, 1);
  errno = saved;
}

struct Stream {
  int fd = -1;
  int rank = 0;
  FILE* out = nullptr;
  std::string partial;
};

struct Child {
  pid_t pid = -1;
  int rank = 0, local_rank = 0;
  bool alive = true;
  int status = 0;
};

void emit(Stream& s, const char* data, size_t n, bool flush_partial) {
  s.partial.append(data, n);
  size_t start = 0, nl;
  while ((nl = s.partial.find('\n', start)) != std::string::npos) {
    std::fprintf(s.out, "[rank %d] %.*s\n", s.rank, static_cast<int>(nl - start),
                 s.partial.data() + start);
    start = nl + 1;
  }
  s.partial.erase(0, start);
  if (flush_partial && !s.partial.empty()) {
    std::fprintf(s.out, "[rank %d] %s\n", s.rank, s.partial.c_str());
    s.partial.clear();
  }
  std::fflush(s.out);
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return fmt::format("exit status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return fmt::format("signal {} ({})", sig, ::strsignal(sig));
  }
  return fmt::format("status {}", status);
}

std::vector<char*> make_argv(std::vector<std::string>& cmd) {
  std::vector<char*> v;
  for (auto& s : cmd) v.push_back(s.data());
  v.push_back(nullptr);
  return v;
}

}  // namespace

int cmd_launch(const Args& all_args) {
  // Options before "--", the command after it.
  Args opts_args, command;
  bool after = false;
  for (const auto& a : all_args) {
    if (!after && a == "--") {
      after = true;
      continue;
    }
    (after ? command : opts_args).push_back(a);
  }
  std::optional<int> nproc, nnodes, node_rank, master_port, grace;
  std::string master_addr = "127.0.0.1";
  std::vector<std::string> stray;
  ArgParser p("launch",
              "start N local ranks of a command with RANK, LOCAL_RANK, WORLD_SIZE, "
              "LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT set:\n"
              "  dskc launch --nproc_per_node N [--nnodes M --node_rank R --master_addr A "
              "--master_port P] -- dskc train ...\n"
              "No --local_rank argument is appended; dskc train reads LOCAL_RANK.");
  p.add_int("nproc_per_node", &nproc, "processes (GPUs) on this node (required)");
  p.add_int("nnodes", &nnodes, "number of nodes (default 1)");
  p.add_int("node_rank", &node_rank, "this node's index in [0, nnodes) (default 0)");
  p.add_option("master_addr", &master_addr, "ADDR", "address of the node with rank 0 (default 127.0.0.1)");
  p.add_int("master_port", &master_port, "rendezvous TCP port on the master (default 29500)");
  p.add_int("grace_s", &grace, "seconds between SIGTERM and SIGKILL when stopping ranks (default 5)");
  p.add_positionals(&stray, "", "");
  if (!p.parse(opts_args)) return 0;
  if (!stray.empty())
    throw Error(ErrorKind::Usage, fmt::format("unexpected argument '{}': put the command after "
                                              "'--' (dskc launch --nproc_per_node N -- CMD ...)",
                                              stray.front()));
  if (command.empty())
    throw Error(ErrorKind::Usage, "no command given: dskc launch --nproc_per_node N -- CMD ...");
  if (!nproc) throw Error(ErrorKind::Usage, "--nproc_per_node is required");
  if (*nproc < 1 || *nproc > 1024)
    throw Error(ErrorKind::Usage, fmt::format("--nproc_per_node {} must be in [1, 1024]", *nproc));
  int nodes = nnodes.value_or(1), node = node_rank.value_or(0), port = master_port.value_or(29500);
  if (nodes < 1) throw Error(ErrorKind::Usage, fmt::format("--nnodes {} must be at least 1", nodes));
  if (node < 0 || node >= nodes)
    throw Error(ErrorKind::Usage,
                fmt::format("--node_rank {} is outside [0, --nnodes={})", node, nodes));
  if (port < 1 || port > 65535)
    throw Error(ErrorKind::Usage, fmt::format("--master_port {} is not in [1, 65535]", port));
  if (master_addr.empty()) throw Error(ErrorKind::Usage, "--master_addr must not be empty");
  auto grace_period = std::chrono::seconds(grace.value_or(5));
  int world = nodes * *nproc;

  if (::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
    throw Error(ErrorKind::Io, fmt::format("pipe: {}", std::strerror(errno)));
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  struct sigaction old_int {}, old_term {}, old_chld {};
  ::sigaction(SIGINT, &sa, &old_int);
  ::sigaction(SIGTERM, &sa, &old_term);
  ::sigaction(SIGCHLD, &sa, &old_chld);
  std::signal(SIGPIPE, SIG_IGN);
  std::fflush(stdout);
  std::fflush(stderr);

  std::vector<Child> children;
  std::vector<Stream> streams;
  auto signal_all = [&](int sig) {
    for (auto& c : children)
      if (c.alive) ::kill(-c.pid, sig);
  };
  for (int lr = 0; lr < *nproc; ++lr) {
    int out_pipe[2], err_pipe[2];
    if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) {
      signal_all(SIGKILL);
      throw Error(ErrorKind::Io, fmt::format("pipe: {}", std::strerror(errno)));
    }
    Child c;
    c.local_rank = lr;
    c.rank = node * *nproc + lr;
    // Block signals across fork so a child cannot run the launcher's handler (which would
    // write into the launcher's signal pipe) before it resets its dispositions.
    sigset_t all, prev;
    sigfillset(&all);
    ::sigprocmask(SIG_BLOCK, &all, &prev);
    pid_t pid = ::fork();
    if (pid != 0) ::sigprocmask(SIG_SETMASK, &prev, nullptr);
    if (pid < 0) {
      signal_all(SIGKILL);
      throw Error(ErrorKind::Io, fmt::format("fork: {}", std::strerror(errno)));
    }
    if (pid == 0) {
      ::setpgid(0, 0);
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      for (int s : {SIGINT, SIGTERM, SIGCHLD, SIGPIPE}) ::sigaction(s, &dfl, nullptr);
      ::sigprocmask(SIG_SETMASK, &prev, nullptr);
      ::dup2(out_pipe[1], 1);
      ::dup2(err_pipe[1], 2);
      ::setenv("RANK", std::to_string(c.rank).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(lr).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
      ::setenv("LOCAL_WORLD_SIZE", std::to_string(*nproc).c_str(), 1);
      ::setenv("MASTER_ADDR", master_addr.c_str(), 1);
      ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      ::setenv("NCCL_NVLS_ENABLE", "0", 0);
      auto argv = make_argv(command);
      ::execvp(argv[0], argv.data());
      std::fprintf(stderr, "dskc launch: cannot run '%s': %s\n", argv[0], std::strerror(errno));
      std::fflush(stderr);
      ::_exit(127);
    }
    ::setpgid(pid, pid);  // also in the parent, so kill(-pid) works without a race
    ::close(out_pipe[1]);
    ::close(err_pipe[1]);
    c.pid = pid;
    children.push_back(c);
    streams.push_back(Stream{out_pipe[0], c.rank, stdout, {}});
    streams.push_back(Stream{err_pipe[0], c.rank, stderr, {}});
  }

  int failed = -1;          // index of the first failed child
  int launcher_signal = 0;  // signal the launcher got, if any
  std::optional<Clock::time_point> kill_at;
  std::optional<Clock::time_point> drain_until;
  auto begin_stop = [&](int sig) {
    if (kill_at) return;
    signal_all(sig);
    kill_at = Clock::now() + grace_period;
  };
  auto any_alive = [&] {
    for (auto& c : children)
      if (c.alive) return true;
    return false;
  };

  while (true) {
    // Reap.
    for (size_t i = 0; i < children.size(); ++i) {
      Child& c = children[i];
      if (!c.alive) continue;
      int st = 0;
      pid_t r = ::waitpid(c.pid, &st, WNOHANG);
      if (r == c.pid) {
        c.alive = false;
        c.status = st;
        bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
        if (!ok && failed < 0 && !launcher_signal && !kill_at) {
          failed = static_cast<int>(i);
          std::fprintf(stderr, "dskc launch: rank %d (local rank %d, pid %d) failed with %s; "
                       "stopping the other ranks\n",
                       c.rank, c.local_rank, static_cast<int>(c.pid), describe_status(st).c_str());
          begin_stop(SIGTERM);
        }
      }
    }
    if (kill_at && Clock::now() >= *kill_at) {
      signal_all(SIGKILL);
      kill_at = Clock::now() + std::chrono::hours(1);  // once
    }
    bool open = false;
    for (auto& s : streams) open |= s.fd >= 0;
    if (!any_alive()) {
      // Descendants may still hold a pipe open: drain for a short while only.
      if (!drain_until) drain_until = Clock::now() + std::chrono::milliseconds(500);
      if (!open || Clock::now() >= *drain_until) break;
    }
    std::vector<pollfd> fds;
    fds.push_back({g_signal_pipe[0], POLLIN, 0});
    std::vector<Stream*> order;
    for (auto& s : streams)
      if (s.fd >= 0) {
        fds.push_back({s.fd, POLLIN, 0});
        order.push_back(&s);
      }
    int r = ::poll(fds.data(), fds.size(), 100);
    if (r < 0 && errno != EINTR) break;
    if (r <= 0) continue;
    if (fds[0].revents & POLLIN) {
      unsigned char b;
      while (::read(g_signal_pipe[0], &b, 1) == 1) {
        if ((b == SIGINT || b == SIGTERM) && !launcher_signal) {
          launcher_signal = b;
          std::fprintf(stderr, "dskc launch: got %s; stopping all ranks\n", ::strsignal(b));
          signal_all(b);
          kill_at = Clock::now() + grace_period;
        }
      }
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      Stream& s = *order[i - 1];
      char buf[65536];
      ssize_t n = ::read(s.fd, buf, sizeof buf);
      if (n > 0) {
        emit(s, buf, static_cast<size_t>(n), false);
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        emit(s, "", 0, true);
        ::close(s.fd);
        s.fd = -1;
      }
    }
  }
  for (auto& s : streams)
    if (s.fd >= 0) {
      emit(s, "", 0, true);
      ::close(s.fd);
    }
  // Leave no stray descendants of a failed or stopped job.
  if (failed >= 0 || launcher_signal)
    for (auto& c : children) ::kill(-c.pid, SIGKILL);
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);
  ::sigaction(SIGCHLD, &old_chld, nullptr);
  ::close(g_signal_pipe[0]);
  ::close(g_signal_pipe[1]);

  if (launcher_signal) return 128 + launcher_signal;
  if (failed >= 0) {
    const Child& c = children[failed];
    std::fprintf(stderr, "dskc launch: job failed: rank %d exited with %s\n", c.rank,
                 describe_status(c.status).c_str());
    if (WIFEXITED(c.status)) return WEXITSTATUS(c.status);
    return 128 + WTERMSIG(c.status);
  }
  return 0;
}

}  // namespace dskc::cli
