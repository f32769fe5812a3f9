#!/usr/bin/env bash
# Builds skipkv (Release with debug info) and runs the default test suites:
# a short libFuzzer smoke run of the parsers (when clang is available), then
# the unit, kernels, golden and e2e CTest labels (ctest's summary is the last
# thing printed). Usage: scripts/test.sh [extra ctest args]
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}
launcher=()
command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" >/dev/null
cmake --build build -j "$JOBS"
scripts/fuzz_smoke.sh
ctest --test-dir build -L 'unit|kernels|golden|e2e' -j "$JOBS" --output-on-failure "$@"
