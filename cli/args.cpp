// ArgParser implementation (see args.h).
#include "cli/args.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "compiler/config.h"
#include "compiler/errors.h"

namespace dskc::cli {

ArgParser::ArgParser(std::string command, std::string summary)
    : command_(std::move(command)), summary_(std::move(summary)) {}

void ArgParser::add_switch(const std::string& name, bool* target, const std::string& help) {
  opts_.push_back({name, "", help, [target](const std::string&) { *target = true; }, true});
}

void ArgParser::add_option(const std::string& name, std::string* target, const std::string& metavar,
                           const std::string& help) {
  opts_.push_back({name, metavar, help, [target](const std::string& v) { *target = v; }, false});
}

static long parse_long(const std::string& opt, const std::string& v) {
  try {
    size_t pos = 0;
    long x = std::stol(v, &pos);
    if (pos == v.size()) return x;
  } catch (...) {
  }
  throw Error(ErrorKind::Usage, fmt::format("--{} expects an integer, got '{}'", opt, v));
}

void ArgParser::add_int(const std::string& name, std::optional<int>* target, const std::string& help) {
  opts_.push_back({name, "N", help,
                   [target, name](const std::string& v) { *target = static_cast<int>(parse_long(name, v)); },
                   false});
}

void ArgParser::add_double(const std::string& name, std::optional<double>* target,
                           const std::string& help) {
  opts_.push_back({name, "X", help,
                   [target, name](const std::string& v) {
                     try {
                       size_t pos = 0;
                       double x = std::stod(v, &pos);
                       if (pos == v.size()) {
                         *target = x;
                         return;
                       }
                     } catch (...) {
                     }
                     throw Error(ErrorKind::Usage, fmt::format("--{} expects a number, got '{}'", name, v));
                   },
                   false});
}

void ArgParser::add_positionals(std::vector<std::string>* target, const std::string& metavar,
                                const std::string& help) {
  positionals_ = target;
  pos_metavar_ = metavar;
  pos_help_ = help;
}

std::string ArgParser::usage() const {
  std::string u = fmt::format("usage: dskc {} [options]{}\n\n{}\n\noptions:\n", command_,
                              positionals_ ? " " + pos_metavar_ : "", summary_);
  if (positionals_) u += fmt::format("  {:<34} {}\n", pos_metavar_, pos_help_);
  for (const auto& o : opts_) {
    std::string lhs = "--" + o.name + (o.is_switch ? "" : " " + o.metavar);
    u += fmt::format("  {:<34} {}\n", lhs, o.help);
  }
  u += fmt::format("  {:<34} {}\n", "--help", "show this help");
  return u;
}

bool ArgParser::given(const std::string& name) const {
  return std::find(given_.begin(), given_.end(), name) != given_.end();
}

bool ArgParser::parse(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::fputs(usage().c_str(), stdout);
      return false;
    }
    if (a.rfind("--", 0) == 0 && a.size() > 2) {
      std::string name = a.substr(2), value;
      bool has_value = false;
      if (auto eq = name.find('='); eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
        has_value = true;
      }
      auto it = std::find_if(opts_.begin(), opts_.end(), [&](const Opt& o) { return o.name == name; });
      if (it == opts_.end()) {
        std::vector<std::string> names;
        for (const auto& o : opts_) names.push_back(o.name);
        std::string hint = closest_match(name, names);
        throw Error(ErrorKind::Usage,
                    fmt::format("dskc {}: unknown option --{}{} (see dskc {} --help)", command_, name,
                                hint.empty() ? "" : "; did you mean --" + hint + "?", command_));
      }
      if (it->is_switch) {
        if (has_value) throw Error(ErrorKind::Usage, fmt::format("--{} takes no value", name));
      } else if (!has_value) {
        if (i + 1 >= args.size())
          throw Error(ErrorKind::Usage, fmt::format("dskc {}: --{} needs a value", command_, name));
        value = args[++i];
      }
      it->set(value);
      given_.push_back(name);
      continue;
    }
    if (!positionals_)
      throw Error(ErrorKind::Usage, fmt::format("dskc {}: unexpected argument '{}'", command_, a));
    positionals_->push_back(a);
  }
  return true;
}

}  // namespace dskc::cli
