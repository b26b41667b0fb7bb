#include "ir/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace fusionopt {

Result<std::shared_ptr<MappedFile>> MappedFile::Open(const std::string& path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; Map rejects it.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return IoError("cannot open '" + path + "': " + std::strerror(errno));
  return Map(fd, path);
}

Result<std::shared_ptr<MappedFile>> MappedFile::Map(int fd, std::string path) {
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    return IoError("'" + path + "' is not a regular file");
  }
  auto size = static_cast<uint64_t>(info.st_size);
  const uint8_t* data = nullptr;
  if (size > 0) {
    void* mapping = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (mapping == MAP_FAILED) {
      ::close(fd);
      return IoError("cannot map '" + path + "': " + std::strerror(errno));
    }
    data = static_cast<const uint8_t*>(mapping);
  }
  return std::shared_ptr<MappedFile>(new MappedFile(std::move(path), fd, data, size));
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace fusionopt
