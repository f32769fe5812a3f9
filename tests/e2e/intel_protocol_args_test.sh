#!/usr/bin/env bash
# scripts/intel_protocol.sh's argument checks, the part of the device protocol
# that runs anywhere: a device call has minutes, so a mistyped step must stop
# the script at once (exit 2, naming the step), and every documented step,
# `batched` among them, must get past the check (here to the bundle, which
# does not exist: exit 1, "cannot unpack").
# Usage: intel_protocol_args_test.sh SCRIPT
set -u
script=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

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
echo "intel_protocol_args_test: ok"
