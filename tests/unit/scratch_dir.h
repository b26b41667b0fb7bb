// A scratch folder private to one test process, removed when the test ends. ctest runs test
// cases in parallel processes, so a fixed name under /tmp would let two cases overwrite each
// other's files.
#pragma once

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>

namespace fusionopt::test_support {

class ScratchDir {
 public:
  explicit ScratchDir(const std::string& purpose)
      : path_(std::filesystem::temp_directory_path() /
              ("fusionopt_" + purpose + "_" + std::to_string(::getpid()) + "_" + std::to_string(NextId()))) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  static int NextId() {
    static std::atomic<int> next{0};
    return next++;
  }
  std::filesystem::path path_;
};

}  // namespace fusionopt::test_support
