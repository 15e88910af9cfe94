// busy_time (runtime/profiler.h): the union of a timeline's intervals, which dskc bench --timeline
// reports per stream and for both streams together.
#include <doctest/doctest.h>

#include "runtime/profiler.h"

using dskc::busy_time;

TEST_CASE("busy_time is the length of the union of the intervals") {
  CHECK(busy_time({}) == 0.0);
  CHECK(busy_time({{1.0, 3.0}}) == doctest::Approx(2.0));
  // disjoint, in any order
  CHECK(busy_time({{5.0, 6.5}, {1.0, 2.0}}) == doctest::Approx(2.5));
  // overlapping and nested
  CHECK(busy_time({{0.0, 4.0}, {1.0, 2.0}, {3.0, 7.0}}) == doctest::Approx(7.0));
  // touching intervals count once, a zero-length one adds nothing
  CHECK(busy_time({{0.0, 1.0}, {1.0, 2.0}, {5.0, 5.0}}) == doctest::Approx(2.0));
  // a later interval that starts inside an earlier, longer one
  CHECK(busy_time({{0.0, 10.0}, {2.0, 3.0}, {9.0, 12.0}, {20.0, 21.0}}) == doctest::Approx(13.0));
}
