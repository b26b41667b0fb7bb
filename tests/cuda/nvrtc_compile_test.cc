// CompileCuda (cuda_runtime/compile/nvrtc_compiler.h) without a GPU: PTX and CUBIN from NVRTC,
// compile errors carrying NVRTC's log and the program's name, and the disk cache — hits,
// corrupt and truncated entries recompiled and replaced, no files when the cache is off.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cuda_runtime/compile/nvrtc_compiler.h"
#include "cuda_runtime/compile/sha256.h"
#include "scratch_dir.h"

namespace fusionopt::cuda {
namespace {

namespace fs = std::filesystem;

constexpr const char* kScale = R"(#include <cuda_fp16.h>
extern "C" __global__ void scale(const __half* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * __half2float(x[i]);
}
)";

std::vector<fs::path> FilesIn(const fs::path& folder) {
  std::vector<fs::path> files;
  std::error_code error;
  if (!fs::exists(folder, error)) return files;
  for (const auto& entry : fs::recursive_directory_iterator(folder)) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  return files;
}

std::string ReadFile(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  std::ostringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

TEST_CASE("SHA-256 matches the FIPS 180-4 test vectors", "[cuda][nvrtc]") {
  REQUIRE(Sha256Hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  REQUIRE(Sha256Hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  REQUIRE(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
          "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  REQUIRE(Sha256Hex(std::string(1000000, 'a')) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("NVRTC compiles to PTX, and to CUBIN when asked, without a GPU", "[cuda][nvrtc]") {
  CompileOptions options;
  options.sm_arch = 80;
  auto ptx_only = CompileCuda(kScale, "scale", options);
  INFO(ptx_only.status().message());
  REQUIRE(ptx_only.ok());
  REQUIRE(ptx_only->ptx.find(".target sm_80") != std::string::npos);
  REQUIRE(ptx_only->ptx.find(".entry scale") != std::string::npos);
  REQUIRE(ptx_only->cubin.empty());
  REQUIRE_FALSE(ptx_only->from_cache);

  options.sm_arch = 90;
  options.cubin = true;
  auto both = CompileCuda(kScale, "scale", options);
  REQUIRE(both.ok());
  REQUIRE(both->ptx.find(".target sm_90") != std::string::npos);
  REQUIRE(both->cubin.size() > 4);
  REQUIRE(both->cubin.compare(0, 4, "\x7f" "ELF") == 0);
  REQUIRE(NvrtcVersion().find('.') != std::string::npos);
}

TEST_CASE("a compile error is an InternalError with NVRTC's log and the program's name", "[cuda][nvrtc]") {
  auto broken = CompileCuda("extern \"C\" __global__ void k(float* y) { y[0] = undeclared_name; }\n", "broken_kernel",
                            CompileOptions{});
  REQUIRE(broken.status().code() == ErrorCode::kInternal);
  REQUIRE_THAT(broken.status().message(), Catch::Contains("broken_kernel") && Catch::Contains("undeclared_name"));

  CompileOptions bad_arch;
  bad_arch.sm_arch = 7;
  REQUIRE(CompileCuda(kScale, "scale", bad_arch).status().code() == ErrorCode::kInvalidModel);
}

TEST_CASE("the disk cache returns identical PTX and replaces corrupt entries", "[cuda][nvrtc]") {
  test_support::ScratchDir scratch("nvrtc_cache");
  CompileOptions options;
  options.cache_dir = (scratch / "cache").string();
  auto first = CompileCuda(kScale, "scale", options);
  REQUIRE(first.ok());
  REQUIRE_FALSE(first->from_cache);
  std::vector<fs::path> entries = FilesIn(scratch / "cache");
  REQUIRE(entries.size() == 1);

  auto second = CompileCuda(kScale, "scale", options);
  REQUIRE(second.ok());
  REQUIRE(second->from_cache);
  REQUIRE(second->ptx == first->ptx);

  SECTION("another architecture is another entry") {
    options.sm_arch = 80;
    auto other = CompileCuda(kScale, "scale", options);
    REQUIRE(other.ok());
    REQUIRE_FALSE(other->from_cache);
    REQUIRE(FilesIn(scratch / "cache").size() == 2);
  }
  SECTION("a corrupted byte in the payload is detected, recompiled and replaced") {
    std::string contents = ReadFile(entries[0]);
    contents[contents.size() - 10] ^= 0x20;
    std::ofstream(entries[0], std::ios::binary) << contents;
    auto recompiled = CompileCuda(kScale, "scale", options);
    REQUIRE(recompiled.ok());
    REQUIRE_FALSE(recompiled->from_cache);
    REQUIRE(recompiled->ptx == first->ptx);
    auto again = CompileCuda(kScale, "scale", options);
    REQUIRE(again->from_cache);  // the entry was rewritten
  }
  SECTION("a truncated entry is detected, recompiled and replaced") {
    std::string contents = ReadFile(entries[0]);
    std::ofstream(entries[0], std::ios::binary | std::ios::trunc) << contents.substr(0, contents.size() / 2);
    auto recompiled = CompileCuda(kScale, "scale", options);
    REQUIRE(recompiled.ok());
    REQUIRE_FALSE(recompiled->from_cache);
    REQUIRE(ReadFile(entries[0]) == contents);
  }
  SECTION("a different source is a different entry") {
    std::string other = std::string(kScale) + "// changed\n";
    auto compiled = CompileCuda(other, "scale", options);
    REQUIRE_FALSE(compiled->from_cache);
    REQUIRE(FilesIn(scratch / "cache").size() == 2);
  }
}

TEST_CASE("an empty cache_dir writes nothing", "[cuda][nvrtc]") {
  test_support::ScratchDir scratch("nvrtc_no_cache");
  const fs::path before = fs::current_path();
  fs::current_path(scratch.path());
  CompileOptions options;  // cache_dir ""
  auto first = CompileCuda(kScale, "scale", options);
  auto second = CompileCuda(kScale, "scale", options);
  fs::current_path(before);
  REQUIRE(first.ok());
  REQUIRE(second.ok());
  REQUIRE_FALSE(second->from_cache);
  REQUIRE(FilesIn(scratch.path()).empty());
}

TEST_CASE("the default cache folder follows XDG_CACHE_HOME, then HOME", "[cuda][nvrtc]") {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  const std::string saved_xdg = xdg ? xdg : "", saved_home = home ? home : "";
  setenv("XDG_CACHE_HOME", "/tmp/xdg", 1);
  REQUIRE(DefaultCudaCacheDir() == "/tmp/xdg/fusionopt/cuda");
  unsetenv("XDG_CACHE_HOME");
  setenv("HOME", "/home/someone", 1);
  REQUIRE(DefaultCudaCacheDir() == "/home/someone/.cache/fusionopt/cuda");
  unsetenv("HOME");
  REQUIRE(DefaultCudaCacheDir().empty());
  if (xdg) setenv("XDG_CACHE_HOME", saved_xdg.c_str(), 1);
  if (home) setenv("HOME", saved_home.c_str(), 1);
}

}  // namespace
}  // namespace fusionopt::cuda
