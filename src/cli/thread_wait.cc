#include "cli/thread_wait.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace fusionopt::cli {
namespace {

std::string& Description() {
  static std::string description = "spin (libgomp default)";
  return description;
}

// The value of `--name VALUE` or `--name=VALUE` in argv, or nullptr.
const char* FlagValue(int argc, char** argv, const char* name) {
  const size_t length = std::strlen(name);
  for (int index = 1; index < argc; ++index) {
    const char* arg = argv[index];
    if (std::strcmp(arg, "--") == 0) return nullptr;
    if (std::strncmp(arg, name, length) != 0) continue;
    if (arg[length] == '=') return arg + length + 1;
    if (arg[length] == '\0' && index + 1 < argc) return argv[index + 1];
  }
  return nullptr;
}

int UsableCpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return CPU_COUNT(&set);
}

// Runnable tasks on the machine now, this one included; -1 when /proc/stat cannot say.
int RunnableTasks() {
  std::FILE* stat = std::fopen("/proc/stat", "r");
  if (stat == nullptr) return -1;
  char line[256];
  int running = -1;
  while (std::fgets(line, sizeof line, stat) != nullptr) {
    if (std::sscanf(line, "procs_running %d", &running) == 1) break;
  }
  std::fclose(stat);
  return running;
}

// The fewest runnable tasks over a few samples 2 ms apart: work that holds a core is runnable
// in every sample, while a task that only passes through (the parent that just forked us and
// is about to wait, a kernel thread) is not. One sample read such passers-by as load often
// enough that a benchmark harness's runs came out bimodal (MobileNetV3: 6.4 or 9.2 ms).
constexpr int kRunnableSamples = 8;
constexpr useconds_t kSampleGapMicros = 2000;

int SteadyRunnableTasks() {
  int fewest = RunnableTasks();
  for (int sample = 1; sample < kRunnableSamples && fewest > 1; ++sample) {
    usleep(kSampleGapMicros);
    const int running = RunnableTasks();
    if (running < 0) return -1;
    fewest = std::min(fewest, running);
  }
  return fewest;
}

bool ShouldSleep(const char* requested_threads, std::string& why) {
  const int cpus = UsableCpus();
  int threads = requested_threads != nullptr ? std::atoi(requested_threads) : 0;
  if (threads <= 0 || threads > cpus) threads = cpus;
  const int others = SteadyRunnableTasks() - 1;
  if (others < 0) {
    why = "/proc/stat unreadable";
    return false;
  }
  why = std::to_string(others) + " other runnable task(s), " + std::to_string(threads) + " thread(s) on " +
        std::to_string(cpus) + " CPU(s)";
  return others + threads > cpus;
}

constexpr const char* kChoiceVariable = "FUSIONOPT_THREAD_WAIT_CHOICE";

bool RunsKernels(int argc, char** argv) {
  if (argc < 2) return false;
  const std::string command = argv[1];
  return command == "run" || command == "bench" || command == "verify";
}

}  // namespace

void ApplyThreadWait(int argc, char** argv) {
  if (const char* choice = std::getenv(kChoiceVariable)) {  // this process is the re-executed one
    Description() = choice;
    return;
  }
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) {
    Description() = "set by the environment (OMP_WAIT_POLICY / GOMP_SPINCOUNT)";
    return;
  }
  if (!RunsKernels(argc, argv)) return;
  const char* mode = FlagValue(argc, argv, "--thread-wait");
  if (mode == nullptr) mode = "auto";
  std::string why;
  bool sleep = std::strcmp(mode, "sleep") == 0;
  if (std::strcmp(mode, "auto") == 0) sleep = ShouldSleep(FlagValue(argc, argv, "--threads"), why);
  // An unknown value is CLI11's to reject, with the usual message and exit code.
  const std::string description =
      std::string(sleep ? "sleep" : "spin") + " (" + mode + (why.empty() ? "" : ": " + why) + ")";
  Description() = description;
  if (!sleep) return;
  // libgomp has read its environment already; only a new image reads the new one.
  setenv("OMP_WAIT_POLICY", "passive", /*overwrite=*/1);
  setenv(kChoiceVariable, description.c_str(), /*overwrite=*/1);
  execv("/proc/self/exe", argv);
  unsetenv("OMP_WAIT_POLICY");
  unsetenv(kChoiceVariable);
  Description() = "spin (could not re-execute for sleeping waits: " + std::string(std::strerror(errno)) + ")";
}

std::string ThreadWaitDescription() { return Description(); }

void AddThreadWaitOption(CLI::App& command) {
  static std::string ignored;  // read from argv before main (ChooseThreadWait)
  command
      .add_option("--thread-wait", ignored,
                  "How idle threads wait between kernels: spin (fastest on a machine of your own), sleep (for "
                  "shared hosts), auto (sleep when other work holds the cores; default)")
      ->check(CLI::IsMember({"spin", "sleep", "auto"}));
}

}  // namespace fusionopt::cli
