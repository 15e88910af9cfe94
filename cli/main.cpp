// dskc command-line entry: dispatches to subcommands and maps dskc::Error to exit codes.
// Exit codes: 0 ok, 1 other failure, 2 usage, 3 config, 4 input file, 5 NVRTC compile,
// 6 device/CUDA, 7 I/O, 70 internal error.
#include <fmt/format.h>

#include <cstdio>
#include <exception>
#include <map>
#include <string>

#include "cli/commands.h"
#include "compiler/config.h"
#include "compiler/errors.h"

namespace {
using Handler = int (*)(const dskc::cli::Args&);
struct Command {
  Handler fn;
  const char* summary;
};
const std::map<std::string, Command>& commands() {
  using namespace dskc::cli;
  static const std::map<std::string, Command> c = {
      {"compile", {cmd_compile, "compile a layer config to a cubin/PTX module with a manifest"}},
      {"inspect", {cmd_inspect, "show generated CUDA source, kernels, memory plan, resources"}},
      {"run-layer", {cmd_run_layer, "run one layer forward/backward on safetensors inputs (cuda or cpu)"}},
      {"bench", {cmd_bench, "time a layer's forward and backward on the GPU"}},
      {"bench-memory", {cmd_bench_memory, "largest BERT training micro-batch that fits, per memory flag and cap"}},
      {"cache", {cmd_cache, "list, summarize or clear the kernel cache (ls|stats|clear)"}},
      {"prepare-data", {cmd_prepare_data, "make HDF5 pre-training shards from plain text with a WordPiece vocab"}},
      {"train", {cmd_train, "pre-train BERT (MLM + NSP) with a DeepSpeed JSON config, like deepspeed_train.py"}},
      {"convert", {cmd_convert, "convert BERT weights between the kernel layout and Hugging Face names"}},
      {"launch", {cmd_launch, "start N local ranks of a command with RANK/LOCAL_RANK/WORLD_SIZE/MASTER_* set"}},
  };
  return c;
}

void print_help() {
  std::printf("dskc %s — JIT kernel compiler for BERT-style transformer layers\n\n", DSKC_VERSION);
  std::printf("usage: dskc <command> [options]   (dskc <command> --help for details)\n\ncommands:\n");
  for (const auto& [name, c] : commands()) std::printf("  %-12s %s\n", name.c_str(), c.summary);
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    print_help();
    return argc < 2 ? 2 : 0;
  }
  std::string name = argv[1];
  if (name == "--version") {
    std::printf("dskc %s\n", DSKC_VERSION);
    return 0;
  }
  auto it = commands().find(name);
  if (it == commands().end()) {
    std::vector<std::string> names;
    for (const auto& [n, c] : commands()) names.push_back(n);
    std::string hint = dskc::closest_match(name, names);
    std::fprintf(stderr, "dskc: unknown command '%s'%s\n", name.c_str(),
                 hint.empty() ? "" : fmt::format("; did you mean '{}'?", hint).c_str());
    return 2;
  }
  dskc::cli::Args args(argv + 2, argv + argc);
  try {
    return it->second.fn(args);
  } catch (const dskc::Error& e) {
    std::fprintf(stderr, "dskc %s: error: %s\n", name.c_str(), e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dskc %s: error: %s\n", name.c_str(), e.what());
    return 1;
  }
}
