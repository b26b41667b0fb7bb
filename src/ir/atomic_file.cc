#include "ir/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

namespace fusionopt {

Result<std::unique_ptr<AtomicFile>> AtomicFile::CreateFor(const std::string& destination) {
  namespace fs = std::filesystem;
  fs::path target(destination);
  std::string pattern = (target.parent_path().empty() ? fs::path(".") : target.parent_path()) /
                        ("." + target.filename().string() + ".tmp-XXXXXX");
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  int fd = ::mkstemp(buffer.data());
  if (fd < 0) return IoError("cannot create a file next to '" + destination + "': " + std::strerror(errno));
  ::fchmod(fd, 0644);
  return std::unique_ptr<AtomicFile>(new AtomicFile(fd, buffer.data(), destination));
}

AtomicFile::AtomicFile(int fd, std::string temp_path, std::string destination)
    : fd_(fd), temp_path_(std::move(temp_path)), destination_(std::move(destination)) {}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temp_path_.c_str());
}

Status AtomicFile::Write(const uint8_t* data, uint64_t length) {
  while (length > 0) {
    ssize_t count = ::write(fd_, data, std::min<uint64_t>(length, 1u << 30));
    if (count < 0 && errno == EINTR) continue;
    if (count <= 0) return IoError("cannot write '" + destination_ + "': " + std::strerror(errno));
    data += count;
    length -= static_cast<uint64_t>(count);
    written_ += static_cast<uint64_t>(count);
  }
  StartWritebackOfFullChunks();
  return Status::Ok();
}

void AtomicFile::StartWritebackOfFullChunks() {
  // Commit's fsync would otherwise wait for the whole file at the end (over a second for a
  // BERT-base model); started in chunks while later bytes are still being produced, the disk
  // writes overlap that work. Advice only: where the kernel refuses, fsync does it all.
  constexpr uint64_t kChunkBytes = 32 << 20;
  while (written_ - writeback_started_ >= kChunkBytes) {
    (void)::sync_file_range(fd_, static_cast<off64_t>(writeback_started_), kChunkBytes, SYNC_FILE_RANGE_WRITE);
    writeback_started_ += kChunkBytes;
  }
}

Status AtomicFile::CopyRange(int source_fd, uint64_t offset, uint64_t length, const uint8_t* fallback) {
  auto in = static_cast<off64_t>(offset);
  uint64_t done = 0;
  while (done < length) {
    ssize_t count = ::copy_file_range(source_fd, &in, fd_, nullptr, length - done, 0);
    if (count < 0 && errno == EINTR) continue;
    if (count <= 0) break;  // unsupported here: finish with plain writes
    done += static_cast<uint64_t>(count);
    written_ += static_cast<uint64_t>(count);
  }
  StartWritebackOfFullChunks();
  return Write(fallback + done, length - done);
}

Status AtomicFile::Commit() {
  if (::fsync(fd_) != 0 || ::close(fd_) != 0) {
    fd_ = -1;
    return IoError("cannot write '" + destination_ + "': " + std::strerror(errno));
  }
  fd_ = -1;
  if (::rename(temp_path_.c_str(), destination_.c_str()) != 0) {
    return IoError("cannot write '" + destination_ + "': " + std::strerror(errno));
  }
  committed_ = true;
  return Status::Ok();
}

Status WriteFileAtomically(const std::string& path, std::string_view contents) {
  FUSIONOPT_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFile> file, AtomicFile::CreateFor(path));
  FUSIONOPT_RETURN_IF_ERROR(file->Write(reinterpret_cast<const uint8_t*>(contents.data()), contents.size()));
  return file->Commit();
}

}  // namespace fusionopt
