// Included by matmul_body-inl.h once per Highway target (inside its namespace).
//
// ---- Q4_K rows interleaved in groups of 16 (DType::kQ4_Kx16) --------------------
// The layout (BlockQ4_Kx16, tensor/dtype.h) puts the same 4 elements of 16
// rows in one 64-byte chunk, so one SIMD lane per row computes 16 dot products
// at once: an int8 multiply-add takes a chunk's nibbles against 4 activation
// bytes broadcast to every lane, and no horizontal sum is ever needed. Per
// row r of a group, token y (Q8_K) and superblock b, every target computes
//   sumi_r = sum_j sc_j[r] * sum_{i < 32} q[r][32 j + i] * y.qs[32 j + i]   (exact int32)
//   msum_r = sum_j m_j[r] * (y.bsums[2 j] + y.bsums[2 j + 1])              (exact int32)
//   acc_r = fma(d_r * y.d, float(sumi_r), acc_r)
//   acc_r = fma(-(dmin_r * y.d), float(msum_r), acc_r)
// from acc_r = 0, the result being acc_r after the last superblock. The
// integers are exact whatever the order of their sums (|sumi| < 2^25) and
// the float steps are the same IEEE operations in the same order, so a
// result does not depend on the target, the token tile or the thread count:
// decode equals the token's result in a batch bit for bit. (The file-layout
// Q4_K kernels sum in a different order, so the two layouts agree only to
// float rounding.)

constexpr int kX16Rows = 16;

// The tiles below take `ahead`, the blocks to prefetch ahead (0: none;
// PrefetchBlockAhead, matmul_body-inl.h), from X16Rows. One-token tiles (decode, and a batch's last lone
// token) read each block once, from memory, and take DecodePrefetchBlocks (simd_internal.h). Q4_Kx16's
// default there is 2 blocks (4.5 KiB): on Zen 5 the hardware prefetcher fell behind its one-token tiles, one
// core streaming a cold 8960 x 1536 matrix at 13-19 GB/s (AVX2: 14) against 20-27 (AVX2: 18-19) for the file
// layout's kernel, although cache-resident the interleaved kernel is twice as fast (perhaps because a block's
// fields are read out of address order: the top-bit records, then quants and low-bit records by turns, d and
// dmin last); with the prefetch 27-34 GB/s (AVX2: 27-30; BENCHMARKS.md). Q8_0x16's default is none: read in
// address order, it kept up without one, and 4-16 blocks ahead were 0.64-0.99x (ninth session). Q6_Kx16's
// default is 2 blocks (6.6 KiB), although read in address order: without it one core read a cold matrix at
// 20-22 GB/s against 24-29 for the file layout's rows, with it 27-30 (twelfth session).
//
// Batches prefetch on their first pass over a row block's weights only (the
// first tile of its first token block, X16Rows): later tiles and token
// blocks find the group in L1 or L2. Q4_Kx16 kX16BatchPrefetchBlocks ahead:
// a 16-token batch from memory on one Zen 5 core 1.4-1.8x with it, 1.2-1.5x
// at 4 threads on 2 vCPUs; 512 tokens unchanged (BENCHMARKS.md, eighth
// session). Q8_0x16 batches (VNNI) kQ8X16BatchPrefetchBlocks of 544 bytes
// ahead, as far: medians +2-8 %. Q6_Kx16 batches take Q4_Kx16's distance
// (not measured on their own).
constexpr int64_t kX16BatchPrefetchBlocks = 2;
constexpr int64_t kQ8X16BatchPrefetchBlocks = 8;

#if SKIPKV_VNNI
// Sub-block j's 6-bit values of the 16 rows (i32 lanes) from the low-nibble
// bytes `lo` ([j / 2][r]) and the top bits `hi4` (each row's 16-bit record
// shifted left by 4, so that bits 4, 5 of (hi4 >> 2 j) are the value's bits 4, 5).
HWY_INLINE __m512i X16Six(const uint8_t* lo, __m512i hi4, int j) {
  __m512i v =
      _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(lo + (j / 2) * kX16Rows)));
  if (j % 2) v = _mm512_srli_epi32(v, 4);
  return _mm512_or_si512(_mm512_and_si512(v, _mm512_set1_epi32(0x0f)),
                         _mm512_and_si512(_mm512_srli_epi32(hi4, 2 * j), _mm512_set1_epi32(0x30)));
}

// Block b of one group for NT tokens: acc[t] += its products. y[t]: token
// t's blocks, pairs[t]: its Q8KBsumPairs.
template <int NT>
HWY_INLINE void Q4Kx16BlockVnni(const BlockQ4_Kx16& g, int64_t b, const BlockQ8_K* const* y,
                                const int32_t* const* pairs, __m512* acc) {
  const __m512i lo4 = _mm512_set1_epi8(0x0f);
  const __m512i sc_hi4 = _mm512_slli_epi32(
      _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.sc_hi))), 4);
  const __m512i m_hi4 = _mm512_slli_epi32(
      _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.m_hi))), 4);
  __m512i sumi[NT], msum[NT];
  SKIPKV_UNROLL
  for (int t = 0; t < NT; ++t) sumi[t] = msum[t] = _mm512_setzero_si512();
  SKIPKV_UNROLL
  for (int p = 0; p < 4; ++p) {
    // Low nibbles: sub-block 2p (s0); high nibbles: 2p + 1 (s1). One token
    // keeps two chains per sub-block (even and odd chunks) for latency.
    constexpr int kChains = NT == 1 ? 2 : 1;
    __m512i s0[NT][kChains], s1[NT][kChains];
    SKIPKV_UNROLL
    for (int t = 0; t < NT; ++t) {
      SKIPKV_UNROLL
      for (int k = 0; k < kChains; ++k) s0[t][k] = s1[t][k] = _mm512_setzero_si512();
    }
    SKIPKV_UNROLL
    for (int c = 0; c < 8; ++c) {
      const __m512i x = _mm512_loadu_si512(g.qs[8 * p + c]);
      const __m512i ql = _mm512_and_si512(x, lo4);
      const __m512i qh = _mm512_and_si512(_mm512_srli_epi16(x, 4), lo4);
      SKIPKV_UNROLL
      for (int t = 0; t < NT; ++t) {
        int32_t y0, y1;
        std::memcpy(&y0, y[t][b].qs + 64 * p + 4 * c, 4);
        std::memcpy(&y1, y[t][b].qs + 64 * p + 32 + 4 * c, 4);
        s0[t][c % kChains] = _mm512_dpbusd_epi32(s0[t][c % kChains], ql, _mm512_set1_epi32(y0));
        s1[t][c % kChains] = _mm512_dpbusd_epi32(s1[t][c % kChains], qh, _mm512_set1_epi32(y1));
      }
    }
    const __m512i sc0 = X16Six(g.sc_lo, sc_hi4, 2 * p), sc1 = X16Six(g.sc_lo, sc_hi4, 2 * p + 1);
    const __m512i m_pair = _mm512_or_si512(X16Six(g.m_lo, m_hi4, 2 * p),
                                           _mm512_slli_epi32(X16Six(g.m_lo, m_hi4, 2 * p + 1), 16));
    SKIPKV_UNROLL
    for (int t = 0; t < NT; ++t) {
      __m512i a0 = s0[t][0], a1 = s1[t][0];
      if constexpr (kChains == 2) {
        a0 = _mm512_add_epi32(a0, s0[t][1]);
        a1 = _mm512_add_epi32(a1, s1[t][1]);
      }
      sumi[t] = _mm512_add_epi32(sumi[t], _mm512_mullo_epi32(a0, sc0));
      sumi[t] = _mm512_add_epi32(sumi[t], _mm512_mullo_epi32(a1, sc1));
      msum[t] = _mm512_dpwssd_epi32(msum[t], m_pair, _mm512_set1_epi32(pairs[t][4 * b + p]));
    }
  }
  const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.d)));
  const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.dmin)));
  SKIPKV_UNROLL
  for (int t = 0; t < NT; ++t) {
    const __m512 yd = _mm512_set1_ps(y[t][b].d);
    acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(d, yd), _mm512_cvtepi32_ps(sumi[t]), acc[t]);
    acc[t] = _mm512_fnmadd_ps(_mm512_mul_ps(dmin, yd), _mm512_cvtepi32_ps(msum[t]), acc[t]);
  }
}

// 16 rows x NT tokens: out[16 t + r].
template <int NT>
HWY_INLINE void Q4Kx16TileVnni(const BlockQ4_Kx16* w, int64_t nb, const BlockQ8_K* const* y,
                               const int32_t* const* pairs, float* out, int64_t ahead) {
  __m512 acc[NT];
  SKIPKV_UNROLL
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    PrefetchBlockAhead(w, b, ahead);
    Q4Kx16BlockVnni<NT>(w[b], b, y, pairs, acc);
  }
  SKIPKV_UNROLL
  for (int t = 0; t < NT; ++t) _mm512_storeu_ps(out + kX16Rows * t, acc[t]);
}

#elif SKIPKV_X86_INT8
// AVX2 (and AVX3 without VNNI): each half of a group (8 rows) in a ymm. The
// u8 x s8 pair products (vpmaddubsw, |.| <= 2 * 15 * 128) of a sub-block's 8
// chunks add up in int16 without overflow (<= 30,720); vpmaddwd then
// multiplies them by the scale held in both halves of each row's dword.
HWY_INLINE __m256i X16SixHalf(const uint8_t* lo, __m256i hi4, int j) {
  __m256i v =
      _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(lo + (j / 2) * kX16Rows)));
  if (j % 2) v = _mm256_srli_epi32(v, 4);
  return _mm256_or_si256(_mm256_and_si256(v, _mm256_set1_epi32(0x0f)),
                         _mm256_and_si256(_mm256_srli_epi32(hi4, 2 * j), _mm256_set1_epi32(0x30)));
}

// Sub-block j's 6-bit values of all 16 rows as int16 lanes (lane r = row r),
// from the low-nibble bytes `lo` ([j / 2][r]) and the 16 top-bit records `hi`.
HWY_INLINE __m256i X16SixI16(const uint8_t* lo, __m256i hi, int j) {
  __m256i v =
      _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(lo + (j / 2) * kX16Rows)));
  if (j % 2) v = _mm256_srli_epi16(v, 4);
  const __m256i top = j >= 2 ? _mm256_srli_epi16(hi, 2 * j - 4) : _mm256_slli_epi16(hi, 4 - 2 * j);
  return _mm256_or_si256(_mm256_and_si256(v, _mm256_set1_epi16(0x0f)),
                         _mm256_and_si256(top, _mm256_set1_epi16(0x30)));
}
// Row r's dword (a_r, b_r) as two int16 halves, rows 0..7 in half[0] and
// 8..15 in half[1], from int16 lanes a, b (lane r = row r).
HWY_INLINE void X16RowPairs(__m256i a, __m256i b, __m256i* half) {
  const __m256i lo = _mm256_unpacklo_epi16(a, b),
                hi = _mm256_unpackhi_epi16(a, b);  // rows 0-3 | 8-11, 4-7 | 12-15
  half[0] = _mm256_permute2x128_si256(lo, hi, 0x20);
  half[1] = _mm256_permute2x128_si256(lo, hi, 0x31);
}

// Rows 8 h0 .. 8 (h0 + NH) - 1 of the group (NH halves in one pass over the
// group's superblocks: one token takes both, so that each 64-byte chunk is
// read once and each activation broadcast serves 16 rows; batches take one
// half at a time, for the registers).
template <int NT, int NH>
HWY_INLINE void Q4Kx16HalvesAvx2(const BlockQ4_Kx16* w, int64_t nb, const BlockQ8_K* const* y,
                                 const int32_t* const* pairs, int h0, float* out, int64_t ahead) {
  const __m256i lo4 = _mm256_set1_epi8(0x0f);
  __m256 acc[NH][NT];
  SKIPKV_UNROLL
  for (int h = 0; h < NH; ++h) {
    SKIPKV_UNROLL
    for (int t = 0; t < NT; ++t) acc[h][t] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
    PrefetchBlockAhead(w, b, ahead);
    const BlockQ4_Kx16& g = w[b];
    // The top bits of the scales and mins: all 16 rows' records (NH == 2),
    // or one half's, widened to dwords and shifted for X16SixHalf.
    __m256i sc_hi16, m_hi16, sc_hi4, m_hi4;
    if constexpr (NH == 2) {
      sc_hi16 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.sc_hi));
      m_hi16 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.m_hi));
    } else {
      const int r0 = 8 * h0;
      sc_hi4 = _mm256_slli_epi32(
          _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g.sc_hi + r0))), 4);
      m_hi4 = _mm256_slli_epi32(
          _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g.m_hi + r0))), 4);
    }
    __m256i sumi[NH][NT], msum[NH][NT];
    SKIPKV_UNROLL
    for (int h = 0; h < NH; ++h) {
      SKIPKV_UNROLL
      for (int t = 0; t < NT; ++t) sumi[h][t] = msum[h][t] = _mm256_setzero_si256();
    }
    for (int p = 0; p < 4; ++p) {
      __m256i s0[NH][NT], s1[NH][NT];
      SKIPKV_UNROLL
      for (int h = 0; h < NH; ++h) {
        SKIPKV_UNROLL
        for (int t = 0; t < NT; ++t) s0[h][t] = s1[h][t] = _mm256_setzero_si256();
      }
      SKIPKV_UNROLL
      for (int c = 0; c < 8; ++c) {
        __m256i y0[NT], y1[NT];
        SKIPKV_UNROLL
        for (int t = 0; t < NT; ++t) {
          int32_t v0, v1;
          std::memcpy(&v0, y[t][b].qs + 64 * p + 4 * c, 4);
          std::memcpy(&v1, y[t][b].qs + 64 * p + 32 + 4 * c, 4);
          y0[t] = _mm256_set1_epi32(v0);
          y1[t] = _mm256_set1_epi32(v1);
        }
        SKIPKV_UNROLL
        for (int h = 0; h < NH; ++h) {
          const __m256i x =
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.qs[8 * p + c] + 32 * (h0 + h)));
          const __m256i ql = _mm256_and_si256(x, lo4);
          const __m256i qh = _mm256_and_si256(_mm256_srli_epi16(x, 4), lo4);
          SKIPKV_UNROLL
          for (int t = 0; t < NT; ++t) {
            s0[h][t] = _mm256_add_epi16(s0[h][t], _mm256_maddubs_epi16(ql, y0[t]));
            s1[h][t] = _mm256_add_epi16(s1[h][t], _mm256_maddubs_epi16(qh, y1[t]));
          }
        }
      }
      // The scales in both int16 halves of a row's dword; the mins of
      // sub-blocks 2p (low half) and 2p + 1 (high half).
      __m256i sc0_pair[NH], sc1_pair[NH], m_pair[NH];
      if constexpr (NH == 2) {  // all 16 rows at once as int16 lanes, then split
        const __m256i sc0 = X16SixI16(g.sc_lo, sc_hi16, 2 * p), sc1 = X16SixI16(g.sc_lo, sc_hi16, 2 * p + 1);
        X16RowPairs(sc0, sc0, sc0_pair);
        X16RowPairs(sc1, sc1, sc1_pair);
        X16RowPairs(X16SixI16(g.m_lo, m_hi16, 2 * p), X16SixI16(g.m_lo, m_hi16, 2 * p + 1), m_pair);
      } else {
        const int r0 = 8 * h0;
        const __m256i sc0 = X16SixHalf(g.sc_lo + r0, sc_hi4, 2 * p);
        const __m256i sc1 = X16SixHalf(g.sc_lo + r0, sc_hi4, 2 * p + 1);
        sc0_pair[0] = _mm256_or_si256(sc0, _mm256_slli_epi32(sc0, 16));
        sc1_pair[0] = _mm256_or_si256(sc1, _mm256_slli_epi32(sc1, 16));
        m_pair[0] = _mm256_or_si256(X16SixHalf(g.m_lo + r0, m_hi4, 2 * p),
                                    _mm256_slli_epi32(X16SixHalf(g.m_lo + r0, m_hi4, 2 * p + 1), 16));
      }
      SKIPKV_UNROLL
      for (int h = 0; h < NH; ++h) {
        SKIPKV_UNROLL
        for (int t = 0; t < NT; ++t) {
          sumi[h][t] = _mm256_add_epi32(sumi[h][t], _mm256_madd_epi16(s0[h][t], sc0_pair[h]));
          sumi[h][t] = _mm256_add_epi32(sumi[h][t], _mm256_madd_epi16(s1[h][t], sc1_pair[h]));
          msum[h][t] = _mm256_add_epi32(msum[h][t],
                                        _mm256_madd_epi16(m_pair[h], _mm256_set1_epi32(pairs[t][4 * b + p])));
        }
      }
    }
    SKIPKV_UNROLL
    for (int h = 0; h < NH; ++h) {
      const int r0 = 8 * (h0 + h);
      const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g.d + r0)));
      const __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g.dmin + r0)));
      SKIPKV_UNROLL
      for (int t = 0; t < NT; ++t) {
        const __m256 yd = _mm256_set1_ps(y[t][b].d);
        acc[h][t] = _mm256_fmadd_ps(_mm256_mul_ps(d, yd), _mm256_cvtepi32_ps(sumi[h][t]), acc[h][t]);
        acc[h][t] = _mm256_fnmadd_ps(_mm256_mul_ps(dmin, yd), _mm256_cvtepi32_ps(msum[h][t]), acc[h][t]);
      }
    }
  }
  SKIPKV_UNROLL
  for (int h = 0; h < NH; ++h) {
    SKIPKV_UNROLL
    for (int t = 0; t < NT; ++t) _mm256_storeu_ps(out + kX16Rows * t + 8 * (h0 + h), acc[h][t]);
  }
}

template <int NT>
HWY_INLINE void Q4Kx16TileAvx2(const BlockQ4_Kx16* w, int64_t nb, const BlockQ8_K* const* y,
                               const int32_t* const* pairs, float* out, int64_t ahead) {
  if constexpr (NT == 1) {
    Q4Kx16HalvesAvx2<1, 2>(w, nb, y, pairs, 0, out, ahead);
  } else {
    Q4Kx16HalvesAvx2<NT, 1>(w, nb, y, pairs, 0, out, ahead);
    Q4Kx16HalvesAvx2<NT, 1>(w, nb, y, pairs, 1, out, 0);  // the group is in cache now
  }
}
#else
// Portable: the same integers and float steps, one row at a time.
template <int NT>
HWY_INLINE void Q4Kx16TileScalar(const BlockQ4_Kx16* w, int64_t nb, const BlockQ8_K* const* y,
                                 const int32_t* const* pairs, float* out) {
  for (int r = 0; r < kX16Rows; ++r) {
    for (int t = 0; t < NT; ++t) {
      float acc = 0.f;
      for (int64_t b = 0; b < nb; ++b) {
        const BlockQ4_Kx16& g = w[b];
        int32_t sumi = 0, msum = 0;
        for (int j = 0; j < 8; ++j) {
          const int lo_at = (j / 2) * kX16Rows + r, lo_shift = 4 * (j % 2);
          const int32_t sc = ((g.sc_lo[lo_at] >> lo_shift) & 0x0f) | (((g.sc_hi[r] >> (2 * j)) & 3) << 4);
          const int32_t m = ((g.m_lo[lo_at] >> lo_shift) & 0x0f) | (((g.m_hi[r] >> (2 * j)) & 3) << 4);
          const int p = j / 2, nibble = 4 * (j % 2);
          int32_t s = 0;
          for (int i = 0; i < 32; ++i) {
            const int32_t q = (g.qs[8 * p + i / 4][4 * r + i % 4] >> nibble) & 0x0f;
            s += q * y[t][b].qs[32 * j + i];
          }
          sumi += sc * s;
          const auto pair = static_cast<uint32_t>(pairs[t][4 * b + p]);
          msum += m * static_cast<int16_t>(j % 2 ? pair >> 16 : pair & 0xffff);
        }
        const float yd = y[t][b].d;
        acc = std::fma(F16Scalar(g.d[r]) * yd, static_cast<float>(sumi), acc);
        acc = std::fma(-(F16Scalar(g.dmin[r]) * yd), static_cast<float>(msum), acc);
      }
      out[kX16Rows * t + r] = acc;
    }
  }
}
#endif

template <int NT>
HWY_INLINE void Q4Kx16Tile(const BlockQ4_Kx16* w, int64_t nb, const BlockQ8_K* const* y,
                           const int32_t* const* pairs, float* out, int64_t ahead) {
#if SKIPKV_VNNI
  Q4Kx16TileVnni<NT>(w, nb, y, pairs, out, ahead);
#elif SKIPKV_X86_INT8
  Q4Kx16TileAvx2<NT>(w, nb, y, pairs, out, ahead);
#else
  (void)ahead;
  Q4Kx16TileScalar<NT>(w, nb, y, pairs, out);
#endif
}

// ---- Q8_0 rows interleaved in groups of 16 (DType::kQ8_0x16) ----------------------
// The same scheme for Q8_0 (BlockQ8_0x16, tensor/dtype.h): per row r of a
// group, token a (ActQ8) and 32-block b, every target computes
//   isum_r = sum_{i < 32} q[r][i] * a.qs[i]                     (exact int32)
//   acc_r[b % 2] = fma(float(isum_r), d_r * a.d, acc_r[b % 2])
// from zero, the result being acc_r[0] + acc_r[1] (two chains, so that one
// token's rows do not wait on the fma latency of every block). AVX-512 VNNI
// takes the weights as u8 (q + 128, one xor) and starts isum at -128 * the
// block's activation sum; AVX2 uses vpsignb (|q| <= 128 and |a.qs| <= 127
// keep vpmaddubsw's pair sums below 2^15).

// The sum of each block's 32 activation quants.
HWY_INLINE void ActQ8Sums(const ActQ8* a, int64_t nb, int32_t* sums) {
  for (int64_t b = 0; b < nb; ++b) {
    int32_t s = 0;
    for (int i = 0; i < 32; ++i) s += a[b].qs[i];
    sums[b] = s;
  }
}

#if SKIPKV_VNNI
// Block b of one group for NT tokens: acc[t][b % 2] += its products.
template <int NT>
HWY_INLINE void Q8_0x16BlockVnni(const BlockQ8_0x16& g, int64_t b, const ActQ8* const* a,
                                 const int32_t* const* sums, __m512 (*acc)[2]) {
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  constexpr int kChains = NT == 1 ? 2 : 1;  // one token: two dpbusd chains per block, for latency
  __m512i s[NT][kChains];
  SKIPKV_UNROLL
  for (int t = 0; t < NT; ++t) {
    s[t][0] = _mm512_set1_epi32(-128 * sums[t][b]);
    if constexpr (kChains == 2) s[t][1] = _mm512_setzero_si512();
  }
  SKIPKV_UNROLL
  for (int c = 0; c < 8; ++c) {
    const __m512i u = _mm512_xor_si512(_mm512_loadu_si512(g.qs[c]), flip);
    SKIPKV_UNROLL
    for (int t = 0; t < NT; ++t) {
      int32_t v;
      std::memcpy(&v, a[t][b].qs + 4 * c, 4);
      s[t][c % kChains] = _mm512_dpbusd_epi32(s[t][c % kChains], u, _mm512_set1_epi32(v));
    }
  }
  const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.d)));
  SKIPKV_UNROLL
  for (int t = 0; t < NT; ++t) {
    __m512i isum = s[t][0];
    if constexpr (kChains == 2) isum = _mm512_add_epi32(isum, s[t][1]);
    acc[t][b % 2] =
        _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(d, _mm512_set1_ps(a[t][b].d)), acc[t][b % 2]);
  }
}

template <int NT>
HWY_INLINE void Q8_0x16TileVnni(const BlockQ8_0x16* w, int64_t nb, const ActQ8* const* a,
                                const int32_t* const* sums, float* out, int64_t ahead) {
  __m512 acc[NT][2];
  SKIPKV_UNROLL
  for (int t = 0; t < NT; ++t) acc[t][0] = acc[t][1] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    PrefetchBlockAhead(w, b, ahead);
    Q8_0x16BlockVnni<NT>(w[b], b, a, sums, acc);
  }
  SKIPKV_UNROLL
  for (int t = 0; t < NT; ++t) _mm512_storeu_ps(out + kX16Rows * t, _mm512_add_ps(acc[t][0], acc[t][1]));
}

#elif SKIPKV_X86_INT8
// Rows 8 h0 .. 8 (h0 + NH) - 1, as Q4Kx16HalvesAvx2.
template <int NT, int NH>
HWY_INLINE void Q8_0x16HalvesAvx2(const BlockQ8_0x16* w, int64_t nb, const ActQ8* const* a, int h0,
                                  float* out, int64_t ahead) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[NH][NT][2];
  SKIPKV_UNROLL
  for (int h = 0; h < NH; ++h) {
    SKIPKV_UNROLL
    for (int t = 0; t < NT; ++t) acc[h][t][0] = acc[h][t][1] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
    PrefetchBlockAhead(w, b, ahead);
    const BlockQ8_0x16& g = w[b];
    __m256i isum[NH][NT];
    SKIPKV_UNROLL
    for (int h = 0; h < NH; ++h) {
      SKIPKV_UNROLL
      for (int t = 0; t < NT; ++t) isum[h][t] = _mm256_setzero_si256();
    }
    SKIPKV_UNROLL
    for (int c = 0; c < 8; ++c) {
      __m256i y[NT];
      SKIPKV_UNROLL
      for (int t = 0; t < NT; ++t) {
        int32_t v;
        std::memcpy(&v, a[t][b].qs + 4 * c, 4);
        y[t] = _mm256_set1_epi32(v);
      }
      SKIPKV_UNROLL
      for (int h = 0; h < NH; ++h) {
        const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.qs[c] + 32 * (h0 + h)));
        const __m256i ax = _mm256_sign_epi8(x, x);
        SKIPKV_UNROLL
        for (int t = 0; t < NT; ++t) {
          const __m256i p = _mm256_maddubs_epi16(ax, _mm256_sign_epi8(y[t], x));
          isum[h][t] = _mm256_add_epi32(isum[h][t], _mm256_madd_epi16(p, ones));
        }
      }
    }
    SKIPKV_UNROLL
    for (int h = 0; h < NH; ++h) {
      const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g.d + 8 * (h0 + h))));
      SKIPKV_UNROLL
      for (int t = 0; t < NT; ++t) {
        acc[h][t][b % 2] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[h][t]),
                                           _mm256_mul_ps(d, _mm256_set1_ps(a[t][b].d)), acc[h][t][b % 2]);
      }
    }
  }
  SKIPKV_UNROLL
  for (int h = 0; h < NH; ++h) {
    SKIPKV_UNROLL
    for (int t = 0; t < NT; ++t) {
      _mm256_storeu_ps(out + kX16Rows * t + 8 * (h0 + h), _mm256_add_ps(acc[h][t][0], acc[h][t][1]));
    }
  }
}
#endif

template <int NT>
HWY_INLINE void Q8_0x16Tile(const BlockQ8_0x16* w, int64_t nb, const ActQ8* const* a,
                            const int32_t* const* sums, float* out, int64_t ahead) {
#if SKIPKV_VNNI
  Q8_0x16TileVnni<NT>(w, nb, a, sums, out, ahead);
#elif SKIPKV_X86_INT8
  (void)sums;
  if constexpr (NT == 1) {
    Q8_0x16HalvesAvx2<1, 2>(w, nb, a, 0, out, ahead);
  } else {
    Q8_0x16HalvesAvx2<NT, 1>(w, nb, a, 0, out, ahead);
    Q8_0x16HalvesAvx2<NT, 1>(w, nb, a, 1, out, 0);
  }
#else
  (void)sums;
  (void)ahead;
  for (int r = 0; r < kX16Rows; ++r) {
    for (int t = 0; t < NT; ++t) {
      float acc[2] = {0.f, 0.f};
      for (int64_t b = 0; b < nb; ++b) {
        int32_t isum = 0;
        for (int i = 0; i < 32; ++i) isum += w[b].qs[i / 4][4 * r + i % 4] * a[t][b].qs[i];
        acc[b % 2] = std::fma(static_cast<float>(isum), F16Scalar(w[b].d[r]) * a[t][b].d, acc[b % 2]);
      }
      out[kX16Rows * t + r] = acc[0] + acc[1];
    }
  }
#endif
}

// ---- Q6_K rows interleaved in groups of 16 (DType::kQ6_Kx16) ----------------------
// The same scheme for Q6_K (BlockQ6_Kx16, tensor/dtype.h), whose sub-blocks of
// 16 are those of Q8_K's bsums: per row r of a group, token y (Q8_K) and
// superblock b, every target computes
//   sumi_r = sum_{j < 16} sc[j][r] * (sum_{i < 16} q[r][16 j + i] * y.qs[16 j + i] - 32 * y.bsums[j])
//   acc_r = fma(d_r * y.d, float(sumi_r), acc_r)
// from acc_r = 0, the result being acc_r after the last superblock. sumi_r is
// exact whatever the order of its sums (|q - 32| <= 32, |y.qs| <= 128 and
// |sc| <= 128: |sumi_r| <= 2^27), so, as for Q4_Kx16, a result does not depend
// on the target, the token tile or the thread count, and the file layout's
// Q6_K kernels agree with it only to float rounding. The quants are taken as
// u8 (0..63) and the -32 folded in through the bsums.
//
// Chunk (h, c) of a block gives q_{e + 32 i} (i < 4) of e = 128 h + 4 c + k;
// sub-block j = 8 h + 2 i + c / 4. The kernels take c in two runs of four
// (c / 4 = `half`), each run summing into four sub-blocks.

#if SKIPKV_VNNI
// The two 6-bit quant vectors (u8) whose low bits chunk s (0 or 1) of a
// triple holds: q[0] = q_{e + 32 s}, q[1] = q_{e + 32 (s + 2)}. (The 16-bit
// shifts move bits across bytes only into bits the masks clear.)
template <int S>
HWY_INLINE void Q6x16QuantPair(const uint8_t (*chunk)[64], __m512i* q) {
  const __m512i lo4 = _mm512_set1_epi8(0x0f), top = _mm512_set1_epi8(0x30);
  const __m512i x = _mm512_loadu_si512(chunk[S]), xh = _mm512_loadu_si512(chunk[2]);
  q[0] = _mm512_or_si512(_mm512_and_si512(x, lo4), _mm512_and_si512(_mm512_slli_epi16(xh, 4 - 2 * S), top));
  q[1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(x, 4), lo4),
                         _mm512_and_si512(S == 0 ? xh : _mm512_srli_epi16(xh, 2), top));
}
// All four: q[i] = q_{e + 32 i}.
HWY_INLINE void Q6x16Quants(const uint8_t (*chunk)[64], __m512i* q) {
  __m512i even[2], odd[2];
  Q6x16QuantPair<0>(chunk, even);
  Q6x16QuantPair<1>(chunk, odd);
  q[0] = even[0], q[1] = odd[0], q[2] = even[1], q[3] = odd[1];
}

// Block b of one group for NT tokens: acc[t] += its products. One token sums
// four sub-blocks per pass over a run of four chunk triples; more tokens take
// two passes of two sub-blocks each (by chunk s), so that their accumulators
// stay in registers (four at once, 4 tokens spilled: 512-token batches ran
// 1.1-1.6x slower on one Zen 5 core; decode the same either way).
template <int NT>
HWY_INLINE void Q6Kx16BlockVnni(const BlockQ6_Kx16& g, int64_t b, const BlockQ8_K* const* y, __m512* acc) {
  __m512i sumi[NT];
  SKIPKV_UNROLL
  for (int t = 0; t < NT; ++t) sumi[t] = _mm512_setzero_si512();
  SKIPKV_UNROLL
  for (int h = 0; h < 2; ++h) {
    SKIPKV_UNROLL
    for (int half = 0; half < 2; ++half) {
      // s[t][k]: sub-block 8 h + 2 i + half of the k-th i this pass takes, from -32 * its bsum.
      constexpr int kPerPass = NT == 1 ? 4 : 2;
      const auto pass = [&](auto s_c) {
        constexpr int kS = decltype(s_c)::value;  // -1: all four i; else i = kS, kS + 2
        const auto i_of = [](int k) { return kS < 0 ? k : kS + 2 * k; };
        __m512i s[NT][kPerPass];
        SKIPKV_UNROLL
        for (int t = 0; t < NT; ++t) {
          SKIPKV_UNROLL
          for (int k = 0; k < kPerPass; ++k)
            s[t][k] = _mm512_set1_epi32(-32 * y[t][b].bsums[8 * h + 2 * i_of(k) + half]);
        }
        SKIPKV_UNROLL
        for (int c = 4 * half; c < 4 * half + 4; ++c) {
          __m512i q[kPerPass];
          if constexpr (kS < 0) {
            Q6x16Quants(g.qs[h][c], q);
          } else {
            Q6x16QuantPair<kS>(g.qs[h][c], q);
          }
          SKIPKV_UNROLL
          for (int t = 0; t < NT; ++t) {
            SKIPKV_UNROLL
            for (int k = 0; k < kPerPass; ++k) {
              int32_t v;
              std::memcpy(&v, y[t][b].qs + 128 * h + 32 * i_of(k) + 4 * c, 4);
              s[t][k] = _mm512_dpbusd_epi32(s[t][k], q[k], _mm512_set1_epi32(v));
            }
          }
        }
        SKIPKV_UNROLL
        for (int k = 0; k < kPerPass; ++k) {
          const __m512i sc = _mm512_cvtepi8_epi32(
              _mm_loadu_si128(reinterpret_cast<const __m128i*>(g.sc[8 * h + 2 * i_of(k) + half])));
          SKIPKV_UNROLL
          for (int t = 0; t < NT; ++t) sumi[t] = _mm512_add_epi32(sumi[t], _mm512_mullo_epi32(s[t][k], sc));
        }
      };
      if constexpr (NT == 1) {
        pass(std::integral_constant<int, -1>());
      } else {
        pass(std::integral_constant<int, 0>());
        pass(std::integral_constant<int, 1>());
      }
    }
  }
  const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.d)));
  SKIPKV_UNROLL
  for (int t = 0; t < NT; ++t)
    acc[t] =
        _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_set1_ps(y[t][b].d)), _mm512_cvtepi32_ps(sumi[t]), acc[t]);
}

// 16 rows x NT tokens: out[16 t + r].
template <int NT>
HWY_INLINE void Q6Kx16TileVnni(const BlockQ6_Kx16* w, int64_t nb, const BlockQ8_K* const* y, float* out,
                               int64_t ahead) {
  __m512 acc[NT];
  SKIPKV_UNROLL
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    PrefetchBlockAhead(w, b, ahead);
    Q6Kx16BlockVnni<NT>(w[b], b, y, acc);
  }
  SKIPKV_UNROLL
  for (int t = 0; t < NT; ++t) _mm512_storeu_ps(out + kX16Rows * t, acc[t]);
}

#elif SKIPKV_X86_INT8
// AVX2 (and AVX3 without VNNI), a half (8 rows) a ymm as Q4Kx16HalvesAvx2:
// vpmaddubsw's u8 x s8 pair sums (|.| <= 2 * 63 * 128) of two chunks add up
// in int16 (<= 32,256), and vpmaddwd multiplies them by the scale held in both
// halves of each row's dword. The -32 term: sum_j sc_j * bsums[j] by vpmaddwd
// of the scale pairs (sc_{2m}, sc_{2m+1}) against the bsum pairs, times 32.

// Row r's sc[j][r] (rows r0 .. r0 + 7) in both int16 halves of its dword.
HWY_INLINE __m256i Q6x16ScaleBoth(const BlockQ6_Kx16& g, int j, int r0) {
  const __m256i v = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(g.sc[j] + r0)));
  return _mm256_blend_epi16(v, _mm256_slli_epi32(v, 16), 0xAA);
}
// Row r's (sc[2m][r], sc[2m + 1][r]) as the int16 halves of its dword.
HWY_INLINE __m256i Q6x16ScalePair(const BlockQ6_Kx16& g, int m, int r0) {
  const __m256i a = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(g.sc[2 * m] + r0)));
  const __m256i b =
      _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(g.sc[2 * m + 1] + r0)));
  return _mm256_blend_epi16(a, _mm256_slli_epi32(b, 16), 0xAA);
}
// The four quant vectors of one chunk triple's half `hh` (rows 8 hh .. 8 hh + 7).
HWY_INLINE void Q6x16QuantsHalf(const uint8_t (*chunk)[64], int hh, __m256i* q) {
  const __m256i lo4 = _mm256_set1_epi8(0x0f), top = _mm256_set1_epi8(0x30);
  const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(chunk[0] + 32 * hh));
  const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(chunk[1] + 32 * hh));
  const __m256i xh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(chunk[2] + 32 * hh));
  q[0] = _mm256_or_si256(_mm256_and_si256(x0, lo4), _mm256_and_si256(_mm256_slli_epi16(xh, 4), top));
  q[1] = _mm256_or_si256(_mm256_and_si256(x1, lo4), _mm256_and_si256(_mm256_slli_epi16(xh, 2), top));
  q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(x0, 4), lo4), _mm256_and_si256(xh, top));
  q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(x1, 4), lo4),
                         _mm256_and_si256(_mm256_srli_epi16(xh, 2), top));
}

// Rows 8 h0 .. 8 (h0 + NH) - 1 of the group, as Q4Kx16HalvesAvx2.
template <int NT, int NH>
HWY_INLINE void Q6Kx16HalvesAvx2(const BlockQ6_Kx16* w, int64_t nb, const BlockQ8_K* const* y, int h0,
                                 float* out, int64_t ahead) {
  __m256 acc[NH][NT];
  SKIPKV_UNROLL
  for (int hh = 0; hh < NH; ++hh) {
    SKIPKV_UNROLL
    for (int t = 0; t < NT; ++t) acc[hh][t] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
    PrefetchBlockAhead(w, b, ahead);
    const BlockQ6_Kx16& g = w[b];
    __m256i sumi[NH][NT], msum[NH][NT];
    SKIPKV_UNROLL
    for (int hh = 0; hh < NH; ++hh) {
      SKIPKV_UNROLL
      for (int t = 0; t < NT; ++t) sumi[hh][t] = msum[hh][t] = _mm256_setzero_si256();
      for (int m = 0; m < 8; ++m) {
        const __m256i pair = Q6x16ScalePair(g, m, 8 * (h0 + hh));
        SKIPKV_UNROLL
        for (int t = 0; t < NT; ++t) {
          int32_t bs;
          std::memcpy(&bs, y[t][b].bsums + 2 * m, 4);
          msum[hh][t] = _mm256_add_epi32(msum[hh][t], _mm256_madd_epi16(pair, _mm256_set1_epi32(bs)));
        }
      }
    }
    for (int h = 0; h < 2; ++h) {
      for (int half = 0; half < 2; ++half) {
        for (int c = 4 * half; c < 4 * half + 4; c += 2) {  // two chunks per int16 sum
          __m256i ya[NT][4], yb[NT][4];
          SKIPKV_UNROLL
          for (int t = 0; t < NT; ++t) {
            SKIPKV_UNROLL
            for (int i = 0; i < 4; ++i) {
              int32_t va, vb;
              std::memcpy(&va, y[t][b].qs + 128 * h + 32 * i + 4 * c, 4);
              std::memcpy(&vb, y[t][b].qs + 128 * h + 32 * i + 4 * c + 4, 4);
              ya[t][i] = _mm256_set1_epi32(va);
              yb[t][i] = _mm256_set1_epi32(vb);
            }
          }
          SKIPKV_UNROLL
          for (int hh = 0; hh < NH; ++hh) {
            __m256i qa[4], qb[4];
            Q6x16QuantsHalf(g.qs[h][c], h0 + hh, qa);
            Q6x16QuantsHalf(g.qs[h][c + 1], h0 + hh, qb);
            SKIPKV_UNROLL
            for (int i = 0; i < 4; ++i) {
              const __m256i sc = Q6x16ScaleBoth(g, 8 * h + 2 * i + half, 8 * (h0 + hh));
              SKIPKV_UNROLL
              for (int t = 0; t < NT; ++t) {
                const __m256i s16 = _mm256_add_epi16(_mm256_maddubs_epi16(qa[i], ya[t][i]),
                                                     _mm256_maddubs_epi16(qb[i], yb[t][i]));
                sumi[hh][t] = _mm256_add_epi32(sumi[hh][t], _mm256_madd_epi16(s16, sc));
              }
            }
          }
        }
      }
    }
    SKIPKV_UNROLL
    for (int hh = 0; hh < NH; ++hh) {
      const __m256 d =
          _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g.d + 8 * (h0 + hh))));
      SKIPKV_UNROLL
      for (int t = 0; t < NT; ++t) {
        const __m256i total = _mm256_sub_epi32(sumi[hh][t], _mm256_slli_epi32(msum[hh][t], 5));
        acc[hh][t] = _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_set1_ps(y[t][b].d)), _mm256_cvtepi32_ps(total),
                                     acc[hh][t]);
      }
    }
  }
  SKIPKV_UNROLL
  for (int hh = 0; hh < NH; ++hh) {
    SKIPKV_UNROLL
    for (int t = 0; t < NT; ++t) _mm256_storeu_ps(out + kX16Rows * t + 8 * (h0 + hh), acc[hh][t]);
  }
}
#endif

template <int NT>
HWY_INLINE void Q6Kx16Tile(const BlockQ6_Kx16* w, int64_t nb, const BlockQ8_K* const* y, float* out,
                           int64_t ahead) {
#if SKIPKV_VNNI
  Q6Kx16TileVnni<NT>(w, nb, y, out, ahead);
#elif SKIPKV_X86_INT8
  if constexpr (NT == 1) {
    Q6Kx16HalvesAvx2<1, 2>(w, nb, y, 0, out, ahead);
  } else {
    Q6Kx16HalvesAvx2<NT, 1>(w, nb, y, 0, out, ahead);
    Q6Kx16HalvesAvx2<NT, 1>(w, nb, y, 1, out, 0);  // the group is in cache now
  }
#else
  // Portable: the definition, one row at a time.
  (void)ahead;
  for (int r = 0; r < kX16Rows; ++r) {
    for (int t = 0; t < NT; ++t) {
      float acc = 0.f;
      for (int64_t b = 0; b < nb; ++b) {
        const BlockQ6_Kx16& g = w[b];
        int32_t sumi = 0;
        for (int j = 0; j < 16; ++j) {
          int32_t s = -32 * y[t][b].bsums[j];
          for (int e = 16 * j; e < 16 * j + 16; ++e) {
            const int h = e / 128, i = (e % 128) / 32, c = (e % 32) / 4, k = e % 4;
            const uint8_t lo = g.qs[h][c][i % 2][4 * r + k], hi = g.qs[h][c][2][4 * r + k];
            const int32_t q = ((i < 2 ? lo : lo >> 4) & 0x0f) | (((hi >> (2 * i)) & 3) << 4);
            s += q * y[t][b].qs[e];
          }
          sumi += g.sc[j][r] * s;
        }
        acc = std::fma(F16Scalar(g.d[r]) * y[t][b].d, static_cast<float>(sumi), acc);
      }
      out[kX16Rows * t + r] = acc;
    }
  }
#endif
}

// The three interleaved types for X16Rows: block, activation block and format,
// the per-(token, block) integers the tiles take, a batch's prefetch distance
// in blocks, the tile, and on AVX-512 VNNI one token's step over one block of
// one group (OneAcc: a group's accumulators, zero to start; AddBlock: block b
// as the one-token tile adds it; Store: its 16 results), which
// X16OneTokenStreams runs over S groups side by side.
struct Q4_Kx16Kind {
  static constexpr DType kType = DType::kQ4_Kx16;
  static constexpr int64_t kBatchAhead = kX16BatchPrefetchBlocks;
  using Block = BlockQ4_Kx16;
  using Act = BlockQ8_K;
  static constexpr ActFormat kFormat = ActFormat::kQ8K;
  static constexpr int64_t kElems = kQK_K;
  static constexpr int kAuxPerBlock = 4;  // Q8KBsumPairs
  static HWY_INLINE void Aux(const Act* a, int64_t nb, int32_t* aux) { Q8KBsumPairs(a, nb, aux); }
  template <int NT>
  static HWY_INLINE void Tile(const Block* w, int64_t nb, const Act* const* a, const int32_t* const* aux,
                              float* out, int64_t ahead) {
    Q4Kx16Tile<NT>(w, nb, a, aux, out, ahead);
  }
#if SKIPKV_VNNI
  using OneAcc = __m512;
  static HWY_INLINE void AddBlock(const Block& g, int64_t b, const Act* a, const int32_t* aux, OneAcc& acc) {
    Q4Kx16BlockVnni<1>(g, b, &a, &aux, &acc);
  }
  static HWY_INLINE void Store(const OneAcc& acc, float* out) { _mm512_storeu_ps(out, acc); }
#endif
};
struct Q6_Kx16Kind {
  static constexpr DType kType = DType::kQ6_Kx16;
  static constexpr int64_t kBatchAhead = kX16BatchPrefetchBlocks;
  using Block = BlockQ6_Kx16;
  using Act = BlockQ8_K;
  static constexpr ActFormat kFormat = ActFormat::kQ8K;
  static constexpr int64_t kElems = kQK_K;
  static constexpr int kAuxPerBlock = 0;  // the tiles read the bsums themselves
  static HWY_INLINE void Aux(const Act*, int64_t, int32_t*) {}
  template <int NT>
  static HWY_INLINE void Tile(const Block* w, int64_t nb, const Act* const* a, const int32_t* const*,
                              float* out, int64_t ahead) {
    Q6Kx16Tile<NT>(w, nb, a, out, ahead);
  }
#if SKIPKV_VNNI
  using OneAcc = __m512;
  static HWY_INLINE void AddBlock(const Block& g, int64_t b, const Act* a, const int32_t*, OneAcc& acc) {
    Q6Kx16BlockVnni<1>(g, b, &a, &acc);
  }
  static HWY_INLINE void Store(const OneAcc& acc, float* out) { _mm512_storeu_ps(out, acc); }
#endif
};
struct Q8_0x16Kind {
  static constexpr DType kType = DType::kQ8_0x16;
  static constexpr int64_t kBatchAhead = SKIPKV_VNNI ? kQ8X16BatchPrefetchBlocks : 0;  // AVX2: none measured
  using Block = BlockQ8_0x16;
  using Act = ActQ8;
  static constexpr ActFormat kFormat = ActFormat::kQ8;
  static constexpr int64_t kElems = 32;
  // ActQ8Sums, which only the VNNI tile reads (its u8 offset); none elsewhere.
  static constexpr int kAuxPerBlock = SKIPKV_VNNI ? 1 : 0;
  static HWY_INLINE void Aux(const Act* a, int64_t nb, int32_t* aux) {
    if constexpr (kAuxPerBlock > 0) ActQ8Sums(a, nb, aux);
  }
  template <int NT>
  static HWY_INLINE void Tile(const Block* w, int64_t nb, const Act* const* a, const int32_t* const* aux,
                              float* out, int64_t ahead) {
    Q8_0x16Tile<NT>(w, nb, a, aux, out, ahead);
  }
#if SKIPKV_VNNI
  using OneAcc = __m512[2];  // the two fma chains (by block parity)
  static HWY_INLINE void AddBlock(const Block& g, int64_t b, const Act* a, const int32_t* aux, OneAcc& acc) {
    Q8_0x16BlockVnni<1>(g, b, &a, &aux, &acc);
  }
  static HWY_INLINE void Store(const OneAcc& acc, float* out) {
    _mm512_storeu_ps(out, _mm512_add_ps(acc[0], acc[1]));
  }
#endif
};

#if SKIPKV_VNNI
// One token (a.n == 1) over rows [r0, r1), on AVX-512 VNNI: the groups cut
// into S equal parts, step i taking group i of every part, and within a step
// block b of every group before block b + 1, so that each part is one
// sequential stream and S of them are read side by side (DecodeStreams,
// simd_internal.h). Each group is summed by Kind::AddBlock as the one-token
// tile sums it, so the results are the tile's bit for bit; the groups left
// over go through the tile one at a time.
template <class Kind, int S>
void X16OneTokenStreams(const MatArgs& a, int64_t r0, int64_t r1, int64_t ahead) {
  using Act = typename Kind::Act;
  using Block = typename Kind::Block;
  const int64_t nb = a.in / Kind::kElems;
  thread_local std::vector<int32_t> aux_buf;
  aux_buf.resize(static_cast<size_t>(nb * Kind::kAuxPerBlock));
  const Act* x = reinterpret_cast<const Act*>(a.act);
  Kind::Aux(x, nb, aux_buf.data());
  const int32_t* aux = aux_buf.data();
  const auto* base = reinterpret_cast<const Block*>(a.w + static_cast<size_t>(r0) * a.w_row_bytes);
  const int64_t groups = (r1 - r0) / kX16Rows, part = groups / S;
  for (int64_t i = 0; i < part; ++i) {
    const Block* w[S];
    SKIPKV_UNROLL
    for (int s = 0; s < S; ++s) w[s] = base + (s * part + i) * nb;
    typename Kind::OneAcc acc[S] = {};
    for (int64_t b = 0; b < nb; ++b) {
      SKIPKV_UNROLL
      for (int s = 0; s < S; ++s) {
        PrefetchBlockAhead(w[s], b, ahead);
        Kind::AddBlock(w[s][b], b, x, aux, acc[s]);
      }
    }
    SKIPKV_UNROLL
    for (int s = 0; s < S; ++s) Kind::Store(acc[s], a.y + r0 + (s * part + i) * kX16Rows);
  }
  for (int64_t g = S * part; g < groups; ++g) {
    const Act* xs[1] = {x};
    const int32_t* auxs[1] = {aux};
    Kind::template Tile<1>(base + g * nb, nb, xs, auxs, a.y + r0 + g * kX16Rows, ahead);
  }
}
#endif

// Rows [r0, r1) (multiples of 16) for all tokens: groups of 16 rows x tiles
// of up to 4 tokens, cache-blocked; each token's per-block integers (Kind::Aux)
// are made once per cache block.
template <class Kind>
void X16Rows(const MatArgs& a, int64_t r0, int64_t r1) {
  SKIPKV_CHECK_MSG(a.act_format == Kind::kFormat,
                   "MatRows: interleaved weights' activations in an unexpected format");
  SKIPKV_CHECK_MSG(r0 % kX16Rows == 0 && r1 % kX16Rows == 0,
                   "MatRows: interleaved rows split inside a group");
  using Act = typename Kind::Act;
  const int64_t nb = a.in / Kind::kElems, aux_len = nb * Kind::kAuxPerBlock;
  thread_local std::vector<int32_t> aux_buf;
  int64_t prev_rb = -1, prev_tb = -1;
  const int64_t one_token_ahead = DecodePrefetchBlocks(Kind::kType);
#if SKIPKV_VNNI
  if (a.n == 1) {
    switch (DecodeStreamCount(Kind::kType)) {
      case 2:
        return X16OneTokenStreams<Kind, 2>(a, r0, r1, one_token_ahead);
      case 4:
        return X16OneTokenStreams<Kind, 4>(a, r0, r1, one_token_ahead);
      case 8:
        return X16OneTokenStreams<Kind, 8>(a, r0, r1, one_token_ahead);
      default:
        break;  // 1: the tiles below
    }
  }
#endif
  ForEachCacheBlock(
      a, r0, r1, kMaxTok,
      [&](int64_t rb, int64_t re, int64_t tb, int64_t te) {
        // The first token block of a row block reads its weights from memory;
        // the later ones find them in L2.
        const bool from_memory = rb != prev_rb || tb < prev_tb;
        prev_rb = rb;
        prev_tb = tb;
        aux_buf.resize(static_cast<size_t>((te - tb) * aux_len));
        for (int64_t t = tb; t < te; ++t) {
          Kind::Aux(reinterpret_cast<const Act*>(a.act + static_cast<size_t>(t) * a.act_row_bytes), nb,
                    aux_buf.data() + (t - tb) * aux_len);
        }
        for (int64_t r = rb; r < re; r += kX16Rows) {
          const auto* w =
              reinterpret_cast<const typename Kind::Block*>(a.w + static_cast<size_t>(r) * a.w_row_bytes);
          for (int64_t t = tb; t < te; t += kMaxTok) {
            WithTileTokens<kMaxTok>(std::min<int64_t>(kMaxTok, te - t), [&](auto nt_c) {
              constexpr int NT = decltype(nt_c)::value;
              const Act* x[NT];
              const int32_t* aux[NT];
              SKIPKV_UNROLL
              for (int i = 0; i < NT; ++i) {
                x[i] = reinterpret_cast<const Act*>(a.act + static_cast<size_t>(t + i) * a.act_row_bytes);
                aux[i] = aux_buf.data() + (t + i - tb) * aux_len;
              }
              float out[kX16Rows * NT];
              const int64_t ahead =
                  NT == 1 ? one_token_ahead : (from_memory && t == tb ? Kind::kBatchAhead : 0);
              Kind::template Tile<NT>(w, nb, x, aux, out, ahead);
              SKIPKV_UNROLL
              for (int i = 0; i < NT; ++i)
                std::memcpy(a.y + (t + i) * a.y_stride + r, out + kX16Rows * i, sizeof(float) * kX16Rows);
            });
          }
        }
      },
      kX16Rows);
}
