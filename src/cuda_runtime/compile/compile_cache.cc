// Cache entries: "fusionopt-nvrtc-cache 1\nkey K\nsizes P C L\nsha256 H\n" followed by the PTX
// (P bytes), the CUBIN (C bytes) and NVRTC's log (L bytes); H is the SHA-256 of those bytes.
#include "cuda_runtime/compile/compile_cache.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "cuda_runtime/compile/sha256.h"
#include "ir/atomic_file.h"

namespace fusionopt::cuda {
namespace {

constexpr const char* kMagic = "fusionopt-nvrtc-cache 1";

std::optional<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return std::nullopt;
  std::ostringstream contents;
  contents << file.rdbuf();
  if (file.bad()) return std::nullopt;
  return contents.str();
}

}  // namespace

std::string CacheEntryPath(const std::string& cache_dir, const std::string& key) {
  return (std::filesystem::path(cache_dir) / (key + ".nvrtc")).string();
}

std::optional<CacheEntry> ReadCacheEntry(const std::string& path, const std::string& key) {
  std::optional<std::string> contents = ReadWholeFile(path);
  if (!contents) return std::nullopt;
  std::istringstream header(*contents);
  std::string magic, key_word, stored_key, sizes_word, hash_word, stored_hash;
  size_t ptx_size = 0, cubin_size = 0, log_size = 0;
  if (!std::getline(header, magic) || magic != kMagic) return std::nullopt;
  if (!(header >> key_word >> stored_key) || key_word != "key" || stored_key != key) return std::nullopt;
  if (!(header >> sizes_word >> ptx_size >> cubin_size >> log_size) || sizes_word != "sizes") return std::nullopt;
  if (!(header >> hash_word >> stored_hash) || hash_word != "sha256" || header.get() != '\n') return std::nullopt;
  const std::streamoff payload_start = header.tellg();
  if (payload_start < 0) return std::nullopt;
  const std::string_view payload = std::string_view(*contents).substr(static_cast<size_t>(payload_start));
  if (payload.size() != ptx_size + cubin_size + log_size || Sha256Hex(payload) != stored_hash) return std::nullopt;
  CacheEntry entry;
  entry.ptx = std::string(payload.substr(0, ptx_size));
  entry.cubin = std::string(payload.substr(ptx_size, cubin_size));
  entry.log = std::string(payload.substr(ptx_size + cubin_size, log_size));
  return entry;
}

Status WriteCacheEntry(const std::string& path, const std::string& key, const CacheEntry& entry) {
  std::error_code error;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), error);
  if (error) return IoError("cannot create the cache folder: " + error.message());
  const std::string payload = entry.ptx + entry.cubin + entry.log;
  std::string contents = std::string(kMagic) + "\nkey " + key + "\nsizes " + std::to_string(entry.ptx.size()) + " " +
                         std::to_string(entry.cubin.size()) + " " + std::to_string(entry.log.size()) + "\nsha256 " +
                         Sha256Hex(payload) + "\n" + payload;
  return WriteFileAtomically(path, contents);
}

}  // namespace fusionopt::cuda
