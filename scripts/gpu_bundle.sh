#!/usr/bin/env bash
# Prepares .gpubundle/ for scripts/gpu_check.sh on a GPU machine that cannot install packages
# (the device machines lent to sessions reach no registry): optimized builds (the build folder
# `make` uses, RelWithDebInfo, or BUILD=DIR) of fusionopt, the plugin, the CUDA tests and the
# bandwidth benchmark, stripped, with the non-CUDA shared
# libraries they need (protobuf, onnx, oneDNN, spdlog, fmt) and the benchmark-size models.
# The CUDA libraries (cudart, cuBLASLt, cuDNN, NVRTC, CUPTI) are the GPU machine's own.
#
#   scripts/gpu_bundle.sh            # then carry .gpubundle to the GPU machine and run
#   FUSIONOPT_GPU_BUNDLE=.gpubundle scripts/gpu_check.sh OUT_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
bundle=.gpubundle
cmake -S . -B "$build" >/dev/null
cmake --build "$build" -j"$(nproc)" --target fusionopt fusionopt_cuda fusionopt_cuda_tests fusionopt_bench_cuda_bandwidth
.venv/bin/python -c 'import sys; sys.path.insert(0, "bench"); import bench_common; bench_common.ensure_bench_models(["bert_style", "gpt2_style", "mobilenet_style", "resnet_style", "vit_style"])'
rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib" "$bundle/models"
for target in fusionopt libfusionopt_cuda.so fusionopt_cuda_tests fusionopt_bench_cuda_bandwidth; do
  cp "$build/$target" "$bundle/bin/"
  strip --strip-unneeded "$bundle/bin/$target"
done
# Shared libraries that are neither glibc/libstdc++ (the GPU machine has them) nor CUDA's.
for binary in "$bundle"/bin/*; do
  ldd "$binary" | awk '/=> \// {print $3}'
done | sort -u | grep -v -E '/(libc|libm|libdl|librt|libpthread|libgcc_s|libstdc\+\+|ld-linux)[.-]|/usr/local/cuda|libcuda\.so|libnvidia' |
  while read -r library; do cp -L "$library" "$bundle/lib/"; done
cp models/bench/*.onnx "$bundle/models/"
du -sh "$bundle"
