#!/usr/bin/env bash
# scripts/intel_protocol.sh's argument checks, the part of the device protocol
# that runs anywhere: a device call has minutes, so a mistyped step must stop
# the script at once (exit 2, naming the step), and every documented step,
# `batched` among them, must get past the check (here to the bundle, which
# does not exist: exit 1, "cannot unpack"). Then a bundle of stand-in test
# programs, as .tar.gz and as .tar.xz on a PATH whose xz fails (the device
# image may have none), must be unpacked and its tests step run.
# Usage: intel_protocol_args_test.sh SCRIPT
set -u
script=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export MODELS_DIR=$tmp/models  # never the default one a real device call keeps

out=$("$script" 2>&1); rc=$?
[ "$rc" -eq 2 ] || fail "no arguments: exit $rc, want 2"
[[ $out == *"usage: "* ]] || fail "no arguments: no usage line in: $out"

out=$("$script" "$tmp/none.tar.xz" "$tmp/llama-bench" "$tmp/out" 10 ab_q8_0,batchd 2>&1); rc=$?
[ "$rc" -eq 2 ] || fail "unknown step: exit $rc, want 2"
[[ $out == *"unknown step 'batchd'"* ]] || fail "unknown step not named in: $out"
[ ! -e "$tmp/out" ] || fail "unknown step: the output folder was made before the check"

for steps in tests amx ab_q8_0 ab_q4_k_m batched decode depth bandwidth pp_no_amx ab_q4_k_m,batched,decode; do
  out=$("$script" "$tmp/none.tar.xz" "$tmp/llama-bench" "$tmp/out" 10 "$steps" 2>&1); rc=$?
  [ "$rc" -eq 1 ] || fail "steps $steps: exit $rc, want 1 (missing bundle)"
  [[ $out == *"cannot unpack"* ]] || fail "steps $steps: no 'cannot unpack' in: $out"
done
# A bundle whose test programs only say they passed: the unpacking is what is checked.
mkdir -p "$tmp/src/bundle/lib" "$tmp/noxz"
echo "0123abc stand-in" > "$tmp/src/bundle/COMMIT"
for t in kernels_matmul_amx_test kernels_matmul_test; do
  printf '#!/bin/sh\necho "[  PASSED  ] 1 test."\n' > "$tmp/src/bundle/$t"
  chmod +x "$tmp/src/bundle/$t"
done
tar -C "$tmp/src" -czf "$tmp/b.tar.gz" bundle
printf '#!/bin/sh\nexit 1\n' > "$tmp/noxz/xz"  # an image without a working xz
chmod +x "$tmp/noxz/xz"
if command -v xz > /dev/null; then tar -C "$tmp/src" -cf - bundle | xz > "$tmp/b.tar.xz"
else python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1], "w:xz").add(sys.argv[2], "bundle")' \
  "$tmp/b.tar.xz" "$tmp/src/bundle"; fi
for b in b.tar.gz b.tar.xz; do
  out=$(PATH="$tmp/noxz:$PATH" "$script" "$tmp/$b" "$tmp/llama-bench" "$tmp/out_$b" 30 tests 2>&1)
  rc=$?
  [ "$rc" -eq 0 ] || fail "$b: exit $rc, want 0: $out"
  [[ $out == *"bundle: 0123abc stand-in"* ]] || fail "$b: the bundle's COMMIT not shown in: $out"
  [[ $out == *"kernels_matmul_amx_test: exit 0"* ]] || fail "$b: the AMX test did not run: $out"
done
echo "intel_protocol_args_test: ok"
