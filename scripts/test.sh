#!/usr/bin/env bash
# Builds skipkv (Release with debug info) and runs the default test suites:
# unit, kernels, golden, e2e, plus a short libFuzzer smoke run when clang is
# available. Usage: scripts/test.sh [extra ctest args]
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >/dev/null
cmake --build build -j "$JOBS"
ctest --test-dir build -L 'unit|kernels|golden|e2e' -j "$JOBS" --output-on-failure "$@"
if [ -x scripts/fuzz_smoke.sh ]; then scripts/fuzz_smoke.sh; fi
