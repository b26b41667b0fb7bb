// A read-only memory mapping of a whole file. External tensor data points into it, so a
// multi-gigabyte model is paged in on demand instead of being copied onto the heap.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "ir/status.h"

namespace fusionopt {

class MappedFile {
 public:
  static Result<std::shared_ptr<MappedFile>> Open(const std::string& path);
  // Maps an fd the caller already opened (and vetted); takes ownership of `fd` whatever the
  // outcome. `path` is only for messages.
  static Result<std::shared_ptr<MappedFile>> Map(int fd, std::string path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Kept open so a saver can copy ranges file-to-file in the kernel (copy_file_range).
  int fd() const { return fd_; }

 private:
  MappedFile(std::string path, int fd, const uint8_t* data, uint64_t size)
      : path_(std::move(path)), fd_(fd), data_(data), size_(size) {}

  std::string path_;
  int fd_ = -1;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace fusionopt
