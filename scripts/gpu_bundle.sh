#!/usr/bin/env bash
# Prepares .gpubundle.tar.xz for scripts/gpu_check.sh on a GPU machine that cannot install
# packages (the device machines lent to sessions reach no registry): optimized builds (the
# build folder `make` uses, RelWithDebInfo, or BUILD=DIR) of fusionopt, libfusionopt.so.1 (the
# Python package's library), the plugin, the CUDA tests and the bandwidth benchmark, stripped, with the non-CUDA shared libraries they need
# (protobuf, onnx, oneDNN, spdlog, fmt), compressed (~20 MB) to travel with the working tree.
# The CUDA libraries (cudart, cuBLASLt, cuDNN, NVRTC, CUPTI) are the GPU machine's own; the
# benchmark-size models are generated there (models/generate.py needs only numpy and onnx).
#
#   scripts/gpu_bundle.sh            # then carry .gpubundle.tar.xz to the GPU machine and run
#   FUSIONOPT_GPU_BUNDLE=.gpubundle.tar.xz scripts/gpu_check.sh OUT_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
bundle=.gpubundle
cmake -S . -B "$build" >/dev/null
cmake --build "$build" -j"$(nproc)" --target fusionopt fusionopt_shared fusionopt_cuda fusionopt_cuda_tests \
  fusionopt_bench_cuda_bandwidth
rm -rf "$bundle" "$bundle.tar.xz"
mkdir -p "$bundle/bin" "$bundle/lib"
for target in fusionopt libfusionopt.so.1 libfusionopt_cuda.so fusionopt_cuda_tests fusionopt_bench_cuda_bandwidth; do
  cp "$build/$target" "$bundle/bin/"
  strip --strip-unneeded "$bundle/bin/$target"
done
# Shared libraries that are neither glibc/libstdc++ (the GPU machine has them) nor CUDA's.
for binary in "$bundle"/bin/*; do
  ldd "$binary" | awk '/=> \// {print $3}'
done | sort -u | grep -v -E '/(libc|libm|libdl|librt|libpthread|libgcc_s|libstdc\+\+|ld-linux)[.-]|/usr/local/cuda|libcuda\.so|libnvidia|libfusionopt_cuda' |
  while read -r library; do cp -L "$library" "$bundle/lib/"; done
tar -C "$bundle" -cJf "$bundle.tar.xz" bin lib
rm -rf "$bundle"
ls -la "$bundle.tar.xz"
