// AVX-512 VNNI int8 dot products (Highway target AVX3_DL: Ice Lake, Zen 4 and
// later), included by matmul_body-inl.h inside its per-target namespace; active only
// when SKIPKV_VNNI is 1. Highway 1.0.3 has no u8 x i8 multiply-add, so these
// use the target's intrinsics inside the same dispatch (vpdpbusd, vpdpwssd,
// vpmaddubsw on 512-bit registers).
//
// Why faster than the AVX2-style path: one 512-bit instruction per (row,
// token) pair per 64 elements for Q8_0/Q4_0 (dpbusd, no sign trick: weights
// are offset to u8 and the offset is removed exactly in int32), two for the
// K-quants (maddubs + dpwssd, which fuses the scale multiply and the add),
// against five or six 256-bit instructions per 32 elements before.
//
// Determinism: each (row, token) result follows one operation sequence
// whatever the tile (NR rows x NT tokens) it is computed in, so MatVec equals
// the matching MatMul token bit for bit and the thread count never matters.
// No include guard: included once per Highway target pass.

#if SKIPKV_VNNI

// 512-bit view of two consecutive 32-byte chunks (e.g. the quants of two
// Q8_0 blocks, which are 34 bytes apart).
HWY_INLINE __m512i Load2x256(const void* lo, const void* hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(static_cast<const __m256i*>(lo))),
                            _mm256_loadu_si256(static_cast<const __m256i*>(hi)), 1);
}
// [a x 8 | b x 8]
HWY_INLINE __m512 Set2x8(float a, float b) {
  return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_set1_ps(a)), _mm256_set1_ps(b), 1);
}

// ---- Q8_0 / Q4_0 x ActQ8: NR rows x NT tokens, two blocks per step -------------
// Weights are brought to u8 (Q8_0: w + 128; Q4_0: the stored nibble q, value
// q - 8), so per pair and step I = dpbusd(-kBias * sum(a), u, a) = sum(w * a)
// exactly, with the correction computed once per token and step; then
// acc += float(I) * (dw x da) lane-wise. An odd last block runs the same
// sequence with a zero upper half.
struct Q8_0Vnni {
  using Block = BlockQ8_0;
  static constexpr int kBias = 128;
  static HWY_INLINE __m256i Unsigned(const Block& b) {
    return _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs)),
                            _mm256_set1_epi8(static_cast<char>(0x80)));
  }
};
struct Q4_0Vnni {
  using Block = BlockQ4_0;
  static constexpr int kBias = 8;
  static HWY_INLINE __m256i Unsigned(const Block& b) {  // low nibbles: elements 0..15, high: 16..31
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), _mm256_set1_epi8(0x0f));
  }
};

template <class W, int NR, int NT>
HWY_INLINE void Int8TileVnni(const typename W::Block* const* w, const ActQ8* const* a, int64_t nb, float* out) {
  __m512 acc[NR][NT];
  SKIPKV_UNROLL
  for (int r = 0; r < NR; ++r) {
    SKIPKV_UNROLL
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
  }
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(W::kBias));
  const __m256i zero256 = _mm256_setzero_si256();
  for (int64_t b = 0; b < nb; b += 2) {
    const bool pair = b + 1 < nb;
    __m512i wq[NR];
    __m512 dws[NR];
    SKIPKV_UNROLL
    for (int r = 0; r < NR; ++r) {
      // An absent upper block is all zero weights: u = 0 there, and so is its scale.
      wq[r] = _mm512_inserti64x4(_mm512_castsi256_si512(W::Unsigned(w[r][b])),
                                 pair ? W::Unsigned(w[r][b + 1]) : zero256, 1);
      dws[r] = Set2x8(F16Scalar(w[r][b].d), pair ? F16Scalar(w[r][b + 1].d) : 0.f);
    }
    SKIPKV_UNROLL
    for (int t = 0; t < NT; ++t) {
      const __m256i a1 = pair ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[t][b + 1].qs)) : zero256;
      const __m512i xa = _mm512_inserti64x4(
          _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[t][b].qs))), a1, 1);
      // -kBias * (sums of 4 activations) per lane: the correction for the offset.
      const __m512i corr = _mm512_sub_epi32(_mm512_setzero_si512(),
                                            _mm512_dpbusd_epi32(_mm512_setzero_si512(), bias, xa));
      const __m512 das = Set2x8(a[t][b].d, pair ? a[t][b + 1].d : 0.f);
      SKIPKV_UNROLL
      for (int r = 0; r < NR; ++r) {
        const __m512i dot = _mm512_dpbusd_epi32(corr, wq[r], xa);
        acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(dws[r], das), acc[r][t]);
      }
    }
  }
  SKIPKV_UNROLL
  for (int r = 0; r < NR; ++r) {
    SKIPKV_UNROLL
    for (int t = 0; t < NT; ++t) out[r * NT + t] = _mm512_reduce_add_ps(acc[r][t]);
  }
}

// ---- Q4_K x Q8_K -----------------------------------------------------------------
// dot = sum_b [ d*da * sum_j sc_j * (q_j . y_j)  -  dmin*da * sum_j m_j * bsum32_j ].
// Per 64 elements (sub-blocks 2j: low nibbles, 2j+1: high nibbles of the same
// 32 bytes) a zmm holds [low | high] nibbles, matching y's 64 contiguous
// bytes; maddubs gives i16 pair sums, dpwssd multiplies them by the sub-block
// scales and accumulates in int32.
template <int NT>
HWY_INLINE void Q4_KRowDotVnni(const BlockQ4_K* w, const BlockQ8_K* const* a, int64_t nb, float* out) {
  __m512 acc[NT];
  SKIPKV_UNROLL
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  const __m512i lo4 = _mm512_set1_epi8(0x0f);
  const __m512i nibble_shift = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);
  // pshufb controls on 8 scales (i16) repeated in every 128-bit lane: the
  // low 256 bits take scale 2j, the high 256 bits scale 2j + 1.
  __m512i pick[4];
  for (int j = 0; j < 4; ++j) {
    pick[j] = _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_set1_epi16(static_cast<int16_t>(((4 * j + 1) << 8) | (4 * j)))),
        _mm256_set1_epi16(static_cast<int16_t>(((4 * j + 3) << 8) | (4 * j + 2))), 1);
  }
  for (int64_t b = 0; b < nb; ++b) {
    const float d = F16Scalar(w[b].d), dmin = F16Scalar(w[b].dmin);
    const __m256i sm16 = Q4KScalesMins16(w[b].scales);  // scales (i16 0..7), mins (8..15)
    const __m128i mins16 = _mm256_extracti128_si256(sm16, 1);
    const __m512i scales16 = _mm512_broadcast_i32x4(_mm256_castsi256_si128(sm16));
    __m512i q[4], s[4];
    SKIPKV_UNROLL
    for (int j = 0; j < 4; ++j) {
      const __m512i raw = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qs + 32 * j)));
      q[j] = _mm512_and_si512(_mm512_srlv_epi16(raw, nibble_shift), lo4);
      s[j] = _mm512_shuffle_epi8(scales16, pick[j]);
    }
    SKIPKV_UNROLL
    for (int t = 0; t < NT; ++t) {
      const BlockQ8_K& y = a[t][b];
      __m512i sumi = _mm512_setzero_si512();
      SKIPKV_UNROLL
      for (int j = 0; j < 4; ++j) {
        const __m512i p = _mm512_maddubs_epi16(q[j], _mm512_loadu_si512(y.qs + 64 * j));
        sumi = _mm512_dpwssd_epi32(sumi, p, s[j]);
      }
      // Mins: bsums (16 x i16) -> sums per 32-element sub-block (8 x i16) . mins -> 4 x i32.
      const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.bsums));
      const __m128i bs32 = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
      const __m512 pm = _mm512_cvtepi32_ps(_mm512_zextsi128_si512(_mm_madd_epi16(mins16, bs32)));
      acc[t] = _mm512_fmadd_ps(_mm512_set1_ps(d * y.d), _mm512_cvtepi32_ps(sumi), acc[t]);
      acc[t] = _mm512_fnmadd_ps(_mm512_set1_ps(dmin * y.d), pm, acc[t]);
    }
  }
  SKIPKV_UNROLL
  for (int t = 0; t < NT; ++t) out[t] = _mm512_reduce_add_ps(acc[t]);
}

// ---- Q4_K x Q8_K, one token (decode): a run of rows ------------------------------
// Per (row, token) exactly the operation sequence of Q4_KRowDotVnni, so a
// decode result equals the same token's result in a batch bit for bit. What
// differs is what is done once per run of rows instead of once per row: the
// constants, and the token's bsum pair sums per block (`bs32`, precomputed by
// the caller). The 1.5B model's Q4_K rows are only 6 blocks long (in = 1,536),
// so per-row overhead is a visible share of the work. Rows go one at a time:
// interleaving 4 rows made cold (streamed) weights 40 % slower on Zen 5.
HWY_INLINE void Q4_KRowsDotVnni1(const uint8_t* w0, size_t w_row_bytes, int64_t rows, const BlockQ8_K* y,
                                 const __m128i* bs32, int64_t nb, float* out) {
  const __m512i lo4 = _mm512_set1_epi8(0x0f);
  const __m512i nibble_shift = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);
  __m512i pick[4];  // as in Q4_KRowDotVnni
  for (int j = 0; j < 4; ++j) {
    pick[j] = _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_set1_epi16(static_cast<int16_t>(((4 * j + 1) << 8) | (4 * j)))),
        _mm256_set1_epi16(static_cast<int16_t>(((4 * j + 3) << 8) | (4 * j + 2))), 1);
  }
  for (int64_t r = 0; r < rows; ++r) {
    const BlockQ4_K* w = reinterpret_cast<const BlockQ4_K*>(w0 + static_cast<size_t>(r) * w_row_bytes);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const float d = F16Scalar(w[b].d), dmin = F16Scalar(w[b].dmin);
      const __m256i sm16 = Q4KScalesMins16(w[b].scales);
      const __m128i mins16 = _mm256_extracti128_si256(sm16, 1);
      const __m512i scales16 = _mm512_broadcast_i32x4(_mm256_castsi256_si128(sm16));
      __m512i sumi = _mm512_setzero_si512();
      SKIPKV_UNROLL
      for (int j = 0; j < 4; ++j) {
        const __m512i raw =
            _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qs + 32 * j)));
        const __m512i q = _mm512_and_si512(_mm512_srlv_epi16(raw, nibble_shift), lo4);
        const __m512i p = _mm512_maddubs_epi16(q, _mm512_loadu_si512(y[b].qs + 64 * j));
        sumi = _mm512_dpwssd_epi32(sumi, p, _mm512_shuffle_epi8(scales16, pick[j]));
      }
      const __m512 pm = _mm512_cvtepi32_ps(_mm512_zextsi128_si512(_mm_madd_epi16(mins16, bs32[b])));
      acc = _mm512_fmadd_ps(_mm512_set1_ps(d * y[b].d), _mm512_cvtepi32_ps(sumi), acc);
      acc = _mm512_fnmadd_ps(_mm512_set1_ps(dmin * y[b].d), pm, acc);
    }
    out[r] = _mm512_reduce_add_ps(acc);
  }
}

// The bsums (16 x i16) of each block -> sums per 32-element sub-block (8 x i16).
HWY_INLINE void Q8KPairSums(const BlockQ8_K* y, int64_t nb, __m128i* bs32) {
  for (int64_t b = 0; b < nb; ++b) {
    const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[b].bsums));
    bs32[b] = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
  }
}

// ---- Q6_K x Q8_K -----------------------------------------------------------------
// dot = sum_b d*da * [ sum_g sc_g * (q_g . y_g)  -  32 * sum_g sc_g * bsum_g ],
// q in [0, 63], groups g of 16. Per half (128 elements) two zmm of quants:
// elements 0..63 (ql low nibbles) and 64..127 (ql high nibbles), each with
// the 2 high bits from qh; their scales are 4 consecutive groups.
// kQ6KScalePick[m][l] = 4 m + l / 8: see Q6_KRowDotVnni.
alignas(64) constexpr int16_t kQ6KScalePick[4][32] = {
    {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3},
    {4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7},
    {8, 8, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 9, 10, 10, 10, 10, 10, 10, 10, 10, 11, 11, 11, 11, 11, 11, 11, 11},
    {12, 12, 12, 12, 12, 12, 12, 12, 13, 13, 13, 13, 13, 13, 13, 13,
     14, 14, 14, 14, 14, 14, 14, 14, 15, 15, 15, 15, 15, 15, 15, 15}};

template <int NT>
HWY_INLINE void Q6_KRowDotVnni(const BlockQ6_K* w, const BlockQ8_K* const* a, int64_t nb, float* out) {
  __m512 acc[NT];
  SKIPKV_UNROLL
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  const __m512i lo4 = _mm512_set1_epi8(0x0f), lo2 = _mm512_set1_epi8(0x03);
  // qh bit pairs: elements 0..31 bits 0-1, 32..63 bits 2-3, 64..95 bits 4-5, 96..127 bits 6-7.
  const __m512i hshift_lo = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
  const __m512i hshift_hi =
      _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(4)), _mm256_set1_epi16(6), 1);
  // permutexvar indices: i16 lanes 8k..8k+7 <- scale 4m + k (m = 0..3 selects the 64-element chunk).
  __m512i pick[4];
  SKIPKV_UNROLL
  for (int m = 0; m < 4; ++m) pick[m] = _mm512_load_si512(kQ6KScalePick[m]);
  for (int64_t b = 0; b < nb; ++b) {
    const float d = F16Scalar(w[b].d);
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].scales)));
    const __m512i sc512 = _mm512_castsi256_si512(sc16);
    __m512i q[4], s[4];
    SKIPKV_UNROLL
    for (int h = 0; h < 2; ++h) {
      const __m512i l = _mm512_loadu_si512(w[b].ql + 64 * h);
      const __m512i hb = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qh + 32 * h)));
      q[2 * h] = _mm512_or_si512(_mm512_and_si512(l, lo4),
                                 _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(hb, hshift_lo), lo2), 4));
      q[2 * h + 1] =
          _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), lo4),
                          _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(hb, hshift_hi), lo2), 4));
      s[2 * h] = _mm512_permutexvar_epi16(pick[2 * h], sc512);
      s[2 * h + 1] = _mm512_permutexvar_epi16(pick[2 * h + 1], sc512);
    }
    SKIPKV_UNROLL
    for (int t = 0; t < NT; ++t) {
      const BlockQ8_K& y = a[t][b];
      const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.bsums));
      // -32 * sum_g sc_g * bsum_g in the low 8 lanes (exact in int32).
      __m512i sumi = _mm512_castsi256_si512(
          _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(_mm256_madd_epi16(sc16, bs), 5)));
      sumi = _mm512_inserti64x4(sumi, _mm256_setzero_si256(), 1);
      SKIPKV_UNROLL
      for (int m = 0; m < 4; ++m) {
        const __m512i p = _mm512_maddubs_epi16(q[m], _mm512_loadu_si512(y.qs + 64 * m));
        sumi = _mm512_dpwssd_epi32(sumi, p, s[m]);
      }
      acc[t] = _mm512_fmadd_ps(_mm512_set1_ps(d * y.d), _mm512_cvtepi32_ps(sumi), acc[t]);
    }
  }
  SKIPKV_UNROLL
  for (int t = 0; t < NT; ++t) out[t] = _mm512_reduce_add_ps(acc[t]);
}

#endif  // SKIPKV_VNNI
