// The distributed-job environment of one dskc process: its rank, local rank, world size and
// where rank 0's rendezvous store listens. Read from the variables torchrun / the deepspeed
// launcher / `dskc launch` set (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT) or, when those are absent, from Open MPI's (OMPI_COMM_WORLD_*). With none set
// the process is a single-rank job. Invariants after read_dist_env(): 0 <= rank < world_size,
// 0 <= local_rank < local_world_size <= world_size, world_size % local_world_size == 0 is NOT
// required (uneven nodes are allowed), master_addr non-empty and 1 <= master_port <= 65535
// whenever world_size > 1.
#pragma once
#include <functional>
#include <optional>
#include <string>

namespace dskc {

struct DistEnv {
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string source = "default";  // "torchrun", "openmpi" or "default": where values came from

  bool distributed() const { return world_size > 1; }
  std::string describe() const;  // "rank 1/4 (local 1/2), master 10.0.0.1:29500"
};

// Looks a variable up; returns nullopt when unset. Tests pass a map-backed lookup.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
EnvLookup process_env();

// Reads and validates the environment. Throws Error(Config) on malformed or inconsistent
// values, naming the variable and what was expected.
DistEnv read_dist_env(const EnvLookup& env = process_env());

// Checks a DistEnv's invariants (see above); throws Error(Config).
void validate_dist_env(const DistEnv& e);

}  // namespace dskc
