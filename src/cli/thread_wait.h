// How the runtime's idle threads wait between kernels.
//
// libgomp reads its wait policy once, in its own initializer, before main runs: by default an
// idle thread spins for about 300k iterations before it sleeps. On a quiet machine that is
// the fastest choice (no futex wake-up per parallel region). When another process holds one
// of our cores it is the worst: the spinning threads take the time slices the thread sharing
// that core needs, and every barrier waits on it (issue 15: LLaMA-style 2.7x slower beside
// one busy core, ORT 2.1x; with sleeping waits 2.0x).
//
// --thread-wait spin|sleep|auto on run, bench and verify. `auto` (the default) sleeps when
// other runnable tasks already hold cores we would use: /proc/stat's procs_running (the fewest
// over up to 8 samples 2 ms apart, so tasks passing through do not count), less this process,
// plus --threads (default: the CPUs we may run on) exceeds those CPUs. The choice is made
// once, at start-up. An OMP_WAIT_POLICY or GOMP_SPINCOUNT the user set always wins.
//
// libgomp reads the policy in its own initializer, before main, and a setenv from the
// executable's preinit array does not reach it (libc publishes the environment only after
// that array ran). So a process that should sleep sets OMP_WAIT_POLICY=passive and executes
// itself again, once: a few milliseconds at start-up, only when the host is busy.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace fusionopt::cli {

// Declares --thread-wait on `command`; its value was already applied at start-up.
void AddThreadWaitOption(CLI::App& command);

// Called first thing in main with its arguments: may replace the process (see above).
void ApplyThreadWait(int argc, char** argv);

// The policy this process runs with ("spin" or "sleep") and why, for `-v` output.
std::string ThreadWaitDescription();

}  // namespace fusionopt::cli
