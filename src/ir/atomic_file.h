// Files that appear whole or not at all: written to a temporary file next to the
// destination and renamed over it only when complete, so a crash, a full disk or an error
// never leaves a half-written model, report or tensor behind.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "ir/status.h"

namespace fusionopt {

class AtomicFile {
 public:
  static Result<std::unique_ptr<AtomicFile>> CreateFor(const std::string& destination);
  ~AtomicFile();  // removes the temporary file unless committed
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  int fd() const { return fd_; }
  uint64_t size() const { return written_; }
  Status Write(const uint8_t* data, uint64_t length);
  // Copies a range of another file in the kernel (copy_file_range), falling back to writing
  // from `fallback` (the same bytes, mapped) where the kernel cannot.
  Status CopyRange(int source_fd, uint64_t offset, uint64_t length, const uint8_t* fallback);
  // Flushes to disk and renames into place.
  Status Commit();

 private:
  AtomicFile(int fd, std::string temp_path, std::string destination);
  void StartWritebackOfFullChunks();

  int fd_;
  std::string temp_path_;
  std::string destination_;
  uint64_t written_ = 0;
  uint64_t writeback_started_ = 0;
  bool committed_ = false;
};

// Writes `contents` to `path` atomically.
Status WriteFileAtomically(const std::string& path, std::string_view contents);

}  // namespace fusionopt
