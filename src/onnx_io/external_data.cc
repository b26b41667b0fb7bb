// ExternalDataResolver: opens a model's external-data files without ever reaching a file
// outside the model's folder (the CVE-2022-25882 / CVE-2024-27318 family and its symlink,
// hardlink and race variants). docs/robustness.md lists the cases and their tests.
//
// A string check of the location and a realpath() check of the target are not enough on
// their own: between the check and the open a folder on the path can be swapped for a
// symlink. So the file is opened with openat2(RESOLVE_BENEATH) relative to an fd of the
// model folder, which the kernel resolves without ever leaving that folder, and everything
// after (the type check, the link count, the mapping) uses the fd that was opened, never the
// path again.
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "onnx_io/proto_codec.h"

namespace fusionopt {
namespace {

namespace fs = std::filesystem;

// O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused after the open);
// O_NOCTTY: a terminal device must not become our controlling terminal.
constexpr uint64_t kOpenFlags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY;

bool HasParentReference(const fs::path& path) {
  for (const auto& part : path) {
    if (part == "..") return true;
  }
  return false;
}

bool IsWithin(const std::string& inner, const std::string& outer) {
  if (outer == "/") return true;
  return inner == outer || (inner.size() > outer.size() && inner.compare(0, outer.size(), outer) == 0 &&
                            inner[outer.size()] == '/');
}

std::string RealPath(const std::string& path) {
  char buffer[PATH_MAX];
  return ::realpath(path.c_str(), buffer) != nullptr ? std::string(buffer) : std::string();
}

// openat2(2) has no glibc wrapper in Debian 12. Returns the fd, or -1 with errno set.
int OpenAt2(int folder_fd, const std::string& path, uint64_t resolve) {
  struct open_how how {};
  how.flags = kOpenFlags;
  how.resolve = resolve;
  return static_cast<int>(::syscall(SYS_openat2, folder_fd, path.c_str(), &how, sizeof(how)));
}

// ENOSYS: a kernel before 5.6; EPERM: a seccomp filter (older container runtimes) that
// refuses system calls it does not know.
bool Openat2Unavailable(int error) { return error == ENOSYS || error == EPERM; }

Status RefuseOutside(const std::string& location) {
  return InvalidModel("external data location '" + location +
                      "' resolves outside the model folder (symlink)");
}

Status CheckLocationText(const std::string& location) {
  if (location.empty()) return InvalidModel("external data with an empty location");
  if (location.find('\0') != std::string::npos) {
    return InvalidModel("external data location '" + location.substr(0, location.find('\0')) +
                        "...' contains a NUL byte");
  }
  fs::path relative(location);
  if (relative.is_absolute()) {
    return InvalidModel("external data location '" + location + "' is an absolute path");
  }
  if (HasParentReference(relative)) {
    return InvalidModel("external data location '" + location + "' escapes the model folder");
  }
  return Status::Ok();
}

}  // namespace

ExternalDataResolver::~ExternalDataResolver() {
  if (folder_fd_ >= 0) ::close(folder_fd_);
}

Result<std::shared_ptr<MappedFile>> ExternalDataResolver::Open(const std::string& location) {
  if (auto it = files_.find(location); it != files_.end()) return it->second;
  FUSIONOPT_RETURN_IF_ERROR(CheckLocationText(location));
  FUSIONOPT_ASSIGN_OR_RETURN(int fd, OpenBeneathFolder(location));
  if (Status checked = CheckOpenedFile(fd, location); !checked.ok()) {
    ::close(fd);
    return checked;
  }
  FUSIONOPT_ASSIGN_OR_RETURN(auto file, MappedFile::Map(fd, (fs::path(base_dir_) / location).string()));
  files_.emplace(location, file);
  return file;
}

std::vector<std::string> ExternalDataResolver::OpenedLocations() const {
  std::vector<std::string> out;
  for (const auto& [location, file] : files_) out.push_back(location);
  return out;
}

Result<int> ExternalDataResolver::OpenBeneathFolder(const std::string& location) {
  if (folder_fd_ < 0) {
    const std::string folder = base_dir_.empty() ? "." : base_dir_;
    folder_fd_ = ::open(folder.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (folder_fd_ < 0) {
      return IoError("cannot open the model folder '" + folder + "': " + std::strerror(errno));
    }
  }
  int fd = OpenAt2(folder_fd_, location, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS);
  if (fd >= 0) return fd;
  const int error = errno;
  switch (error) {
    // EXDEV: the walk would leave the folder, or met an absolute symlink; the latter may
    // still end inside (a link written with the folder's full path), which realpath decides.
    case EXDEV: return OpenByCheckedRealPath(location);
    case ENOENT: case ENOTDIR:
      return InvalidModel("external data file '" + location + "' does not exist");
    case ELOOP:
      return InvalidModel("external data location '" + location + "' has too many symbolic links");
    default:
      if (Openat2Unavailable(error)) return OpenByCheckedRealPath(location);
      return IoError("cannot open external data file '" + location + "': " + std::strerror(error));
  }
}

// The fallback: resolve every link with realpath, require the result inside the folder, and
// open that link-free path so nothing is followed again. With openat2 the open stays
// beneath the folder's fd and refuses any link a race could have planted since; without it
// (kernels before 5.6) O_NOFOLLOW protects the last component only.
Result<int> ExternalDataResolver::OpenByCheckedRealPath(const std::string& location) {
  const std::string folder = base_dir_.empty() ? "." : base_dir_;
  const std::string real_folder = RealPath(folder);
  const std::string real_target = RealPath((fs::path(folder) / location).string());
  if (real_target.empty()) {
    if (errno == ENOENT) return InvalidModel("external data file '" + location + "' does not exist");
    return RefuseOutside(location);
  }
  if (real_folder.empty() || !IsWithin(real_target, real_folder)) return RefuseOutside(location);
  const std::string beneath = real_target == real_folder ? "." : real_target.substr(real_folder.size() + 1);
  int fd = OpenAt2(folder_fd_, beneath, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS);
  if (fd < 0 && Openat2Unavailable(errno)) fd = ::open(real_target.c_str(), kOpenFlags | O_NOFOLLOW);
  if (fd < 0) {
    if (errno == ELOOP || errno == EXDEV) return RefuseOutside(location);
    return IoError("cannot open external data file '" + location + "': " + std::strerror(errno));
  }
  return fd;
}

Status ExternalDataResolver::CheckOpenedFile(int fd, const std::string& location) const {
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    return IoError("cannot stat external data file '" + location + "': " + std::strerror(errno));
  }
  if (!S_ISREG(info.st_mode)) {
    return InvalidModel("external data location '" + location + "' is not a regular file");
  }
  if (model_file_ && info.st_dev == model_file_->device && info.st_ino == model_file_->inode) {
    return InvalidModel("external data location '" + location + "' is the model file itself");
  }
  // Another name of this file may live outside the folder, and no path check can tell a
  // hardlink planted by an attacker from the original name: refuse, and say how to fix it.
  if (info.st_nlink > 1) {
    return InvalidModel("external data file '" + location + "' has " + std::to_string(info.st_nlink) +
                        " hard links (another name may be outside the model folder); give it a single "
                        "name: cp '" + location + "' copy && mv copy '" + location + "'");
  }
  return Status::Ok();
}

}  // namespace fusionopt
