// `dskc launch` through the built binary: environment of each rank, "[rank K]" prefixes,
// a failing rank stops the others quickly and is named, all-zero exits give 0, usage errors.
#include <doctest/doctest.h>

#include <chrono>
#include <set>

#include "runtime/driver.h"
#include "test_util.h"

using namespace dskc_test;
using Clock = std::chrono::steady_clock;

namespace {
bool contains(const std::string& s, const std::string& sub) { return s.find(sub) != std::string::npos; }
}

TEST_CASE("launch sets each rank's environment and prefixes its output") {
  auto r = run_dskc("launch --nproc_per_node 3 --master_port 29611 -- sh -c "
                    "'echo $RANK $LOCAL_RANK $WORLD_SIZE $LOCAL_WORLD_SIZE $MASTER_ADDR $MASTER_PORT "
                    "$NCCL_NVLS_ENABLE; echo err$RANK >&2'");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  for (int k = 0; k < 3; ++k) {
    std::string line = "[rank " + std::to_string(k) + "] " + std::to_string(k) + " " +
                       std::to_string(k) + " 3 3 127.0.0.1 29611 0\n";
    auto pos = r.output.find(line);
    CHECK(pos != std::string::npos);
    CHECK(r.output.find(line, pos + 1) == std::string::npos);  // exactly once
    CHECK(contains(r.output, "[rank " + std::to_string(k) + "] err" + std::to_string(k) + "\n"));
  }
}

TEST_CASE("multi-node ranks and a user's NCCL_NVLS_ENABLE are kept") {
  auto r = run_dskc("launch --nproc_per_node 2 --nnodes 3 --node_rank 1 --master_addr 10.1.2.3 -- "
                    "sh -c 'echo $RANK/$WORLD_SIZE $LOCAL_RANK $MASTER_ADDR $NCCL_NVLS_ENABLE'",
                    "NCCL_NVLS_ENABLE=1");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.output, "[rank 2] 2/6 0 10.1.2.3 1\n"));
  CHECK(contains(r.output, "[rank 3] 3/6 1 10.1.2.3 1\n"));
}

TEST_CASE("a failing rank stops the job quickly and is named") {
  auto start = Clock::now();
  auto r = run_dskc("launch --nproc_per_node 3 --grace_s 2 -- sh -c "
                    "'if [ $RANK = 1 ]; then exit 3; fi; sleep 30'");
  auto elapsed = Clock::now() - start;
  INFO(r.output);
  CHECK(r.exit_code != 0);
  CHECK(contains(r.output, "rank 1 (local rank 1"));
  CHECK(contains(r.output, "exit status 3"));
  CHECK(contains(r.output, "job failed: rank 1 exited with exit status 3"));
  CHECK(elapsed < std::chrono::seconds(10));
}

TEST_CASE("a rank killed by a signal is named; a rank ignoring SIGTERM gets SIGKILL") {
  auto start = Clock::now();
  auto r = run_dskc("launch --nproc_per_node 2 --grace_s 1 -- sh -c "
                    "'if [ $RANK = 0 ]; then sleep 0.2; kill -9 $$; fi; trap \"\" TERM; "
                    "while true; do sleep 0.1; done'");
  auto elapsed = Clock::now() - start;
  INFO(r.output);
  CHECK(r.exit_code != 0);
  CHECK(contains(r.output, "rank 0 (local rank 0"));
  CHECK(contains(r.output, "signal 9"));
  CHECK(elapsed < std::chrono::seconds(10));
}

TEST_CASE("all ranks exiting 0 gives 0") {
  auto r = run_dskc("launch --nproc_per_node 4 -- true");
  INFO(r.output);
  CHECK(r.exit_code == 0);
}

TEST_CASE("SIGTERM to the launcher is forwarded to the ranks") {
  TempDir tmp;
  std::string out = tmp / "out.txt";
  auto start = Clock::now();
  std::string cmd = dskc_binary() + " launch --nproc_per_node 2 -- sh -c 'sleep 30' >" + out +
                    " 2>&1 & pid=$!; sleep 0.5; kill -TERM $pid; wait $pid; echo rc=$? >>" + out;
  int rc = std::system(cmd.c_str());
  (void)rc;
  std::string text = read_file(out);
  INFO(text);
  CHECK(contains(text, "stopping all ranks"));
  CHECK(contains(text, "rc=143"));
  CHECK(Clock::now() - start < std::chrono::seconds(10));
}

TEST_CASE("usage errors") {
  auto r = run_dskc("launch -- true");
  CHECK(r.exit_code == 2);
  CHECK(contains(r.output, "--nproc_per_node is required"));
  r = run_dskc("launch --nproc_per_node 2");
  CHECK(r.exit_code == 2);
  CHECK(contains(r.output, "no command given"));
  r = run_dskc("launch --nproc_per_node 2 --nnodes 2 --node_rank 2 -- true");
  CHECK(r.exit_code == 2);
  CHECK(contains(r.output, "--node_rank 2 is outside"));
  r = run_dskc("launch --nproc_per_node 1 -- /nonexistent/program");
  CHECK(r.exit_code == 127);
  CHECK(contains(r.output, "cannot run '/nonexistent/program'"));
}

TEST_CASE("data-parallel dskc train on a machine without a GPU fails fast on every rank, named") {
  if (dskc::gpu_available()) return;  // covered by tests/gpu/test_data_parallel.cpp there
  TempDir d;
  const std::string src = source_dir();
  auto r = run_dskc("launch --nproc_per_node 2 --master_port 29612 -- " + dskc_binary() +
                    " train --deepspeed_config " + src + "/examples/deepspeed_tiny_config.json --cf " + src +
                    "/examples/bert_tiny_model.json --max_seq_length 128 --max_steps 2 --output_dir " + d / "out");
  INFO(r.output);
  CHECK(r.exit_code != 0);
  CHECK(contains(r.output, "data-parallel training needs a GPU per process"));
  CHECK(contains(r.output, "job failed: rank"));
  CHECK(!fs::exists(d / "out"));  // nothing written
}
