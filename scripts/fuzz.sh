#!/usr/bin/env bash
# Runs fusionopt's libFuzzer targets (tests/fuzz/; docs/robustness.md, "Fuzzing and sanitizers").
#
#   scripts/fuzz.sh smoke             CI: each target 60 s from the seeds alone, fixed -seed
#   scripts/fuzz.sh long [SECONDS]    each target SECONDS (default 1800), growing a corpus that
#                                     is kept across runs in $BUILD_HARDENING/fuzz/corpus/
#
# Targets run two at a time (one per core), single-threaded. Any crash, sanitizer report,
# leak, timeout or out-of-memory fails the run; its reproducer is left in
# $BUILD_HARDENING/fuzz/artifacts/<target>/ — once fixed, copy it to
# tests/fuzz/regressions/<target>/ so ctest replays it. One summary line per target.
#
# Environment: BUILD_HARDENING (default build-hardening, configured by `make sanitize-test`),
# FUSIONOPT_BIN (default build/fusionopt: prints the IR text seeds), PYTHON (default
# .venv/bin/python), FUZZ_TARGETS (default: all four), FUZZ_PARALLEL (default 2).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
BUILD_HARDENING=${BUILD_HARDENING:-build-hardening}
FUSIONOPT_BIN=${FUSIONOPT_BIN:-build/fusionopt}
PYTHON=${PYTHON:-.venv/bin/python}
FUZZ_TARGETS=${FUZZ_TARGETS:-loader_fuzzer shape_inference_fuzzer text_format_fuzzer pipeline_fuzzer}
FUZZ_PARALLEL=${FUZZ_PARALLEL:-2}
WORK=$BUILD_HARDENING/fuzz

usage() { echo "usage: $0 smoke | long [SECONDS]" >&2; exit 2; }
mode=${1:-}
case "$mode" in
  smoke) seconds=60; seed=1 ;;
  long) seconds=${2:-1800}; seed=$(date +%s) ;;
  *) usage ;;
esac

# Per target: the seed kind, its dictionary, the input length cap and the per-input timeout
# (seconds; instrumented builds are slow, and a pipeline input runs every O3 pass).
seed_kind() { [[ $1 == text_format_fuzzer ]] && echo text || echo onnx; }
dictionary() { [[ $1 == text_format_fuzzer ]] && echo tests/fuzz/ir_text.dict || echo tests/fuzz/onnx.dict; }
max_len() { echo 65536; }
input_timeout() { [[ $1 == pipeline_fuzzer ]] && echo 30 || echo 10; }

make_seeds() {
  rm -rf "$WORK/seeds"
  "$PYTHON" scripts/fuzz_seeds.py "$WORK/seeds" >/dev/null
  [[ -x $FUSIONOPT_BIN ]] || { echo "fuzz.sh: $FUSIONOPT_BIN not built (it prints the IR text seeds)" >&2; exit 3; }
  mkdir -p "$WORK/seeds/text"
  local model name level
  for model in "$WORK"/seeds/onnx/*.onnx; do
    name=$(basename "$model" .onnx)
    for level in 0 3; do
      # Models the CLI rejects (the external-data seed, whose file is absent) have no text;
      # tensors over 16 elements print elided, which the parser rejects: useless as seeds.
      "$FUSIONOPT_BIN" "$model" -q -O$level --dump -o "$WORK/seeds/dump.onnx" \
        >"$WORK/seeds/text/$name.O$level.ir" 2>/dev/null || true
      if [[ ! -s $WORK/seeds/text/$name.O$level.ir ]] || grep -q '<elided' "$WORK/seeds/text/$name.O$level.ir"; then
        rm -f "$WORK/seeds/text/$name.O$level.ir"
      fi
    done
  done
  rm -f "$WORK"/seeds/dump.onnx*
}

# Field of libFuzzer's log: the last "cov: N ft: N corp: N" progress line and the final stats.
summarize() {
  local target=$1 log=$2 rc=$3 result=ok execs rate features corpus
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  features=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  corpus=$(grep -o 'corp: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  if ((rc != 0)); then
    if grep -q 'ERROR: libFuzzer: timeout' "$log"; then result=TIMEOUT
    elif grep -q 'out-of-memory' "$log"; then result=OOM
    elif grep -q 'LeakSanitizer' "$log"; then result=LEAK
    else result=CRASH; fi
    result="$result (rc $rc; log $log; reproducer: $(sed -n 's/.*Test unit written to //p' "$log" | tail -1))"
  fi
  printf '%-24s %10s execs %7s exec/s  corpus %6s  features %7s  %s\n' "$target" "${execs:-?}" \
    "${rate:-?}" "${corpus:-?}" "${features:-?}" "$result"
  # A CI log may keep only its tail: the report's first line and top frames go there too.
  if [[ $result != ok ]]; then
    grep -m1 -A6 -E 'ERROR: |runtime error:|fuzz finding:' "$log" | cut -c1-240 | sed 's/^/    /' || true
  fi
  [[ $result == ok ]]
}

run_target() {
  local target=$1 corpus=$WORK/corpus/$target
  [[ -x $BUILD_HARDENING/$target ]] || { echo "fuzz.sh: $BUILD_HARDENING/$target not built" >&2; return 3; }
  if [[ $mode == smoke ]]; then corpus=$WORK/smoke-corpus/$target; rm -rf "$corpus"; fi
  mkdir -p "$corpus" "$WORK/artifacts/$target" "$WORK/logs"
  # New inputs go to the first folder; the seeds folder is read only.
  OMP_NUM_THREADS=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$BUILD_HARDENING/$target" "$corpus" "$WORK/seeds/$(seed_kind "$target")" \
    -max_total_time="$seconds" -seed="$seed" -rss_limit_mb=2048 -timeout="$(input_timeout "$target")" \
    -max_len="$(max_len "$target")" -dict="$(dictionary "$target")" -print_final_stats=1 \
    -artifact_prefix="$WORK/artifacts/$target/" >"$WORK/logs/$target.log" 2>&1
}

make_seeds
echo "fuzz.sh $mode: ${seconds}s per target, -seed=$seed, $FUZZ_PARALLEL at a time; logs in $WORK/logs"
declare -A pids
failed=0
targets=($FUZZ_TARGETS)
for ((i = 0; i < ${#targets[@]}; i += FUZZ_PARALLEL)); do
  batch=("${targets[@]:i:FUZZ_PARALLEL}")
  for target in "${batch[@]}"; do run_target "$target" & pids[$target]=$!; done
  for target in "${batch[@]}"; do
    rc=0; wait "${pids[$target]}" || rc=$?
    summarize "$target" "$WORK/logs/$target.log" "$rc" || failed=1
  done
done
exit $failed
