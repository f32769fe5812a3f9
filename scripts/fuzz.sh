#!/usr/bin/env bash
# Long fuzzing campaign for one libFuzzer target:
#   scripts/fuzz.sh TARGET MINUTES [extra libFuzzer flags]
# Builds TARGET (scripts/fuzz_smoke.sh --build), then fuzzes it for MINUTES of
# wall time from a persistent corpus, build-fuzz/corpus/TARGET/, seeded from
# tests/fuzz/corpus/TARGET/ (new inputs accumulate across campaigns; copy the
# interesting ones back by hand). A crash stops the run; its input is saved in
# build-fuzz/artifacts/TARGET/ -- once fixed, commit it to
# tests/fuzz/corpus/TARGET/ as a reproducer so every smoke run replays it.
# The log is build-fuzz/logs/TARGET.log; the last line printed is a summary:
#   fuzz: TARGET MINUTES min: N executions, E edges, F features, I corpus inputs, C crashes (exit X)
# TARGET's own flags (max_len, dictionary) come from tests/fuzz/TARGET.options.
set -euo pipefail
cd "$(dirname "$0")/.."
if (($# < 2)) || ! [[ "$2" =~ ^[0-9]+$ ]] || (($2 < 1)); then
  echo "usage: scripts/fuzz.sh TARGET MINUTES [libFuzzer flags]   (targets: $(scripts/fuzz_smoke.sh --list | tr '\n' ' '))" >&2
  exit 2
fi
target=$1 minutes=$2
shift 2
if [ ! -f "tests/fuzz/$target.cpp" ]; then
  echo "fuzz: no such target '$target' (targets: $(scripts/fuzz_smoke.sh --list | tr '\n' ' '))" >&2
  exit 2
fi
SKIPKV_REQUIRE_PREREQS=1 scripts/fuzz_smoke.sh --build "$target" >/dev/null
corpus=build-fuzz/corpus/$target artifacts=build-fuzz/artifacts/$target log=build-fuzz/logs/$target.log
mkdir -p "$corpus" "$artifacts" "$(dirname "$log")"
if [ -d "tests/fuzz/corpus/$target" ]; then cp -rn "tests/fuzz/corpus/$target/." "$corpus/"; fi
# Run a copy, so a rebuild (e.g. scripts/test.sh) can relink the target meanwhile.
bin=build-fuzz/campaign-bin/$target
mkdir -p "$(dirname "$bin")"
cp "build-fuzz/tests/fuzz/$target" "$bin.tmp" && mv -f "$bin.tmp" "$bin"
# The target's own flags (tests/fuzz/TARGET.options: max_len, dictionary) come first, so
# flags given here override them.
mapfile -t flags < <(scripts/fuzz_smoke.sh --flags "$target")
rc=0
"$bin" -max_total_time=$((minutes * 60)) -rss_limit_mb=2048 -timeout=10 \
  -print_final_stats=1 -artifact_prefix="$artifacts/" "${flags[@]}" "$@" "$corpus" >"$log" 2>&1 || rc=$?
execs=$(grep -E '^stat::number_of_executed_units:' "$log" | tail -n 1 | awk '{print $2}')
crashes=$(find "$artifacts" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
# Coverage at the end: libFuzzer's last status line ("cov: EDGES ft: FEATURES corp: N/SIZE").
cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+' "$log" | tail -n 1 | awk '{print $2 " edges, " $4 " features, " $6 " corpus inputs"}')
echo "fuzz: $target $minutes min: ${execs:-?} executions, ${cov:-? coverage}, $crashes crashes (exit $rc); log $log"
exit "$rc"
