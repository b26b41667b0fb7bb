#!/usr/bin/env bash
# fusionopt as a CI step: optimize a model, fail the job on an output mismatch or a speed
# regression, and keep the evidence as artifacts.
#
#   docs/ci/fusionopt-job.sh MODEL.onnx [ARTIFACT_DIR]      (default ARTIFACT_DIR: fusionopt-artifacts)
#
# Steps:
#   1. `fusionopt MODEL -O$LEVEL --verify`: the fail-safe runs original and optimized on seeded
#      inputs, undoes any fusion that changes an output, and exits 5 (writing nothing) if the
#      outputs still differ.
#   2. `fusionopt bench`: original against optimized on this machine, outputs checked again; exits
#      6 when the speed-up is below FUSIONOPT_MIN_SPEEDUP.
# ARTIFACT_DIR keeps what each step wrote, whatever the outcome: always the steps' logs
# (optimize.log, bench.log); once optimize passed, the optimized model and report.json (every
# fusion, and what --verify undid); once bench ran to a verdict on speed (exit 0 or 6), bench.json
# and roofline.svg. A step that finds different outputs (exit 5) writes nothing but its log.
#
# Exit status: 0 passed; 5 outputs differ; 6 slower than FUSIONOPT_MIN_SPEEDUP; 2 usage; any
# other fusionopt exit code (1 invalid model, 3 I/O, 4 unsupported) as fusionopt gave it.
#
# Settings (environment):
#   FUSIONOPT               the binary (default: fusionopt on PATH)
#   FUSIONOPT_LEVEL         optimization level (default 3)
#   FUSIONOPT_TARGET        cost-model target (default cpu: decide, and time, on this runner)
#   FUSIONOPT_RUNTIME       portable (default) or ort (docs/ort.md); with ort there is no bench
#                           step, since fusionopt's runtime does not run ORT's contrib ops
#   FUSIONOPT_DIMS          symbolic dim sizes, "batch=1 sequence=128", for both steps (-O3's
#                           decisions, --verify's and bench's inputs); a symbol the model lacks
#                           is skipped with a warning, so one list can serve every model
#   FUSIONOPT_MIN_SPEEDUP   fail below this bench speed-up (default 1.0)
#   FUSIONOPT_BENCH_ITERS   timed inferences per side (default 30)
set -uo pipefail

usage() { echo "usage: $0 MODEL.onnx [ARTIFACT_DIR]" >&2; exit 2; }
[[ $# -ge 1 && $# -le 2 ]] || usage
model=$1
artifacts=${2:-fusionopt-artifacts}
fusionopt=${FUSIONOPT:-fusionopt}
level=${FUSIONOPT_LEVEL:-3}
target=${FUSIONOPT_TARGET:-cpu}
runtime=${FUSIONOPT_RUNTIME:-portable}
min_speedup=${FUSIONOPT_MIN_SPEEDUP:-1.0}
iters=${FUSIONOPT_BENCH_ITERS:-30}

[[ -f $model ]] || { echo "error: $model: no such model" >&2; exit 2; }
command -v "$fusionopt" >/dev/null || { echo "error: $fusionopt: not found (set FUSIONOPT)" >&2; exit 2; }
mkdir -p "$artifacts" || exit 3
name=$(basename "$model" .onnx)
optimized=$artifacts/$name.O$level.onnx

dims=()
for dim in ${FUSIONOPT_DIMS:-}; do dims+=(--dim "$dim"); done

echo "== fusionopt: optimize $model at -O$level (--target $target, --runtime $runtime), verified"
"$fusionopt" "$model" -O"$level" --target "$target" --runtime "$runtime" "${dims[@]}" --verify \
  -o "$optimized" --report "$artifacts/report.json" 2>&1 | tee "$artifacts/optimize.log"
status=${PIPESTATUS[0]}
if [[ $status -eq 5 ]]; then
  echo "FAILED: the optimized model's outputs differ from the original's (see $artifacts/optimize.log)" >&2
  exit 5
elif [[ $status -ne 0 ]]; then
  echo "FAILED: fusionopt exited $status (see $artifacts/optimize.log)" >&2
  exit "$status"
fi

if [[ $runtime == ort ]]; then
  echo "PASSED: $optimized written for ONNX Runtime; artifacts in $artifacts"
  exit 0
fi

echo "== fusionopt: bench original against optimized (fail below ${min_speedup}x)"
"$fusionopt" bench "$model" --optimized "$optimized" --target "$target" "${dims[@]}" --iters "$iters" \
  --json "$artifacts/bench.json" --roofline "$artifacts/roofline.svg" --fail-if-slower "$min_speedup" 2>&1 |
  tee "$artifacts/bench.log"
status=${PIPESTATUS[0]}
case $status in
  0) echo "PASSED: $optimized; artifacts in $artifacts" ;;
  5) echo "FAILED: bench found the outputs different (see $artifacts/bench.log)" >&2 ;;
  6) echo "FAILED: the speed-up is below ${min_speedup}x (see $artifacts/bench.json)" >&2 ;;
  *) echo "FAILED: fusionopt bench exited $status (see $artifacts/bench.log)" >&2 ;;
esac
exit "$status"
