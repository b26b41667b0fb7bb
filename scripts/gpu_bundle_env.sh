#!/usr/bin/env bash
# Unpacks a bundle made by scripts/gpu_bundle.sh into a new temporary folder and prints, as
# shell assignments, where its binaries are and the loader path they need: the bundle's own
# libraries, then CUDA's (the toolkit's, else the pip wheels' nvidia-*/lib). For the GPU scripts:
#   eval "$(scripts/gpu_bundle_env.sh .gpubundle.tar.xz)"   # sets FUSIONOPT_BUNDLE_DIR, bin, LD_LIBRARY_PATH
# (scripts/gpu_check.sh, scripts/gpu_corpus.py). Exits 1, printing nothing, if it cannot unpack.
set -euo pipefail
bundle_file=${1:?usage: gpu_bundle_env.sh BUNDLE.tar.xz}
folder=$(mktemp -d)
tar -C "$folder" -xJf "$bundle_file" >&2 || { echo "cannot unpack $bundle_file" >&2; exit 1; }
cuda_wheels=$(python3 -c 'import glob, os, nvidia; print(":".join(sorted(glob.glob(os.path.join(list(nvidia.__path__)[0], "*", "lib")))))' 2>/dev/null || true)
# bin/ too: fusionopt_cuda_tests links libfusionopt_cuda.so, which the bundle keeps beside the binaries.
library_path="$folder/bin:$folder/lib:/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64:${cuda_wheels}:${LD_LIBRARY_PATH:-}"
printf 'FUSIONOPT_BUNDLE_DIR=%q\nbin=%q\nexport LD_LIBRARY_PATH=%q\nexport FUSIONOPT_CUDA_LIBRARY=%q\n' \
  "$folder" "$folder/bin" "$library_path" "$folder/bin/libfusionopt_cuda.so"
