#!/usr/bin/env bash
# e2e: `cmake --install` into a temporary prefix, then the installed skipkv runs
# `demo --limit 2` from another directory and finds its data in <prefix>/share/skipkv;
# `eval report` on its rows finds the installed plotting script.
#   install_demo_test.sh <build dir>
set -euo pipefail
build=$(cd "$1" && pwd)
prefix=$(mktemp -d); elsewhere=$(mktemp -d)
trap 'rm -rf "$prefix" "$elsewhere"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
test -x "$prefix/bin/skipkv" || { echo "FAIL: no $prefix/bin/skipkv"; exit 1; }
test -f "$prefix/share/skipkv/datasets/testbed_test.jsonl" || { echo "FAIL: data not installed"; exit 1; }
cd "$elsewhere"
# The default --data-dir is the installed copy, not the source tree.
help=$("$prefix/bin/skipkv" demo --help)
grep -q -- "--data-dir.*$prefix/share/skipkv" <<<"$help" || { echo "FAIL: default --data-dir is not $prefix/share/skipkv:"; echo "$help"; exit 1; }
out=$("$prefix/bin/skipkv" demo --limit 2 2>&1) || { echo "FAIL: demo exited non-zero:"; echo "$out"; exit 1; }
echo "$out"
grep -q "FullKV" <<<"$out" || { echo "FAIL: no FullKV row in the demo's table"; exit 1; }
grep -q "Calibrated presets from $prefix/share/skipkv/presets/testbed-calibrated.json" <<<"$out" ||
  { echo "FAIL: the installed demo did not load its calibrated presets:"; echo "$out"; exit 1; }
# `eval report` finds its installed plotting script (the demo's rows are a sweep's results).
help=$("$prefix/bin/skipkv" eval report --help)
grep -q -- "--script.*$prefix/share/skipkv/tools/make_report.py" <<<"$help" || { echo "FAIL: eval report's default --script is not the installed copy:"; echo "$help"; exit 1; }
mkdir sweep && mv skipkv-demo.jsonl sweep/results.jsonl
"$prefix/bin/skipkv" eval report sweep >/dev/null 2>&1 || { echo "FAIL: eval report on the demo's rows:"; "$prefix/bin/skipkv" eval report sweep; exit 1; }
test -s sweep/report.html || { echo "FAIL: no report.html"; ls sweep; exit 1; }
echo "install_demo_test: ok ($prefix)"
