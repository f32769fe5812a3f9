#!/usr/bin/env bash
# The many-core speed protocol of BENCHMARKS.md ("Intel AMX and many cores"),
# in one command, within a time budget, for a machine reached for a few
# minutes (e.g. a 16-core Intel Xeon with AMX):
#   1. host facts (CPU model, flags, THP), the matmul and decode-prefetch
#      kernel tests of the bundle (the AMX ones on real tiles where the CPU
#      and Linux allow it);
#   2. random-weight r1-qwen-1.5b Q8_0 and Q4_K_M files (`skipkv make-model`),
#      kept in MODELS_DIR for the next call (only made when a step reads them);
#   3. bench_amx: interleaved Q8_0, Q4_K and Q6_K products (512 and 16 tokens;
#      Q4_K and Q6_K also at 64, Q4_K at 16 with the tiles' threshold lowered) with AMX off
#      and on, 1/4/16 threads, as a table of on / off, and decode with the
#      weights prefetched 0-16 KiB ahead as a second table and read as 1-8
#      streams side by side (the prefetch at its defaults and off) as a
#      third (scripts/bench_amx_table.py), whose
#      --pick and --pick-streams rules write the distance and stream counts
#      the rows call for to MODELS_DIR/decode_prefetch and
#      MODELS_DIR/decode_streams for step 5;
#   4. scripts/bench_ab.py, llama.cpp's llama-bench against skipkv with
#      SKIPKV_AMX=1, alternated, pp512 and tg32 at 16, 8, 4 and 2 threads, two
#      rounds per file;
#   5. decode at 1 and 4 threads on Q8_0 and Q4_K_M, llama.cpp against
#      skipkv's variants (the default dispatch, SKIPKV_SIMD=avx2, --weights
#      map, SKIPKV_REPACK=0: Q4_K in the file's layout, and, where step 3
#      picked them, SKIPKV_DECODE_PREFETCH=<the pick> and
#      SKIPKV_DECODE_STREAMS=<the pick>), alternated: which of ISA path, page
#      size, the interleaved layouts, the prefetch distance and the streams
#      the per-core decode gap of issue 40 (0.41x at 1 thread) follows
#      (decode never runs on tiles); with a pick, also skipkv's default
#      against the picks at 16 threads (DECODE_PF_THREADS), alternated;
#   6. batched: 16 sequences x 1,024 tokens of context at 16 threads, 32
#      decode steps, llama.cpp's llama-batched-bench (beside LLAMA_BENCH)
#      against skipkv (default and SKIPKV_AMX=1), alternated, two rounds per
#      file (issue 40 target 1: 16 x 1k batched decode >= 1.0x; the
#      environment's BATCHED_THREADS changes the thread count);
#   7. depth: one sequence decoding at 4,096 tokens of context at 16 threads
#      (DEPTH_THREADS), llama-bench -d 4096 against skipkv bench -b 1 -d 4096,
#      Q8_0, two rounds alternated: the long-thought case, where skipkv's
#      decode attention splits a sequence's cache into parts so that more
#      threads than KV heads take part;
#   8. skipkv's read bandwidth and decode per thread count, and pp512 with
#      AMX off, if time is left.
# When the AMX kernel tests fail on the machine, the timed runs that would set
# SKIPKV_AMX=1 set SKIPKV_AMX=0 instead, in this call and later ones (a marker
# in MODELS_DIR), and say so.
# Each step checks the time left and is skipped (saying so) when it would not
# fit; every result is written to OUTDIR as it is made. One device command
# runs at most 10 minutes, so STEPS picks the steps of this call, a comma list
# of tests, amx, ab_q8_0, ab_q4_k_m, batched, decode, depth, bandwidth, pp_no_amx
# (default: all; they run in this order whatever STEPS's order); e.g. a first
# call with tests,amx,ab_q8_0,ab_q4_k_m and a second with
# batched,decode,depth,bandwidth (BENCHMARKS.md's recipe).
#
# Usage: scripts/intel_protocol.sh BUNDLE LLAMA_BENCH OUTDIR [SECONDS [STEPS]]
#   BUNDLE         .tar.gz or .tar.xz made by scripts/device_bundle.sh
#   LLAMA_BENCH    path of llama.cpp's llama-bench, built on that machine with
#                  -DGGML_NATIVE=ON (nothing of llama.cpp is part of this
#                  repository); when a step of the call runs llama.cpp, the
#                  script waits for it (and for llama-batched-bench from its
#                  directory, which the batched step runs) before its first
#                  timed step, up to a third of the budget, so that a build
#                  started beside it never shares the cores with a timing
#   SECONDS        the budget (default 540)
set -u
if [ $# -lt 3 ]; then
  echo "usage: scripts/intel_protocol.sh BUNDLE LLAMA_BENCH OUTDIR [SECONDS [STEPS]]" >&2
  exit 2
fi
bundle=$1 lb=$2 out=$3 budget=${4:-540}
steps=${5:-tests,amx,ab_q8_0,ab_q4_k_m,batched,decode,depth,bandwidth,pp_no_amx}
for s in ${steps//,/ }; do
  case $s in tests | amx | ab_q8_0 | ab_q4_k_m | batched | decode | depth | bandwidth | pp_no_amx) ;;
    *) echo "intel_protocol.sh: unknown step '$s' in STEPS '$steps'" >&2; exit 2 ;;
  esac
done
want() { [[ ",$steps," == *",$1,"* ]]; }
cd "$(dirname "$0")/.." || exit 1
mkdir -p "$out"
start=$SECONDS
left() { echo $((budget - (SECONDS - start))); }
say() { echo "[$((SECONDS - start)) s] $*"; }

say "host"
uname -a
echo "cores: $(nproc)"
grep -m1 "model name" /proc/cpuinfo
grep -m2 -E "^(cpu family|model)\s" /proc/cpuinfo | tr '\n' ' '; echo
echo "flags: $(grep -m1 flags /proc/cpuinfo | tr ' ' '\n' | grep -E 'amx|avx512_vnni|avx512_bf16|avx512_fp16|avx_vnni' | tr '\n' ' ')"
echo "THP: $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>&1)"
lscpu > "$out/lscpu.txt" 2>&1

unpacked=$(mktemp -d)
trap 'rm -rf "$unpacked"' EXIT  # the bundle is unpacked anew by every call
# tar picks the compression from the file; an image without xz unpacks a
# .tar.xz with Python's tarfile (its lzma module) instead.
if ! tar -xf "$bundle" -C "$unpacked" 2> "$out/unpack.err" &&
  ! python3 -c 'import sys, tarfile
kw = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
tarfile.open(sys.argv[1]).extractall(sys.argv[2], **kw)' "$bundle" "$unpacked" 2>> "$out/unpack.err"; then
  echo "cannot unpack $bundle:" >&2; cat "$out/unpack.err" >&2; exit 1
fi
d=$unpacked/bundle
sk=(env LD_LIBRARY_PATH="$d/lib")
echo "bundle: $(head -1 "$d/COMMIT")"

# The models, only when a step of this call reads them, made in the background
# while the kernel tests run and kept in MODELS_DIR (default
# /tmp/skipkv-protocol-models) for the next call on the same machine; a file
# is renamed into place only when make-model finished it.
models=${MODELS_DIR:-/tmp/skipkv-protocol-models}
m1=0 m2=0
make_model() {  # make_model TYPE FILE
  [ -s "$2" ] && return 0
  "${sk[@]}" "$d/skipkv" make-model --preset r1-qwen-1.5b --type "$1" --tokenizer "$d/tokenizer.json" \
    -o "$2.part" -q -t 4 && mv "$2.part" "$2"
}
if want ab_q8_0 || want ab_q4_k_m || want batched || want decode || want depth || want bandwidth ||
  want pp_no_amx; then
  mkdir -p "$models"
  say "models (background, kept in $models)"
  make_model q8_0 "$models/r1q8.gguf" &
  m1=$!
  make_model q4_k_m "$models/r1q4.gguf" &
  m2=$!
fi

# SKIPKV_AMX for the timed runs: 1, unless this call's or an earlier call's
# kernel tests failed on this machine (marker in MODELS_DIR): timings of wrong
# results would waste the call, so skipkv then runs without AMX, and says so.
mkdir -p "$models"
amx=1
if want tests; then
  say "kernel tests"
  "${sk[@]}" "$d/kernels_matmul_amx_test" > "$out/amx_test.txt" 2>&1
  rc=$?
  echo "kernels_matmul_amx_test: exit $rc"; grep -E "^\[  (PASSED|FAILED|SKIPPED) |not run here|element" "$out/amx_test.txt" | head -12
  if [ "$rc" = 0 ]; then rm -f "$models/amx_failed"; else echo "exit $rc" > "$models/amx_failed"; fi
  SKIPKV_AMX=1 "${sk[@]}" "$d/kernels_matmul_test" > "$out/matmul_test.txt" 2>&1
  echo "kernels_matmul_test with SKIPKV_AMX=1: exit $?"; grep -E "^\[  (PASSED|FAILED) " "$out/matmul_test.txt" | head -12
  if [ -x "$d/kernels_decode_prefetch_test" ]; then  # bundles from before it lack it
    "${sk[@]}" "$d/kernels_decode_prefetch_test" > "$out/decode_prefetch_test.txt" 2>&1
    echo "kernels_decode_prefetch_test: exit $?"; grep -E "^\[  (PASSED|FAILED) " "$out/decode_prefetch_test.txt" | head -12
  fi
fi

if [ -e "$models/amx_failed" ]; then
  amx=0
  say "the AMX kernel tests failed on this machine ($models/amx_failed): skipkv's timed runs use SKIPKV_AMX=0"
fi

# Models first: timings never share the machine with make-model.
if [ "$m1" != 0 ]; then
  wait $m1 $m2
  say "models: $(ls -l "$models"/r1q8.gguf "$models"/r1q4.gguf 2>&1 | awk '{print $5, $NF}' | tr '\n' ' ')"
fi

# A llama.cpp build started beside this call must end before the first timed
# step, or it would share the cores with bench_amx: wait for its programs (up
# to a third of the budget) when a step of this call runs one.
if want ab_q8_0 || want ab_q4_k_m || want batched || want decode || want depth; then
  lbb=$(dirname "$lb")/llama-batched-bench
  while { [ ! -x "$lb" ] || { want batched && [ ! -x "$lbb" ]; }; } &&
    [ $((SECONDS - start)) -lt $((budget / 3)) ]; do sleep 2; done
  say "llama.cpp: $([ -x "$lb" ] && echo "$lb" || echo "no llama-bench at $lb")"
fi

# fits NAME SECONDS: whether the step NAME has more than SECONDS left; says so when not.
fits() { [ "$(left)" -gt "$2" ] && return 0; say "skip $1: $(left) s left"; return 1; }

if want amx && fits bench_amx 60; then
  say "bench_amx"
  timeout $(($(left) - 40)) "${sk[@]}" "$d/bench_amx" > "$out/bench_amx.txt" 2>&1
  python3 scripts/bench_amx_table.py "$out/bench_amx.txt" --pick "$models/decode_prefetch" \
    --pick-streams "$models/decode_streams" | tee "$out/bench_amx.md"
fi

ab() {  # ab NAME MODEL
  if [ ! -x "$lb" ]; then say "skip A/B $1: no llama-bench at $lb"; return; fi
  if [ "$(left)" -lt 90 ]; then say "skip A/B $1: $(left) s left"; return; fi
  say "A/B $1"
  timeout $(($(left) - 30)) python3 scripts/bench_ab.py -e llama=llama:"$lb" -e skipkv=skipkv:"$d/skipkv" \
    --env skipkv=LD_LIBRARY_PATH="$d/lib" --env skipkv=SKIPKV_AMX=$amx --args skipkv="--bandwidth-gbs 1" \
    -m "$2" -t 16,8,4,2 -p 512 -n 32 -r 1 --rounds 2 --jsonl "$out/ab_$1.jsonl" > "$out/ab_$1.md" 2> "$out/ab_$1.err"
  echo "bench_ab.py: exit $?"
  cat "$out/ab_$1.md"
}
want ab_q8_0 && ab q8_0 "$models/r1q8.gguf"
want ab_q4_k_m && ab q4_k_m "$models/r1q4.gguf"

# 16 x 1k batched decode: llama-batched-bench's S_TG (a shared 1,024-token
# prompt, -pps, unified KV) against skipkv bench's bd@1024 (each sequence
# its own 1,024 tokens), both 16 sequences and 32 steps, engines alternated.
batched_skipkv() {  # batched_skipkv FILE LOG AMX: skipkv's bd@1024 t/s
  SKIPKV_AMX=$3 timeout 120 "${sk[@]}" "$d/skipkv" bench -m "$1" -t "${BATCHED_THREADS:-16}" -p 0 -n 0 -b 16 \
    -d 1024 --decode-steps 32 -r 1 2>&1 | tee -a "$2" | awk -F'|' '$4 ~ /bd@1024/ {gsub(/ /, "", $5); print $5}'
}
batched_round() {  # batched_round ROUND FILE NAME
  local l s a
  l=$(timeout 120 "$lbb" -m "$2" -c 20000 -b 2048 -ub 512 -npp 1024 -ntg 32 -npl 16 -pps -kvu \
      -t "${BATCHED_THREADS:-16}" 2>&1 | tee -a "$out/batched_llama.txt" |
      awk -F'|' '$2 ~ /^ *1024 *$/ {gsub(/ /, "", $9); print $9}')
  s=$(batched_skipkv "$2" "$out/batched_skipkv.txt" 0)
  a=$(batched_skipkv "$2" "$out/batched_skipkv_amx.txt" "$amx")
  echo "round $1 $3: llama.cpp S_TG ${l:-?} t/s, skipkv ${s:-?} t/s, skipkv SKIPKV_AMX=$amx ${a:-?} t/s" |
    tee -a "$out/batched.md"
}
if want batched; then
  if [ ! -x "$lbb" ]; then say "skip batched: no llama-batched-bench at $lbb"
  else
    say "16 x 1k batched decode, ${BATCHED_THREADS:-16} threads: llama-batched-bench, skipkv, skipkv SKIPKV_AMX=1"
    for r in 1 2; do
      for f in q8_0:r1q8 q4_k_m:r1q4; do
        if [ "$(left)" -lt 100 ]; then say "skip batched round $r ${f%%:*}: $(left) s left"; continue; fi
        batched_round "$r" "$models/${f#*:}.gguf" "${f%%:*}"
      done
    done
  fi
fi

if want decode; then
  if [ ! -x "$lb" ]; then say "skip decode: no llama-bench at $lb"
  elif [ "$(left)" -lt 60 ]; then say "skip decode: $(left) s left"
  else
    sk_e() { echo "-e $1=skipkv:$d/skipkv --env $1=LD_LIBRARY_PATH=$d/lib --args $1=--bandwidth-gbs=1"; }
    # The prefetch distance bench_amx's decode rows picked (step 3, this call
    # or an earlier one), as one more variant; none when the defaults stood.
    pf=$(cat "$models/decode_prefetch" 2> /dev/null)
    pf_e=()
    if [ -n "$pf" ]; then
      # shellcheck disable=SC2207  # the engine options are meant to split into words
      pf_e=($(sk_e sk_pf) --env sk_pf=SKIPKV_DECODE_PREFETCH="$pf")
    fi
    # Likewise the stream counts the stream rows picked, and both picks at
    # once (the rows time each with the other at its defaults).
    st=$(cat "$models/decode_streams" 2> /dev/null)
    if [ -n "$st" ]; then
      # shellcheck disable=SC2207  # the engine options are meant to split into words
      pf_e+=($(sk_e sk_st) --env sk_st=SKIPKV_DECODE_STREAMS="$st")
    fi
    if [ -n "$pf" ] && [ -n "$st" ]; then
      # shellcheck disable=SC2207  # the engine options are meant to split into words
      pf_e+=($(sk_e sk_pf_st) --env sk_pf_st=SKIPKV_DECODE_PREFETCH="$pf" --env sk_pf_st=SKIPKV_DECODE_STREAMS="$st")
    fi
    say "decode at 1 and 4 threads: llama.cpp, skipkv default, avx2, --weights map, SKIPKV_REPACK=0${pf:+, SKIPKV_DECODE_PREFETCH=$pf}${st:+, SKIPKV_DECODE_STREAMS=$st}"
    # shellcheck disable=SC2046  # the engine options are meant to split into words
    timeout $(($(left) - 10)) python3 scripts/bench_ab.py -e llama=llama:"$lb" $(sk_e sk) $(sk_e sk_avx2) \
      $(sk_e sk_map) $(sk_e sk_file) "${pf_e[@]}" --env sk_avx2=SKIPKV_SIMD=avx2 --args sk_map="--weights map" \
      --env sk_file=SKIPKV_REPACK=0 -m "$models/r1q8.gguf" -m "$models/r1q4.gguf" \
      -t 1,4 -p 0 -n 16 -r 1 --rounds 2 \
      --jsonl "$out/decode.jsonl" > "$out/decode.md" 2> "$out/decode.err"
    echo "bench_ab.py: exit $?"
    cat "$out/decode.md"
    # The pick at many threads too (issue 40 target 2 is decode at 16):
    # skipkv's default against the pick only, alternated.
    pt=${DECODE_PF_THREADS:-16}
    if [ ${#pf_e[@]} -gt 0 ] && fits "decode picks at $pt threads" 60; then
      say "decode at $pt threads: skipkv default against${pf:+ SKIPKV_DECODE_PREFETCH=$pf}${st:+ SKIPKV_DECODE_STREAMS=$st}"
      # shellcheck disable=SC2046  # the engine options are meant to split into words
      timeout $(($(left) - 10)) python3 scripts/bench_ab.py $(sk_e sk) "${pf_e[@]}" \
        -m "$models/r1q8.gguf" -m "$models/r1q4.gguf" -t "$pt" -p 0 -n 32 -r 1 --rounds 2 \
        --jsonl "$out/decode_pf.jsonl" > "$out/decode_pf.md" 2> "$out/decode_pf.err"
      echo "bench_ab.py: exit $?"
      cat "$out/decode_pf.md"
    fi
  fi
fi

# One sequence at 4,096 tokens of context: llama-bench's tg32 after a 4,096-token
# prefill (-d) against skipkv's bd@4096 (its cache filled directly), Q8_0.
if want depth; then
  if [ ! -x "$lb" ]; then say "skip depth: no llama-bench at $lb"
  else
    dt=${DEPTH_THREADS:-16}
    say "one sequence at 4,096 tokens of context, $dt threads: llama-bench -d 4096, skipkv bench -b 1 -d 4096"
    for r in 1 2; do
      if [ "$(left)" -lt 70 ]; then say "skip depth round $r: $(left) s left"; continue; fi
      l=$(timeout 90 "$lb" -m "$models/r1q8.gguf" -t "$dt" -p 0 -n 32 -d 4096 -r 1 -o jsonl 2>> "$out/depth_llama.err" |
          tee -a "$out/depth_llama.jsonl" | python3 -c 'import json, sys
for line in sys.stdin: print(round(json.loads(line)["avg_ts"], 2))')
      s=$(timeout 60 "${sk[@]}" "$d/skipkv" bench -m "$models/r1q8.gguf" -t "$dt" -p 0 -n 0 -b 1 -d 4096 \
          --decode-steps 32 -r 1 --bandwidth-gbs 1 2>&1 | tee -a "$out/depth_skipkv.txt" |
          awk -F'|' '$4 ~ /bd@4096/ {gsub(/ /, "", $5); print $5}')
      echo "round $r: llama.cpp tg32@d4096 ${l:-?} t/s, skipkv bd@4096 ${s:-?} t/s" | tee -a "$out/depth.md"
    done
  fi
fi

if want bandwidth && fits bandwidth 45; then
  say "read bandwidth and decode per thread count"
  timeout $(($(left) - 20)) "${sk[@]}" "$d/skipkv" bench -m "$models/r1q8.gguf" -p 0 -n 16 -r 1 -t 16,8,4,2,1 \
    > "$out/bandwidth.txt" 2>&1
  grep -E "read bandwidth|tg16|AMX" "$out/bandwidth.txt"
fi
if want pp_no_amx && fits pp_no_amx 25; then
  say "pp512 with AMX off"
  timeout $(($(left) - 5)) "${sk[@]}" "$d/skipkv" bench -m "$models/r1q8.gguf" -p 512 -n 0 -r 1 -t 16,4 \
    > "$out/pp_no_amx.txt" 2>&1
  grep -E "pp512|AMX" "$out/pp_no_amx.txt"
fi
say "done"
