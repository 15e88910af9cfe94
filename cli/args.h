// A small command-line parser for dskc subcommands: --name value, --name=value, switches,
// positionals, --help. Unknown options are Error(Usage) with the closest known option.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace dskc::cli {

class ArgParser {
 public:
  ArgParser(std::string command, std::string summary);
  void add_switch(const std::string& name, bool* target, const std::string& help);
  void add_option(const std::string& name, std::string* target, const std::string& metavar,
                  const std::string& help);
  void add_int(const std::string& name, std::optional<int>* target, const std::string& help);
  void add_double(const std::string& name, std::optional<double>* target, const std::string& help);
  // Collects positional arguments; without it any positional is an error.
  void add_positionals(std::vector<std::string>* target, const std::string& metavar,
                       const std::string& help);
  // Returns false when --help was given (usage already printed to stdout).
  bool parse(const std::vector<std::string>& args);
  std::string usage() const;
  // Options given on the command line (by name, without dashes).
  bool given(const std::string& name) const;

 private:
  struct Opt {
    std::string name, metavar, help;
    std::function<void(const std::string&)> set;
    bool is_switch = false;
  };
  std::string command_, summary_;
  std::vector<Opt> opts_;
  std::vector<std::string>* positionals_ = nullptr;
  std::string pos_metavar_, pos_help_;
  std::vector<std::string> given_;
};

}  // namespace dskc::cli
