#!/usr/bin/env bash
# The closing lines of `make test`: one line per stage, read from the logs that each stage tee'd
# into LOG_DIR, then the totals as "total: N passed, N failed, N skipped". A long CI log is read
# from its end, where these lines stay visible.
#
#   scripts/test_summary.sh LOG_DIR     (LOG_DIR holds ctest.txt, pytest.txt, sanitize.txt, fuzz.txt)
set -euo pipefail
dir=${1:?usage: $0 LOG_DIR}
passed=0 failed=0 skipped=0

# A stage whose log has no summary line (its build failed, or it was stopped) counts as one
# failure; the other stages are still reported.
unfinished() {
  failed=$((failed + 1))
  echo "$1: FAILED before its summary (see $dir/$2)"
}

# ctest's "100% tests passed, 0 tests failed out of 492"
ctest_stage() {
  local label=$1 line total bad
  line=$(grep -sE '^[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$dir/$2" | tail -1) ||
    { unfinished "$label" "$2"; return; }
  bad=$(sed -E 's/.* ([0-9]+) tests? failed.*/\1/' <<<"$line")
  total=$(sed -E 's/.*out of ([0-9]+).*/\1/' <<<"$line")
  passed=$((passed + total - bad)) failed=$((failed + bad))
  echo "$label: $line"
}

# pytest's "865 passed, 7 skipped in 72.64s" (any of passed, failed, skipped, error may be absent)
pytest_stage() {
  local line count
  line=$(grep -sE '^(=+ )?[0-9]+ (passed|failed|skipped|error)' "$dir/$1" | tail -1) ||
    { unfinished pytest "$1"; return; }
  count() { grep -oE "[0-9]+ $1" <<<"$line" | cut -d' ' -f1 || echo 0; }
  passed=$((passed + $(count passed))) failed=$((failed + $(count failed) + $(count error)))
  skipped=$((skipped + $(count skipped)))
  echo "pytest: ${line//=/}" | sed -E 's/ +$//; s/: +/: /'
}

# fuzz.sh's one line per target, ending in "ok" or the failure
fuzz_stage() {
  local ok bad
  ok=$(grep -scE '^[a-z_]+_fuzzer .* ok$' "$dir/$1" || true)
  bad=$(grep -sE '^[a-z_]+_fuzzer ' "$dir/$1" | grep -cvE ' ok$' || true)
  ((ok + bad > 0)) || { unfinished "fuzz smoke" "$1"; return; }
  passed=$((passed + ok)) failed=$((failed + bad))
  echo "fuzz smoke: $ok of $((ok + bad)) targets ran clean for 60 s"
}

echo "---- make test summary"
ctest_stage "ctest" ctest.txt
pytest_stage pytest.txt
ctest_stage "ctest under ASan+UBSan" sanitize.txt
fuzz_stage fuzz.txt
echo "total: $passed passed, $failed failed, $skipped skipped"
((failed == 0))
