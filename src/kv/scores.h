// Eviction scores as pure functions on plain f32 arrays (docs/spec.md §2.2, §6.6):
// attention importance (SnapKV / R-KV), R-KV key redundancy, the R-KV mix,
// and the common top-k selection. One call scores one KV head of one layer
// of one sequence; nothing here knows about the cache, so each piece is
// tested against hand-worked numbers and a naive oracle.
//
// Notation: N = slots, C = candidate slots (N − W, the non-window prefix),
// W = observation window, G = query heads per KV head, d = head dim.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kv/kv_policy.h"

namespace skipkv::kvscore {

// Attention importance (docs/spec.md §6.6 (a), Eq. 4), for one KV head:
//   logits[g][w][n] = q[g][w] · k[n] / sqrt(d)   for n < C; −inf if !valid[n]
//   L[w][n]  = max_g logits[g][w][n]              (GQA max on logits)
//   P[w][:]  = softmax_n L[w][:]  over the C candidates only (f32)
//   out[n]   = mean_w P[w][n]                     (before pooling)
// q: [G][n_q][d] (rows of one KV head's query group, oldest first), k: [C][d]
// (at least C rows; only the first C are read), valid: [C] or nullptr (all
// valid). out: [C]. A window row whose keys are all invalid contributes 0.
// Pooling is separate (MaxPool1d).
void AttentionImportance(const float* q, int group, int n_q, const float* k, int64_t n_cand, int d,
                         const uint8_t* valid, float* out, KvScratch& scratch);

// out[n] = max_{m in [n − k/2, n + k/2] ∩ [0, n)} in[m]: max-pool, kernel k
// (odd), stride 1, padding k/2 filled with −inf (PyTorch max_pool1d), so
// the edges only see real values. out must not alias in.
void MaxPool1d(const float* in, int64_t n, int kernel, float* out);

// R-KV redundancy (docs/spec.md §2.2.2, §6.6 (b), Eq. 5), for one KV head over all N
// slots (window included):
//   Kn[n] = valid[n] ? k[n] / (‖k[n]‖₂ + 1e−8) : 0
//   S = Kn Knᵀ; S[a][a] = 0
//   per row a: j* = largest c with S[a][c] > 0.5, or 0 if none; S[a][j*] = 0
//   out[n] = softmax_n( (1/N) Σ_a S[a][n] )   over all N
// k: [N][d], valid: [N] or nullptr, out: [N] (callers use the first C).
// Cost O(N²·d/2): S is symmetric, so only the pairs a < c are computed
// (kernels::GramUpperPass, SIMD); the column sums are recovered from the
// row sums, and the retain-last edits are row-local.
void Redundancy(const float* k, int64_t n, int d, const uint8_t* valid, float* out, KvScratch& scratch);

// out[n] = lambda·imp[n] − (1 − lambda)·red[n]  (R-KV mix, spec Eq. 6 without
// the SkipKV penalty). out may alias imp or red.
void MixScores(const float* imp, const float* red, int64_t n, float lambda, float* out);

// Applies `adjusters` (in order) to the candidate scores of (layer, kv_head),
// then, if `padded`, sets the score of every invalid candidate to +inf so
// that pads are never evicted. score: [C]; gen_pos: all N slots of the head
// (the adjusters see them all); valid: [≥ C].
void FinishScores(std::span<const SlotScoreAdjuster* const> adjusters, int layer, int kv_head,
                  std::span<const int32_t> gen_pos, const uint8_t* valid, bool padded, std::span<float> score);

// Selection (docs/spec.md §6.6 (d)): keeps the top `budget − recent` candidates by
// score among slots [0, n_slots − recent) — ties (and equal +inf pads) go to
// the lower slot, i.e. the lower gen_pos — sorted ascending, then the last
// `recent` slots. score: [n_slots − recent]. NaN scores are treated as −inf.
// Requires n_slots ≥ budget ≥ recent.
void SelectTopKPlusRecent(std::span<const float> score, int64_t n_slots, int64_t recent, int64_t budget,
                          std::vector<int32_t>* keep, KvScratch& scratch);

}  // namespace skipkv::kvscore
