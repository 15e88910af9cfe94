// Subcommand entry points. Each returns the process exit code; errors are thrown as
// dskc::Error and mapped to exit codes by main.cpp (documented in README).
#pragma once
#include <string>
#include <vector>

namespace dskc::cli {
using Args = std::vector<std::string>;
int cmd_compile(const Args& args);
int cmd_inspect(const Args& args);
int cmd_cache(const Args& args);
int cmd_run_layer(const Args& args);
int cmd_bench(const Args& args);
int cmd_bench_memory(const Args& args);  // the guide's memory table (cli/cmd_bench_memory.cpp)
int cmd_prepare_data(const Args& args);
int cmd_train(const Args& args);
int cmd_convert(const Args& args);
int cmd_launch(const Args& args);  // multi-process launcher (cli/cmd_launch.cpp)
}  // namespace dskc::cli
