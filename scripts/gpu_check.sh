#!/usr/bin/env bash
# The GPU check of issue 7 (docs/cuda.md), under 8 minutes on a machine with an NVIDIA GPU:
#   1. build (or, with FUSIONOPT_GPU_BUNDLE=FILE.tar.xz, use what scripts/gpu_bundle.sh prepared),
#   2. the GPU tests (every fused and standard-op kernel against the CPU runtime),
#   3. every model in models/ at O0 and O3: `fusionopt verify --backend cuda` against the CPU
#      runtime, and `fusionopt bench --backend cuda` (plain and --cuda-graph) with JSON,
#   4. the Python API's CUDA provider (numpy, DLPack with torch, CUDA Graphs) on models/,
#   5. a fused elementwise kernel's bandwidth against a device copy,
# writing a summary (summary.md) and every log and JSON (logs.tar.gz) into RESULTS_DIR
# (default gpu_results/). On a lent device machine:
#   scripts/gpu_bundle.sh    (here, first; carry .gpubundle.tar.xz)
#   FUSIONOPT_GPU_BUNDLE=.gpubundle.tar.xz scripts/gpu_check.sh "$OUT"
#
#   scripts/gpu_check.sh [RESULTS_DIR]
set -uo pipefail
cd "$(dirname "$0")/.."
results=$(realpath -m "${1:-gpu_results}")
mkdir -p "$results"
summary="$results/summary.md"
: > "$summary"
say() { echo "$*" | tee -a "$summary"; }
step() { local name=$1 limit=$2; shift 2; timeout "$limit" "$@" > "$results/$name.log" 2>&1; local rc=$?; say "- $name: exit $rc"; return $rc; }

say "# fusionopt GPU check, $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | sed 's/^/GPU: /' | tee -a "$summary"

if [[ -n "${FUSIONOPT_GPU_BUNDLE:-}" ]]; then
  bundle_env=$(scripts/gpu_bundle_env.sh "$FUSIONOPT_GPU_BUNDLE") || { say "cannot unpack $FUSIONOPT_GPU_BUNDLE"; exit 1; }
  eval "$bundle_env"
  bundle=$FUSIONOPT_BUNDLE_DIR
  # The benchmark-size models are generated here (numpy and onnx only).
  [[ -f models/bench/bert_style.onnx ]] || python3 models/generate.py --bench > "$results/models.log" 2>&1
  models_bench=$(realpath models/bench)
else
  step build 300 bash -c 'cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release && cmake --build build-gpu -j"$(nproc)" --target fusionopt fusionopt_shared fusionopt_cuda fusionopt_cuda_tests fusionopt_bench_cuda_bandwidth' || exit 1
  bin=$(realpath build-gpu)
  models_bench=$(realpath models/bench)
fi
export FUSIONOPT_CUDA_LIBRARY="$bin/libfusionopt_cuda.so"
fo="$bin/fusionopt"

step cuda_tests 180 "$bin/fusionopt_cuda_tests"
tail -n 3 "$results/cuda_tests.log" | sed 's/^/    /' | tee -a "$summary"

work=$(mktemp -d)
say ""
say "| model | level | verify vs CPU | kernels original → optimized | CUPTI kernels | p50 ms original | p50 ms optimized | speed-up | speed-up (CUDA Graph) |"
say "|---|---|---|---|---|---:|---:|---:|---:|"
for model in models/*.onnx "$models_bench"/*.onnx; do
  [[ -f "$model" ]] || continue
  name=$(basename "$model" .onnx)
  [[ "$model" == "$models_bench"/* ]] && name="${name}_bench"
  shapes=()
  if [[ "$model" == "$models_bench"/* ]]; then
    # Benchmark size: sequence-like symbolic dims 128, every other symbolic dim 1 (bench/compare.py's sizes).
    mapfile -t shapes < <(python3 - "$model" <<'PY'
import sys, onnx
graph = onnx.load(sys.argv[1], load_external_data=False).graph
initializers = {i.name for i in graph.initializer}
for value in graph.input:
    if value.name in initializers:
        continue
    dims = value.type.tensor_type.shape.dim
    if any(d.dim_param for d in dims):
        sizes = [str(d.dim_value) if not d.dim_param else ("128" if "seq" in d.dim_param.lower() else "1") for d in dims]
        print("--shape")
        print(f"{value.name}={'x'.join(sizes)}")
PY
)
  fi
  for level in 0 3; do
    out="$work/$name.O$level.onnx"
    "$fo" optimize "$model" -O"$level" -o "$out" > /dev/null 2>&1 || { say "| $name | O$level | optimize failed | | | | | | |"; continue; }
    timeout 60 "$fo" verify "$model" "$out" --backend cuda --runs 1 "${shapes[@]}" > "$results/verify_${name}_O$level.log" 2>&1
    verified=$([[ $? == 0 ]] && echo pass || echo FAIL)
    json="$results/bench_${name}_O$level.json"
    timeout 90 "$fo" bench "$model" -O"$level" --backend cuda --warmup 5 --iters 50 "${shapes[@]}" --json "$json" > "$results/bench_${name}_O$level.log" 2>&1
    timeout 90 "$fo" bench "$model" -O"$level" --backend cuda --cuda-graph --warmup 5 --iters 50 "${shapes[@]}" --json "$json.graph" > /dev/null 2>&1
    python3 - "$json" "$name" "$level" "$verified" >> "$summary" <<'PY'
import json, sys, os
path, name, level, verified = sys.argv[1:]
def load(p):
    try:
        return json.load(open(p))
    except Exception:
        return None
r, g = load(path), load(path + ".graph")
if r is None:
    print(f"| {name} | O{level} | {verified} | bench failed | | | | | |")
else:
    o, p = r["original"], r["optimized"]
    cupti = f'{o.get("kernels_executed")} → {p.get("kernels_executed")}'
    graph = f'{g["speedup"]:.2f}' if g else "failed"
    print(f'| {name} | O{level} | {verified} | {o["kernels"]} → {p["kernels"]} | {cupti} | {o["latency_ms"]["p50"]:.4f} | '
          f'{p["latency_ms"]["p50"]:.4f} | {r["speedup"]:.2f} | {graph} |')
PY
  done
done
say ""
say "Python API, CUDAExecutionProvider against the CPU runtime (scripts/gpu_python_check.py):"
PYTHONPATH=python FUSIONOPT_LIBRARY="$bin/libfusionopt.so.1" timeout 120 python3 scripts/gpu_python_check.py models/*.onnx \
  > "$results/python_api.log" 2> "$results/python_api.err"
say "- python_api: exit $?"
cat "$results/python_api.log" >> "$summary"
say ""
step bandwidth 60 "$bin/fusionopt_bench_cuda_bandwidth" 256 20
cat "$results/bandwidth.log" >> "$summary"
rm -rf "$work" "${bundle:-}"
# Two files come back from a device run (summary.md, logs.tar.gz): a lent machine returns a
# handful of files with plain names only.
# The archive is written outside the folder it packs (tar refuses a file that grows while read).
archive=$(mktemp --suffix=.tar.gz)
(cd "$results" && tar -czf "$archive" --exclude=summary.md . && find . -type f ! -name summary.md -delete) &&
  mv "$archive" "$results/logs.tar.gz"
say ""
say "results in $results: summary.md, and every log and JSON in logs.tar.gz"
