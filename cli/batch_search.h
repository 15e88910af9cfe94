// Largest micro-batch that fits a memory limit, in few probes (`dskc bench-memory`, the guide's
// memory table). Pure and header-only so the CPU tests drive it with a fake memory model: the
// caller's probe(batch, cap) runs one real training step and says whether it fit and its peak.
//
// Invariants the search relies on (true for dskc: every device allocation goes through the
// Context, in an order that depends only on the configuration and the batch):
//  - fits(B) is monotone: a batch that fits under a cap, fits every smaller batch.
//  - a cap is pure accounting (Context::allocate throws when allocated + bytes > cap), so a
//    probe that fit under a larger cap (or none) with peak <= cap also fits under cap, and a
//    probe that failed under a cap >= cap (or with no cap) fails under cap too. History from
//    other caps of the same configuration is reused through these two rules.
//  - peak(B) is close to linear in B (fixed bytes: weights, gradients, optimizer state; per
//    sequence: activations), so two fitting probes predict where the limit is crossed.
//
// Strategy: a first probe at start_batch (bisect below it if it fails), a second at twice the
// largest fit unless prior_fixed_bytes stands in for it, then up to two guided rounds: probe
// the predicted largest batch g and its neighbour (g + 1 when g fits, g - 1 when not),
// stopping as soon as the pair brackets the answer; then exponential steps (2, 4, 8, ...) away
// from where the guesses ended until the answer is bracketed, and bisection. With an exact
// linear model a cap costs 4 probes (3 with prior_fixed_bytes, 2 when the history already has
// the model points); a guess off by d costs about 2 log2(d) more.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace dskc::cli {

struct ProbeOutcome {
  int batch = 0;
  size_t cap_bytes = 0;  // cap it ran under; 0 = none (the whole GPU)
  bool fits = false;
  size_t peak_bytes = 0;  // fits: peak bytes allocated during the probe
  double seconds = 0.0;
  size_t overhead_bytes = 0;  // fits: device memory in use beyond peak_bytes' accounting (driver,
                              // modules, allocation rounding); counts only without a cap
  std::string note;           // why it did not fit (the out-of-memory message), or remarks
};

struct SearchLimits {
  int start_batch = 8;
  int max_batch = 4096;  // never probe above this
  size_t cap_bytes = 0;  // 0 = none
  // Bytes that do not grow with the batch, known from a similar configuration (e.g. another
  // memory-flag set of the same model): one model probe instead of two. < 0: unknown.
  double prior_fixed_bytes = -1.0;
  size_t predict_bytes = 0;  // the limit the linear model aims at: the cap, or (no cap) the free
                             // GPU memory, less the largest overhead_bytes of a fitting probe
};

struct SearchResult {
  int largest_batch = 0;  // 0: not even batch 1 fits
  bool at_max_batch = false;
  size_t peak_bytes = 0;                // of the probe at largest_batch
  double marginal_bytes_per_seq = 0.0;  // slope of the linear model (0 with < 2 fitting probes)
  double fixed_bytes = 0.0;             // its intercept
  int probes = 0;                       // probes this search ran (history reuse not counted)
};

using ProbeFn = std::function<ProbeOutcome(int batch, size_t cap_bytes)>;

namespace batch_search_detail {
// a <= b where 0 means "no cap" (infinite).
inline bool cap_le(size_t a, size_t b) { return b == 0 || (a != 0 && a <= b); }

struct Line {
  double slope = 0.0, intercept = 0.0;
  bool ok = false;
};
// Through the largest fitting probe and the largest one at or below half its batch (else the
// smallest): far enough apart that rounding and alignment do not swamp the slope, close
// enough to the limit that piecewise growth (shared scratch buffers) is seen.
// With one fitting probe, the line through it and prior_intercept (when >= 0).
inline Line fit_line(const std::vector<ProbeOutcome>& history, double prior_intercept = -1.0) {
  std::vector<const ProbeOutcome*> fits;
  for (const auto& p : history)
    if (p.fits) fits.push_back(&p);
  std::sort(fits.begin(), fits.end(), [](auto* a, auto* b) { return a->batch < b->batch; });
  fits.erase(std::unique(fits.begin(), fits.end(), [](auto* a, auto* b) { return a->batch == b->batch; }), fits.end());
  Line l;
  if (fits.size() == 1 && prior_intercept >= 0.0) {
    l.intercept = prior_intercept;
    l.slope = (static_cast<double>(fits[0]->peak_bytes) - prior_intercept) / fits[0]->batch;
    l.ok = l.slope > 0.0;
    return l;
  }
  if (fits.size() < 2) return l;
  const ProbeOutcome* hi = fits.back();
  const ProbeOutcome* lo = fits.front();
  for (auto* p : fits)
    if (2 * p->batch <= hi->batch) lo = p;
  l.slope = (static_cast<double>(hi->peak_bytes) - static_cast<double>(lo->peak_bytes)) / (hi->batch - lo->batch);
  l.intercept = static_cast<double>(hi->peak_bytes) - l.slope * hi->batch;
  l.ok = l.slope > 0.0;
  return l;
}
}  // namespace batch_search_detail

// `history`: every earlier probe of this configuration (any cap); new probes are appended.
inline SearchResult find_largest_batch(const ProbeFn& probe_fn, const SearchLimits& lim,
                                       std::vector<ProbeOutcome>& history) {
  using namespace batch_search_detail;
  const size_t cap = lim.cap_bytes;
  SearchResult r;
  int lo = 0, hi = lim.max_batch + 1;  // lo fits (0: nothing known), hi does not (max + 1: unknown)
  for (const auto& p : history) {
    if (p.fits && (cap_le(p.cap_bytes, cap) || p.peak_bytes <= cap)) lo = std::max(lo, p.batch);
    if (!p.fits && cap_le(cap, p.cap_bytes)) hi = std::min(hi, p.batch);
  }
  lo = std::min(lo, lim.max_batch);
  auto probe = [&](int b) {
    ProbeOutcome o = probe_fn(b, cap);
    o.batch = b;
    o.cap_bytes = cap;
    history.push_back(o);
    ++r.probes;
    if (o.fits)
      lo = std::max(lo, b);
    else
      hi = std::min(hi, b);
    return o.fits;
  };
  auto bisect = [&] {
    while (hi - lo > 1) probe(lo + (hi - lo) / 2);
  };

  if (lo == 0 && hi > 1 && !probe(std::clamp(lim.start_batch, 1, hi - 1))) bisect();
  // A second model point.
  if (hi - lo > 1 && !fit_line(history, lim.prior_fixed_bytes).ok) probe(std::min(2 * lo, hi - 1));
  // Guided rounds: the predicted largest batch and its neighbour.
  int dir = 0;  // +1: the last guided probe fit, -1: it did not
  for (int round = 0; round < 2 && hi - lo > 1; ++round) {
    const Line l = fit_line(history, lim.prior_fixed_bytes);
    if (!l.ok) break;
    double budget = static_cast<double>(lim.predict_bytes);
    if (cap == 0)  // the whole GPU: memory dskc does not account for is taken too
      for (const auto& p : history)
        if (p.fits) budget = std::min(budget, static_cast<double>(lim.predict_bytes) - p.overhead_bytes);
    const double guess = std::floor((budget - l.intercept) / l.slope);
    const int g = static_cast<int>(std::clamp(guess, static_cast<double>(lo + 1), static_cast<double>(hi - 1)));
    if (probe(g)) {
      dir = 1;
      if (g + 1 < hi && !probe(g + 1)) break;
    } else {
      dir = -1;
      if (g - 1 > lo) probe(g - 1);
      break;  // no new fitting probe: a refit would guess the same
    }
  }
  // Exponential steps away from the side the guesses ended on (up from the largest fit, or down
  // from the smallest failure) until the answer is bracketed, then bisection.
  for (int step = 2; hi - lo > 1; step *= 2) {
    const int c = dir >= 0 ? std::min(lo + step, hi - 1) : std::max(hi - step, lo + 1);
    const bool f = probe(c);
    if (dir >= 0 ? !f : f) break;
  }
  bisect();

  r.largest_batch = lo;
  r.at_max_batch = lo == lim.max_batch;
  for (const auto& p : history)
    if (p.fits && p.batch == lo) r.peak_bytes = std::max(r.peak_bytes, p.peak_bytes);
  const Line l = fit_line(history);
  if (l.ok) {
    r.marginal_bytes_per_seq = l.slope;
    r.fixed_bytes = l.intercept;
  }
  return r;
}

}  // namespace dskc::cli
