#!/usr/bin/env bash
# Fuzz smoke run: builds only the libFuzzer targets (tests/fuzz/fuzz_*.cpp)
# with clang + ASan/UBSan into build-fuzz and runs each for FUZZ_SECONDS
# (default 20) from its seed corpus (tests/fuzz/corpus/<target>/, copied to a
# scratch dir so the repository is never modified). Exits non-zero if a
# target crashes; skips with a message when clang/libFuzzer is unavailable.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=${FUZZ_SECONDS:-20}
CXX_FUZZ=${CXX_FUZZ:-clang++}
CC_FUZZ=${CC_FUZZ:-clang}

if ! command -v "$CXX_FUZZ" >/dev/null 2>&1; then
  echo "fuzz_smoke: skipped ($CXX_FUZZ not found)"
  exit 0
fi
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' > "$probe/p.cpp"
if ! "$CXX_FUZZ" -fsanitize=fuzzer,address "$probe/p.cpp" -o "$probe/p" >/dev/null 2>&1; then
  echo "fuzz_smoke: skipped ($CXX_FUZZ cannot link -fsanitize=fuzzer; install libclang-rt-14-dev)"
  exit 0
fi

targets=()
for src in tests/fuzz/fuzz_*.cpp; do
  [ -e "$src" ] || continue
  targets+=("$(basename "$src" .cpp)")
done
if ((${#targets[@]} == 0)); then
  echo "fuzz_smoke: no fuzz targets"
  exit 0
fi

launcher=()
command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER="$CC_FUZZ" -DCMAKE_CXX_COMPILER="$CXX_FUZZ" "${launcher[@]}" \
  -DSKIPKV_BUILD_FUZZ=ON -DSKIPKV_BUILD_TESTS=OFF -DSKIPKV_BUILD_BENCH=OFF >/dev/null
cmake --build build-fuzz -j "${JOBS:-$(nproc)}" --target "${targets[@]}"

failed=()
for t in "${targets[@]}"; do
  work="$probe/$t"
  mkdir -p "$work/corpus" "$work/artifacts"
  if [ -d "tests/fuzz/corpus/$t" ]; then cp -r "tests/fuzz/corpus/$t/." "$work/corpus/"; fi
  echo "fuzz_smoke: $t for ${SECONDS_PER_TARGET}s"
  if ! "build-fuzz/tests/fuzz/$t" -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=2048 -timeout=10 \
       -artifact_prefix="$work/artifacts/" "$work/corpus" >"$work/log" 2>&1; then
    echo "fuzz_smoke: $t FAILED; last lines of its log:"
    tail -n 40 "$work/log"
    mkdir -p build-fuzz/artifacts && cp -r "$work/artifacts/." build-fuzz/artifacts/ || true
    failed+=("$t")
  else
    grep -E '^(#[0-9]+ *DONE|Done )' "$work/log" | tail -n 1 || true
  fi
done
if ((${#failed[@]})); then
  echo "fuzz_smoke: crashes in ${failed[*]} (inputs saved under build-fuzz/artifacts/)"
  exit 1
fi
echo "fuzz_smoke: ok (${targets[*]})"
