#!/usr/bin/env bash
# libFuzzer targets (tests/fuzz/fuzz_*.cpp), built with clang + ASan/UBSan
# into build-fuzz/ and run from their seed corpora (tests/fuzz/corpus/<target>/,
# copied to a scratch dir so the repository is never modified).
#
#   scripts/fuzz_smoke.sh                build every target, run each FUZZ_SECONDS (default 20)
#   scripts/fuzz_smoke.sh --build [T..]  only build (all targets, or T..)
#   scripts/fuzz_smoke.sh --run T..      only run T.. (already built) for FUZZ_SECONDS each
#   scripts/fuzz_smoke.sh --list         print the target names
#   scripts/fuzz_smoke.sh --flags T      print T's own libFuzzer flags (tests/fuzz/T.options)
#
# CTest runs `--build` as the fixture `fuzz_build` and `--run T` as `fuzz_T`
# (label `fuzz`). Exit status: 0 ok, 1 a crash or build failure, 77 skipped.
# When clang or libFuzzer is missing the run is a failure under CI=true or
# SKIPKV_REQUIRE_PREREQS=1 (scripts/test.sh sets it) and otherwise a skip
# (exit 77, which CTest reports as "Skipped"), always with a message naming
# what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=${FUZZ_SECONDS:-20}
CXX_FUZZ=${CXX_FUZZ:-clang++}
CC_FUZZ=${CC_FUZZ:-clang}

all_targets() {
  for src in tests/fuzz/fuzz_*.cpp; do [ -e "$src" ] && basename "$src" .cpp; done
}

# A target's own libFuzzer flags (max_len, dictionary): tests/fuzz/TARGET.options, one flag
# a line, '#' comments, paths from the repository root. scripts/fuzz.sh uses them too.
target_flags() {
  local f="tests/fuzz/$1.options"
  if [ -f "$f" ]; then grep -v -e '^[[:space:]]*#' -e '^[[:space:]]*$' "$f"; fi
  return 0
}

strict() { [ "${CI:-}" = "true" ] || [ "${SKIPKV_REQUIRE_PREREQS:-}" = "1" ]; }

# Missing prerequisite: fail when strict, else skip (77).
missing() {
  if strict; then
    echo "fuzz_smoke: FAILED: missing prerequisite: $1 (run scripts/setup.sh)" >&2
    exit 1
  fi
  echo "fuzz_smoke: skipped: missing prerequisite: $1 (run scripts/setup.sh)"
  exit 77
}

check_prereqs() {
  command -v "$CXX_FUZZ" >/dev/null 2>&1 || missing "$CXX_FUZZ (clang) not found"
  local probe
  probe=$(mktemp -d)
  echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' >"$probe/p.cpp"
  if ! "$CXX_FUZZ" -fsanitize=fuzzer,address "$probe/p.cpp" -o "$probe/p" >/dev/null 2>&1; then
    rm -rf "$probe"
    missing "libFuzzer ($CXX_FUZZ cannot link -fsanitize=fuzzer; install libclang-rt-14-dev)"
  fi
  rm -rf "$probe"
}

build() {
  local launcher=()
  command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER="$CC_FUZZ" -DCMAKE_CXX_COMPILER="$CXX_FUZZ" "${launcher[@]}" \
    -DSKIPKV_BUILD_FUZZ=ON -DSKIPKV_BUILD_TESTS=OFF -DSKIPKV_BUILD_BENCH=OFF >/dev/null
  cmake --build build-fuzz -j "${JOBS:-$(nproc)}" --target "$@"
}

# Runs each target for SECONDS_PER_TARGET from a scratch copy of its seeds.
run() {
  local failed=() skipped=() t
  scratch=$(mktemp -d)  # global: the EXIT trap runs after this function returns
  trap 'rm -rf "$scratch"' EXIT
  for t in "$@"; do
    if [ ! -x "build-fuzz/tests/fuzz/$t" ]; then
      echo "fuzz_smoke: build-fuzz/tests/fuzz/$t is not built (run scripts/fuzz_smoke.sh --build)" >&2
      exit 1
    fi
    local work="$scratch/$t"
    mkdir -p "$work/corpus" "$work/artifacts"
    if [ -d "tests/fuzz/corpus/$t" ]; then cp -r "tests/fuzz/corpus/$t/." "$work/corpus/"; fi
    echo "fuzz_smoke: $t for ${SECONDS_PER_TARGET}s"
    local rc=0 flags
    mapfile -t flags < <(target_flags "$t")
    # -error_exitcode=1: libFuzzer's default for a crash is 77, which this script reads as
    # "a prerequisite is missing" (a target's own exit 77), so a crash was reported as a skip.
    "build-fuzz/tests/fuzz/$t" -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=2048 -timeout=10 \
      -error_exitcode=1 "${flags[@]}" -artifact_prefix="$work/artifacts/" "$work/corpus" >"$work/log" 2>&1 || rc=$?
    if ((rc == 77)); then
      # The target's own prerequisite (e.g. a tokenizer file) is missing; it said which.
      grep -h "missing prerequisite" "$work/log" || tail -n 3 "$work/log"
      if strict; then
        echo "fuzz_smoke: $t FAILED (missing prerequisite)"
        failed+=("$t")
      else
        skipped+=("$t")
      fi
    elif ((rc != 0)); then
      echo "fuzz_smoke: $t FAILED; last lines of its log:"
      tail -n 40 "$work/log"
      mkdir -p build-fuzz/artifacts && cp -r "$work/artifacts/." build-fuzz/artifacts/ || true
      failed+=("$t")
    else
      grep -E '^(#[0-9]+ *DONE|Done )' "$work/log" | tail -n 1 || true
    fi
  done
  if ((${#failed[@]})); then
    echo "fuzz_smoke: failures in ${failed[*]} (crash inputs are saved under build-fuzz/artifacts/)"
    exit 1
  fi
  if ((${#skipped[@]})); then
    echo "fuzz_smoke: skipped ${skipped[*]} (missing prerequisites, see above)"
    exit 77
  fi
  echo "fuzz_smoke: ok ($*)"
}

mapfile -t targets < <(all_targets)
case "${1:-}" in
  --list) printf '%s\n' "${targets[@]}" ;;
  --flags) target_flags "${2:?usage: scripts/fuzz_smoke.sh --flags TARGET}" ;;
  --build)
    shift
    check_prereqs
    if (($#)); then build "$@"; else build "${targets[@]}"; fi ;;
  --run)
    shift
    (($#)) || { echo "usage: scripts/fuzz_smoke.sh --run TARGET..." >&2; exit 2; }
    check_prereqs
    run "$@" ;;
  "")
    check_prereqs
    build "${targets[@]}"
    run "${targets[@]}" ;;
  *) echo "usage: scripts/fuzz_smoke.sh [--list | --flags TARGET | --build [TARGET..] | --run TARGET..]" >&2; exit 2 ;;
esac
