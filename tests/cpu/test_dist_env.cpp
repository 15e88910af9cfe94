// DistEnv: reading torchrun / deepspeed / Open MPI variables, single-process defaults, and
// validation messages. Uses a map-backed lookup; never touches the real environment.
#include <doctest/doctest.h>

#include <map>

#include "compiler/errors.h"
#include "trainer/dist_env.h"

using namespace dskc;

namespace {
EnvLookup env_of(std::map<std::string, std::string> m) {
  return [m](const std::string& k) -> std::optional<std::string> {
    auto it = m.find(k);
    if (it == m.end()) return std::nullopt;
    return it->second;
  };
}
std::string error_of(std::map<std::string, std::string> m) {
  try {
    read_dist_env(env_of(std::move(m)));
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Config);
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("no launcher variables: single process") {
  DistEnv e = read_dist_env(env_of({}));
  CHECK(e.rank == 0);
  CHECK(e.world_size == 1);
  CHECK(e.local_rank == 0);
  CHECK(e.local_world_size == 1);
  CHECK_FALSE(e.distributed());
  CHECK(e.source == "default");
}

TEST_CASE("torchrun variables") {
  DistEnv e = read_dist_env(env_of({{"RANK", "3"}, {"LOCAL_RANK", "1"}, {"WORLD_SIZE", "4"},
                                    {"LOCAL_WORLD_SIZE", "2"}, {"MASTER_ADDR", "10.0.0.7"},
                                    {"MASTER_PORT", "29600"}}));
  CHECK(e.rank == 3);
  CHECK(e.local_rank == 1);
  CHECK(e.world_size == 4);
  CHECK(e.local_world_size == 2);
  CHECK(e.master_addr == "10.0.0.7");
  CHECK(e.master_port == 29600);
  CHECK(e.distributed());
  CHECK(e.source == "torchrun");
  CHECK(e.describe() == "rank 3/4 (local 1/2), master 10.0.0.7:29600");
}

TEST_CASE("deepspeed launcher: no LOCAL_WORLD_SIZE") {
  DistEnv e = read_dist_env(env_of({{"RANK", "1"}, {"LOCAL_RANK", "1"}, {"WORLD_SIZE", "2"},
                                    {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}}));
  CHECK(e.local_rank == 1);
  CHECK(e.local_world_size == 2);
}

TEST_CASE("Open MPI variables") {
  DistEnv e = read_dist_env(env_of({{"OMPI_COMM_WORLD_RANK", "5"}, {"OMPI_COMM_WORLD_SIZE", "8"},
                                    {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                    {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                                    {"MASTER_ADDR", "node0"}}));
  CHECK(e.source == "openmpi");
  CHECK(e.rank == 5);
  CHECK(e.world_size == 8);
  CHECK(e.local_rank == 1);
  CHECK(e.local_world_size == 4);
  CHECK(e.master_addr == "node0");
  CHECK(e.master_port == 29500);
}

TEST_CASE("torch variables win over Open MPI's") {
  DistEnv e = read_dist_env(env_of({{"RANK", "0"}, {"WORLD_SIZE", "1"},
                                    {"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"}}));
  CHECK(e.source == "torchrun");
  CHECK(e.world_size == 1);
}

TEST_CASE("validation errors name the variable") {
  CHECK(error_of({{"RANK", "4"}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "a"}}).find("rank 4 is outside [0, 4)") !=
        std::string::npos);
  CHECK(error_of({{"RANK", "-1"}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "a"}}).find("outside") !=
        std::string::npos);
  CHECK(error_of({{"RANK", "1"}, {"WORLD_SIZE", "2"}}).find("MASTER_ADDR is not set") !=
        std::string::npos);
  CHECK(error_of({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "70000"}})
            .find("MASTER_PORT=70000") != std::string::npos);
  CHECK(error_of({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "x"}})
            .find("MASTER_PORT='x' is not an integer") != std::string::npos);
  CHECK(error_of({{"RANK", "one"}, {"WORLD_SIZE", "2"}}).find("RANK='one'") != std::string::npos);
  CHECK(error_of({{"RANK", "1"}}).find("WORLD_SIZE is not") != std::string::npos);
  CHECK(error_of({{"WORLD_SIZE", "0"}, {"RANK", "0"}}).find("at least 1") != std::string::npos);
  CHECK(error_of({{"RANK", "1"}, {"LOCAL_RANK", "2"}, {"WORLD_SIZE", "4"}, {"LOCAL_WORLD_SIZE", "2"},
                  {"MASTER_ADDR", "a"}})
            .find("LOCAL_RANK must be below") != std::string::npos);
  CHECK(error_of({{"RANK", "0"}, {"LOCAL_RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_WORLD_SIZE", "2"},
                  {"MASTER_ADDR", "a"}})
            .find("inconsistent") != std::string::npos);
  CHECK(error_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_WORLD_SIZE", "3"}, {"MASTER_ADDR", "a"}})
            .find("LOCAL_WORLD_SIZE") != std::string::npos);
  CHECK(error_of({{"LOCAL_RANK", "1"}}).find("dskc launch") != std::string::npos);
}
