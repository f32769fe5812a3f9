// Included by matmul_body-inl.h once per Highway target (inside its namespace), after
// the float tiles (FloatLoader).
//
// ---- Float rows interleaved in groups of 16 (DType::kF32x16, kF16x16) ------------
// The layout (tensor/interleaved.h) puts element k of a group's 16 rows side
// by side, so one step loads the 16 rows' weights at k as 16 / N vectors (N
// f32 lanes) and multiplies them by token t's x[t][k] broadcast to every
// lane: an outer product, one lane per row, with no horizontal sums. Every
// (row r, token t) result is the one fused multiply-add chain
//   acc = 0;  acc = fma(w[r][k], x[t][k], acc)  for k = 0, 1, ..., in - 1
// computed in r's lane whatever the tile, the token count, the thread count or
// the cache blocking, so decode equals the token's result in a batch bit for
// bit, and every target that fuses its multiply-adds (the x86 ones, not the
// portable EMU128 or SCALAR) gives the bits of a scalar std::fma chain
// (kernels_matmul_test's EveryResultIsTheScalarFusedChain).
//
// Why a layout of its own: the row-major tiles (FloatRows) load a vector of
// k from both operands, so a 6-row x 4-token AVX-512 tile reads 10 vectors,
// its 6 weight rows streaming from L2, for 24 FMAs, and reached 62-78 % of
// the core's FMA roof on Zen 5 (BENCHMARKS.md, "FMA roof"). Here a 48-row x
// 8-token tile reads 3 weight vectors and 8 scalars for 24 FMAs: a third of
// the weight bytes per FMA and almost no activation bytes, so it runs near
// the roof from L2 (a probe: 193-211 GFLOP/s against 215-223 on one Zen 5
// core, F16, both FFN shapes at 512 tokens). The model loader interleaves
// F32 and F16 matrices only where these tiles win, on AVX-512
// (FloatX16Preferred); on AVX2 a 16-row x 6-token tile measured no faster than
// the row-major 3 x 4 tile, which already runs at 82-92 % of that roof.

constexpr int kFx16Group = 16;  // rows of a group
// f32 lanes a step uses (a group is kFx16Vecs vectors of them).
constexpr int kFx16Lanes = HWY_LANES(float) < kFx16Group ? static_cast<int>(HWY_LANES(float)) : kFx16Group;
constexpr int kFx16Vecs = kFx16Group / kFx16Lanes;
// Batch tiles: kFx16TileGroups groups x kFx16TileTokens tokens, 24 of the 32
// AVX-512 registers (3 x 8) or 12 of the 16 AVX2 ones (2 vectors x 6).
// Decode: kFx16DecodeGroups groups at once (FloatX16Decode), so that 4 FMA
// chains (each bound by the FMA's latency) overlap, each group read from a
// stream of its own, and a software prefetch kFx16DecodeAheadBytes ahead on
// each: on one Zen 5 core (F16, cold, 8960 x 1536, 1536 x 8960 and the
// 151936-row output head, three rounds alternated) a median 37.7 GB/s with
// 1,024 bytes, against 33.1 without one, 34.6 with 512, 35.4 with 2,048,
// about 30 with 4,096 or 8,192, and 34.1 for the row-major decode
// (FloatDecodeRun; BENCHMARKS.md, "sixteenth session"). 2, 4 or 8 groups at
// once from far-apart parts were alike end to end (0.92-0.96x the row-major
// decode before the prefetch), and so were 4 adjacent groups in the kernel
// rows.
constexpr int kFx16TileGroups = kFx16Vecs == 1 ? 3 : 1;
constexpr int kFx16TileTokens = kFx16Vecs == 1 ? 8 : kFx16Vecs == 2 ? 6 : 3;
constexpr int kFx16DecodeGroups = kFx16Vecs >= 4 ? 1 : 4 / kFx16Vecs;
constexpr int64_t kFx16DecodeAheadBytes = 1024;

// NG groups x tokens [t0, t0 + NT), all `in` elements, stored to Y: the
// groups that start at rows r, r + gap, ..., r + (NG - 1) gap (r and gap
// multiples of 16; gap = 16 for adjacent groups).
template <int NG, int NT, class WT>
HWY_NOINLINE void FloatX16Tile(const MatArgs& a, int64_t r, int64_t t0, int64_t gap = kFx16Group) {
  using L = FloatLoader<WT>;
  const hn::CappedTag<float, kFx16Group> df;
  using V = hn::Vec<decltype(df)>;
  constexpr int kAcc = NG * kFx16Vecs;
  const size_t group_elems = static_cast<size_t>(gap) * static_cast<size_t>(a.in);
  const WT* w = reinterpret_cast<const WT*>(a.w + static_cast<size_t>(r) * a.w_row_bytes);
  const float* x[NT];
  RowPointers(a.act, a.act_row_bytes, t0, x);
  V acc[kAcc][NT];
  SKIPKV_UNROLL
  for (int i = 0; i < kAcc; ++i) {
    SKIPKV_UNROLL
    for (int t = 0; t < NT; ++t) acc[i][t] = hn::Zero(df);
  }
  constexpr int64_t kAhead = kFx16DecodeAheadBytes / static_cast<int64_t>(sizeof(WT));
  constexpr int64_t kStepsPerLine = 64 / (kFx16Group * sizeof(WT));
  for (int64_t k = 0; k < a.in; ++k) {
    const WT* wk = w + static_cast<size_t>(k) * kFx16Group;
    if (NT == 1 && k % kStepsPerLine == 0) {  // one token: each line once, from memory
      SKIPKV_UNROLL
      for (int g = 0; g < NG; ++g) hwy::Prefetch(wk + g * group_elems + kAhead);
    }
    V wv[kAcc];
    SKIPKV_UNROLL
    for (int g = 0; g < NG; ++g) {
      SKIPKV_UNROLL
      for (int v = 0; v < kFx16Vecs; ++v) {
        wv[g * kFx16Vecs + v] = L::Load(df, wk + g * group_elems + v * kFx16Lanes);
        // A plain f32 load folded into each FMA would be read NT times.
        if constexpr (NT > 1 && std::is_same_v<WT, float>) KeepInRegister(wv[g * kFx16Vecs + v]);
      }
    }
    SKIPKV_UNROLL
    for (int t = 0; t < NT; ++t) {
      const V xv = hn::Set(df, x[t][k]);
      SKIPKV_UNROLL
      for (int i = 0; i < kAcc; ++i) acc[i][t] = hn::MulAdd(wv[i], xv, acc[i][t]);
    }
  }
  SKIPKV_UNROLL
  for (int i = 0; i < kAcc; ++i) {
    SKIPKV_UNROLL
    for (int t = 0; t < NT; ++t) {
      hn::StoreU(acc[i][t], df,
                 a.y + (t0 + t) * a.y_stride + r + (i / kFx16Vecs) * gap + (i % kFx16Vecs) * kFx16Lanes);
    }
  }
}

// FloatX16Tile<NG, nt> for 1 <= nt <= NT.
template <int NG, int NT, class WT>
HWY_INLINE void FloatX16TileUpTo(const MatArgs& a, int64_t r, int64_t t0, int64_t nt) {
  if constexpr (NT > 1) {
    if (nt < NT) return FloatX16TileUpTo<NG, NT - 1, WT>(a, r, t0, nt);
  }
  FloatX16Tile<NG, NT, WT>(a, r, t0);
}

// One token over groups [r0 / 16, r1 / 16): cut into S equal parts, step i
// computes group i of every part, so that each part is read as one
// sequential stream (S adjacent groups at a time would start S new streams
// every S groups); groups left over after S equal parts go one at a time.
template <int S, class WT>
HWY_INLINE void FloatX16Decode(const MatArgs& a, int64_t r0, int64_t r1) {
  const int64_t part = (r1 - r0) / kFx16Group / S * kFx16Group;  // rows of a part
  for (int64_t i = 0; i < part; i += kFx16Group) FloatX16Tile<S, 1, WT>(a, r0 + i, 0, part);
  for (int64_t r = r0 + S * part; r < r1; r += kFx16Group) FloatX16Tile<1, 1, WT>(a, r, 0);
}

// Rows [r0, r1) (multiples of 16) of a kF32x16 / kF16x16 product. A batch
// goes in row slices whose weights fit in part of L2 (at least one tile's
// groups; the FFN down projection's 8,960 inputs make a 48-row slice of
// 860 KiB of f16), and every token passes each slice in tiles of
// kFx16TileTokens: the weights are read from memory once, the activations
// (4 bytes a step per token, against 16 x 2 or 4 bytes of weights per group)
// once a slice. Decode runs kFx16DecodeGroups groups at once.
template <class WT>
void FloatX16Rows(const MatArgs& a, int64_t r0, int64_t r1) {
  SKIPKV_CHECK_MSG(a.act_format == ActFormat::kF32, "MatRows: float weights take f32 activations");
  SKIPKV_CHECK_MSG(r0 % kFx16Group == 0 && r1 % kFx16Group == 0,
                   "MatRows: interleaved rows split inside a group");
  if (a.n == 1) return FloatX16Decode<kFx16DecodeGroups, WT>(a, r0, r1);
  constexpr size_t kL2WeightBytes = 384 << 10;
  constexpr int64_t kPanel = kFx16TileGroups * kFx16Group;
  int64_t slice = static_cast<int64_t>(kL2WeightBytes / a.w_row_bytes) / kPanel * kPanel;
  if (slice < kPanel) slice = kPanel;
  for (int64_t rb = r0; rb < r1; rb += slice) {
    const int64_t re = rb + slice < r1 ? rb + slice : r1;
    for (int64_t t = 0; t < a.n; t += kFx16TileTokens) {
      const int64_t nt = a.n - t < kFx16TileTokens ? a.n - t : kFx16TileTokens;
      int64_t r = rb;
      for (; r + kPanel <= re; r += kPanel)
        FloatX16TileUpTo<kFx16TileGroups, kFx16TileTokens, WT>(a, r, t, nt);
      for (; r < re; r += kFx16Group) FloatX16TileUpTo<1, kFx16TileTokens, WT>(a, r, t, nt);
    }
  }
}
