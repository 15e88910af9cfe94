// LR schedules (formulas and README text in lr_schedule.h).
#include "trainer/lr_schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>

#include "compiler/errors.h"

namespace dskc {

LrScheduleKind parse_lr_schedule(const std::string& name) {
  std::string n = name;
  for (char& c : n) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (n == "LE") return LrScheduleKind::LE;
  if (n == "EE") return LrScheduleKind::EE;
  if (n == "EP") return LrScheduleKind::EP;
  if (n == "LL") return LrScheduleKind::LL;
  if (n == "CONSTANT" || n == "C") return LrScheduleKind::Constant;
  throw Error(ErrorKind::Usage,
              fmt::format("--lr_schedule '{}' is not known: use LE (linear warmup, exponential decay; the default), "
                          "EE, EP, LL (linear warmup, linear decay) or constant",
                          name));
}

const char* lr_schedule_name(LrScheduleKind k) {
  switch (k) {
    case LrScheduleKind::EE: return "EE";
    case LrScheduleKind::EP: return "EP";
    case LrScheduleKind::LL: return "LL";
    case LrScheduleKind::Constant: return "constant";
    default: return "LE";
  }
}

double LrSchedule::factor(int64_t steps) const {
  const double total = static_cast<double>(std::max<int64_t>(total_steps, 1));
  const double s = static_cast<double>(std::max<int64_t>(steps, 0));
  const double x = s / total;
  const double w = warmup_proportion;
  const bool warming = w > 0.0 && x < w;
  const double e = (s - w * total) / static_cast<double>(std::max<int64_t>(decay_step, 1));
  switch (kind) {
    case LrScheduleKind::LE: return warming ? x / w : std::pow(decay_rate, e);
    case LrScheduleKind::EE: return warming ? std::pow(x / w, 2.0) : std::pow(decay_rate, e);
    case LrScheduleKind::EP: return warming ? std::pow(x / w, 1.5) : std::pow(std::max(0.0, 1.0 - x), 2.0);
    case LrScheduleKind::LL: return warming ? x / w : (w < 1.0 ? std::max(0.0, (1.0 - x) / (1.0 - w)) : 0.0);
    case LrScheduleKind::Constant: return warming ? x / w : 1.0;
  }
  return 1.0;
}

}  // namespace dskc
