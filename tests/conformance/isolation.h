// Runs each node test in a child process, so a kernel that crashes, aborts on an internal
// check or loops forever costs one failed test instead of the whole run.
//
// The parent must not have used OpenMP before forking (libgomp's thread pool does not survive
// fork); the driver keeps all runtime work in the children.
#pragma once

#include <functional>

#include "node_test_runner.h"

namespace fusionopt::conformance {

// Runs `test` in a forked child killed after `timeout_seconds`; a child that dies reports
// kCrash with the signal and the last line it printed (e.g. the failed internal check).
Verdict RunIsolated(const std::function<Verdict()>& test, int timeout_seconds);

}  // namespace fusionopt::conformance
