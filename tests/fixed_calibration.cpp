// Linked into every test binary: tests plan with a fixed calibration (DUET_CALIBRATION=off,
// estimates from peaks), so that no test measures devices unless it says so and no plan depends
// on the machine's load. A value already set (by a developer, or by a test for a child process)
// is kept.
#include <cstdlib>

namespace {
const bool kFixedCalibration = [] {
  setenv("DUET_CALIBRATION", "off", 0);
  return true;
}();
}  // namespace
