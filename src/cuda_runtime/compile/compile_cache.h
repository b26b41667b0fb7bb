// The on-disk NVRTC cache's entry format (nvrtc_compiler.h). One file per compiled module,
// named by its key; a text header names the key, the payload's part sizes and the payload's
// SHA-256, so an entry that is truncated, corrupted or written for another key is detected and
// recompiled instead of trusted.
#pragma once

#include <optional>
#include <string>

#include "ir/status.h"

namespace fusionopt::cuda {

struct CacheEntry {
  std::string ptx;
  std::string cubin;
  std::string log;
};

// The file holding `key`'s entry in `cache_dir`.
std::string CacheEntryPath(const std::string& cache_dir, const std::string& key);

// The entry at `path` when it is complete, intact and for `key`; nullopt otherwise (absent
// included).
std::optional<CacheEntry> ReadCacheEntry(const std::string& path, const std::string& key);

// Writes the entry atomically, creating the folder if needed; an IoError says why it could not.
Status WriteCacheEntry(const std::string& path, const std::string& key, const CacheEntry& entry);

}  // namespace fusionopt::cuda
