// SHA-256 (FIPS 180-4), for the NVRTC cache's keys and entry checksums: a key must not collide
// across the sources of every model a machine compiles, and a cryptographic hash makes that a
// non-question. Small and dependency-free; not constant-time (nothing here is secret).
#pragma once

#include <string>
#include <string_view>

namespace fusionopt::cuda {

// The digest of `data` as 64 lower-case hex digits.
std::string Sha256Hex(std::string_view data);

}  // namespace fusionopt::cuda
