#!/usr/bin/env bash
# Packs what the many-core protocol (scripts/intel_protocol.sh) runs on a
# machine without a package registry: stripped `skipkv`, `bench_amx` and the
# matmul and decode-prefetch kernel tests from an existing build, the shared libraries `ldd` lists
# for them (all but libc, libm, libstdc++ and libgcc_s, which a newer system
# has in newer versions), and the Qwen2 tokenizer.json `make-model` needs, as
# one archive: OUT.tar.gz (gzip, which every Linux image has) or OUT.tar.xz
# (smaller; intel_protocol.sh unpacks it with Python's lzma where the machine
# has no xz). Usage: scripts/device_bundle.sh [BUILD_DIR] OUT.tar.gz|OUT.tar.xz
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -eq 1 ]; then build=build; out=$1; elif [ $# -eq 2 ]; then build=$1; out=$2; else
  echo "usage: scripts/device_bundle.sh [BUILD_DIR] OUT.tar.gz|OUT.tar.xz" >&2; exit 2; fi
case $out in
  *.tar.gz | *.tgz) compress=(gzip -6) ;;
  *.tar.xz) compress=(xz -6 -T2) ;;
  *) echo "device_bundle.sh: $out: name it .tar.gz or .tar.xz" >&2; exit 2 ;;
esac
bins=("$build/apps/skipkv/skipkv" "$build/bench/bench_amx" "$build/tests/kernels/kernels_matmul_test"
      "$build/tests/kernels/kernels_matmul_amx_test" "$build/tests/kernels/kernels_decode_prefetch_test")
for b in "${bins[@]}"; do
  [ -x "$b" ] || { echo "device_bundle.sh: $b is missing: build it first (cmake --build $build)" >&2; exit 1; }
done
tok=.deps/npm/tokenizer-qwen3/models/tokenizer.json
[ -f "$tok" ] || { echo "device_bundle.sh: $tok is missing: run scripts/setup.sh" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bundle/lib"
for b in "${bins[@]}"; do cp "$b" "$tmp/bundle/"; strip "$tmp/bundle/$(basename "$b")"; done
ldd "${bins[@]}" | awk '/=>/ {print $3}' | sort -u | grep -v -E '/(libc|libm|libstdc\+\+|libgcc_s)\.so' |
  while read -r lib; do cp -L "$lib" "$tmp/bundle/lib/"; done
cp "$tok" "$tmp/bundle/"
{ git rev-parse HEAD; git status --porcelain; } > "$tmp/bundle/COMMIT"
tar -C "$tmp" -cf - bundle | "${compress[@]}" > "$out"
echo "device_bundle.sh: $out ($(du -h "$out" | cut -f1)): ${bins[*]##*/}, $(ls "$tmp/bundle/lib" | wc -l) libraries"
