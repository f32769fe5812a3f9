#!/usr/bin/env bash
# e2e: `cmake --install` into a temporary prefix, then the installed skipkv runs
# `demo --limit 2` from another directory and finds its data in <prefix>/share/skipkv.
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
echo "install_demo_test: ok ($prefix)"
