// Reads DistEnv from launcher variables (torchrun / deepspeed / dskc launch, else Open MPI,
// else single process) and validates it with messages naming the offending variable.
#include "trainer/dist_env.h"

#include <cerrno>
#include <cstdlib>
#include <fmt/format.h>

#include "compiler/errors.h"

namespace dskc {

std::string DistEnv::describe() const {
  return fmt::format("rank {}/{} (local {}/{}), master {}:{}", rank, world_size, local_rank,
                     local_world_size, master_addr, master_port);
}

EnvLookup process_env() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  };
}

namespace {

int parse_int_var(const std::string& name, const std::string& value) {
  errno = 0;
  char* end = nullptr;
  long v = std::strtol(value.c_str(), &end, 10);
  if (value.empty() || errno != 0 || end == value.c_str() || *end != '\0' || v < -1000000000L ||
      v > 1000000000L)
    throw Error(ErrorKind::Config,
                fmt::format("environment variable {}='{}' is not an integer", name, value));
  return static_cast<int>(v);
}

std::optional<int> int_var(const EnvLookup& env, const std::string& name) {
  auto v = env(name);
  if (!v) return std::nullopt;
  return parse_int_var(name, *v);
}

}  // namespace

void validate_dist_env(const DistEnv& e) {
  if (e.world_size < 1)
    throw Error(ErrorKind::Config,
                fmt::format("world size {} must be at least 1 (WORLD_SIZE / OMPI_COMM_WORLD_SIZE)",
                            e.world_size));
  if (e.rank < 0 || e.rank >= e.world_size)
    throw Error(ErrorKind::Config,
                fmt::format("rank {} is outside [0, {}): RANK must be below WORLD_SIZE", e.rank,
                            e.world_size));
  if (e.local_world_size < 1 || e.local_world_size > e.world_size)
    throw Error(ErrorKind::Config,
                fmt::format("local world size {} must be in [1, WORLD_SIZE={}] (LOCAL_WORLD_SIZE)",
                            e.local_world_size, e.world_size));
  if (e.local_rank < 0 || e.local_rank >= e.local_world_size)
    throw Error(ErrorKind::Config,
                fmt::format("local rank {} is outside [0, {}): LOCAL_RANK must be below "
                            "LOCAL_WORLD_SIZE",
                            e.local_rank, e.local_world_size));
  if (e.local_rank > e.rank)
    throw Error(ErrorKind::Config,
                fmt::format("local rank {} is larger than global rank {}: the launcher's RANK and "
                            "LOCAL_RANK are inconsistent",
                            e.local_rank, e.rank));
  if (e.world_size > 1) {
    if (e.master_addr.empty())
      throw Error(ErrorKind::Config,
                  fmt::format("WORLD_SIZE={} but MASTER_ADDR is not set: set it to the address of "
                              "the rank-0 host (e.g. MASTER_ADDR=127.0.0.1 on one node)",
                              e.world_size));
    if (e.master_port < 1 || e.master_port > 65535)
      throw Error(ErrorKind::Config,
                  fmt::format("MASTER_PORT={} is not a TCP port in [1, 65535]", e.master_port));
  }
}

DistEnv read_dist_env(const EnvLookup& env) {
  DistEnv e;
  bool torch = env("RANK") || env("WORLD_SIZE");
  bool ompi = !torch && (env("OMPI_COMM_WORLD_RANK") || env("OMPI_COMM_WORLD_SIZE"));
  if (torch) {
    e.source = "torchrun";
    auto rank = int_var(env, "RANK");
    auto world = int_var(env, "WORLD_SIZE");
    if (!rank || !world)
      throw Error(ErrorKind::Config,
                  fmt::format("{} is set but {} is not: a launcher sets RANK and WORLD_SIZE "
                              "together",
                              rank ? "RANK" : "WORLD_SIZE", rank ? "WORLD_SIZE" : "RANK"));
    e.rank = *rank;
    e.world_size = *world;
    // Without LOCAL_RANK every rank is assumed to be on its own node... except a single node
    // job; torchrun always sets LOCAL_RANK, so fall back to a one-process-per-node view.
    e.local_rank = int_var(env, "LOCAL_RANK").value_or(0);
    auto lws = int_var(env, "LOCAL_WORLD_SIZE");
    if (lws) {
      e.local_world_size = *lws;
    } else {
      e.local_world_size = env("LOCAL_RANK") ? e.world_size : 1;  // deepspeed sets no LWS
    }
  } else if (ompi) {
    e.source = "openmpi";
    auto rank = int_var(env, "OMPI_COMM_WORLD_RANK");
    auto world = int_var(env, "OMPI_COMM_WORLD_SIZE");
    if (!rank || !world)
      throw Error(ErrorKind::Config,
                  "OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE must both be set under mpirun");
    e.rank = *rank;
    e.world_size = *world;
    e.local_rank = int_var(env, "OMPI_COMM_WORLD_LOCAL_RANK").value_or(0);
    e.local_world_size = int_var(env, "OMPI_COMM_WORLD_LOCAL_SIZE").value_or(1);
  } else {
    // Single process; LOCAL_RANK alone (e.g. CUDA device pick) is still honoured if it is 0.
    if (auto lr = int_var(env, "LOCAL_RANK"); lr && *lr != 0)
      throw Error(ErrorKind::Config,
                  fmt::format("LOCAL_RANK={} is set but RANK/WORLD_SIZE are not: start "
                              "multi-process jobs with `dskc launch`, torchrun, deepspeed or "
                              "mpirun",
                              *lr));
  }
  // Rendezvous address: the torch variables, also honoured under mpirun (set with -x).
  if (auto a = env("MASTER_ADDR")) {
    e.master_addr = *a;
  } else if (e.world_size > 1) {
    e.master_addr.clear();  // required; validate() names it
  }
  if (auto p = env("MASTER_PORT")) {
    e.master_port = parse_int_var("MASTER_PORT", *p);
  }
  validate_dist_env(e);
  return e;
}

}  // namespace dskc
