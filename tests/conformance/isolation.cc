#include "isolation.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace fusionopt::conformance {
namespace {

// Separates whatever the child printed from its verdict, which comes last.
constexpr char kVerdictMarker = '\x1e';
constexpr size_t kKeptOutputBytes = 64 * 1024;

void WriteAll(int fd, const std::string& text) {
  size_t written = 0;
  while (written < text.size()) {
    ssize_t n = write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    written += static_cast<size_t>(n);
  }
}

[[noreturn]] void RunChild(const std::function<Verdict()>& test, int timeout_seconds, int pipe_fd) {
  dup2(pipe_fd, STDOUT_FILENO);
  dup2(pipe_fd, STDERR_FILENO);
  close(pipe_fd);
  alarm(static_cast<unsigned>(timeout_seconds));  // SIGALRM's default action ends the child
  Verdict verdict = test();
  std::fflush(nullptr);
  WriteAll(STDOUT_FILENO, std::string(1, kVerdictMarker) + std::to_string(static_cast<int>(verdict.outcome)) +
                              "\n" + verdict.reason);
  _exit(0);
}

// Everything the child wrote until it exited, keeping only the tail of long output.
std::string DrainPipe(int fd) {
  std::string output;
  char buffer[4096];
  for (;;) {
    ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    output.append(buffer, static_cast<size_t>(n));
    if (output.size() > 2 * kKeptOutputBytes) output.erase(0, output.size() - kKeptOutputBytes);
  }
  return output;
}

std::string LastLine(const std::string& output) {
  size_t end = output.find_last_not_of("\n\r ");
  if (end == std::string::npos) return "";
  size_t begin = output.rfind('\n', end);
  begin = begin == std::string::npos ? 0 : begin + 1;
  return output.substr(begin, std::min<size_t>(end - begin + 1, 400));
}

Verdict ParseVerdict(const std::string& output) {
  size_t marker = output.rfind(kVerdictMarker);
  if (marker == std::string::npos) return {Outcome::kCrash, "exited without a verdict"};
  size_t newline = output.find('\n', marker);
  if (newline == std::string::npos) return {Outcome::kCrash, "truncated verdict"};
  int outcome = std::atoi(output.substr(marker + 1, newline - marker - 1).c_str());
  if (outcome < 0 || outcome > static_cast<int>(Outcome::kSkipped)) return {Outcome::kCrash, "garbled verdict"};
  return {static_cast<Outcome>(outcome), output.substr(newline + 1)};
}

}  // namespace

Verdict RunIsolated(const std::function<Verdict()>& test, int timeout_seconds) {
  int fds[2];
  if (pipe(fds) != 0) return {Outcome::kCrash, std::string("pipe: ") + std::strerror(errno)};
  std::fflush(nullptr);  // or the child would inherit and re-emit buffered parent output
  pid_t child = fork();
  if (child < 0) {
    close(fds[0]);
    close(fds[1]);
    return {Outcome::kCrash, std::string("fork: ") + std::strerror(errno)};
  }
  if (child == 0) {
    close(fds[0]);
    RunChild(test, timeout_seconds, fds[1]);
  }
  close(fds[1]);
  std::string output = DrainPipe(fds[0]);
  close(fds[0]);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return ParseVerdict(output);
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) {
    return {Outcome::kTimeout, "timed out after " + std::to_string(timeout_seconds) + " s"};
  }
  std::string how = WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
                                              strsignal(WTERMSIG(status)) + ")"
                                        : "exited with status " + std::to_string(WEXITSTATUS(status));
  std::string last = LastLine(output);
  return {Outcome::kCrash, how + (last.empty() ? "" : ": " + last)};
}

}  // namespace fusionopt::conformance
