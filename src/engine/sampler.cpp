// Sampling: repetition penalty, greedy, temperature, top-k, top-p, min-p and
// the seeded draw. See include/skipkv/sampling.h for the order and semantics.
#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "util/check.h"

namespace skipkv {
namespace {
std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}
}  // namespace

Status ValidateSamplingParams(const SamplingParams& p) {
  auto bad = [](const std::string& what) { return InvalidArgument("sampling: " + what); };
  if (!std::isfinite(p.temperature) || p.temperature < 0.f)
    return bad("temperature must be >= 0 (0 = greedy), got " + Num(p.temperature));
  if (p.top_k < 0) return bad("top_k must be >= 0 (0 = off), got " + std::to_string(p.top_k));
  if (!(p.top_p > 0.f && p.top_p <= 1.f))
    return bad("top_p must be in (0, 1] (1 = off), got " + Num(p.top_p));
  if (!(p.min_p >= 0.f && p.min_p <= 1.f))
    return bad("min_p must be in [0, 1] (0 = off), got " + Num(p.min_p));
  if (!std::isfinite(p.repeat_penalty) || p.repeat_penalty <= 0.f)
    return bad("repeat_penalty must be > 0 (1 = off), got " + Num(p.repeat_penalty));
  if (p.repeat_last_n < -1)
    return bad("repeat_last_n must be >= -1 (-1 = whole sequence, 0 = off), got " +
               std::to_string(p.repeat_last_n));
  return Status::Ok();
}

namespace engine {

int32_t Argmax(std::span<const float> logits) {
  SKIPKV_CHECK(!logits.empty());
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > logits[best]) best = static_cast<int32_t>(i);  // strict: lowest id wins ties
  }
  return best;
}

void ApplyRepetitionPenalty(std::span<float> logits, std::span<const int32_t> window, float penalty,
                            std::vector<int32_t>* scratch) {
  if (penalty == 1.f || window.empty()) return;
  scratch->clear();
  for (int32_t id : window) {
    if (id >= 0 && static_cast<size_t>(id) < logits.size()) scratch->push_back(id);
  }
  std::sort(scratch->begin(), scratch->end());
  scratch->erase(std::unique(scratch->begin(), scratch->end()), scratch->end());
  for (int32_t id : *scratch) {
    float& l = logits[id];
    l = l > 0.f ? l / penalty : l * penalty;
  }
}

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {
  SKIPKV_CHECK_MSG(ValidateSamplingParams(params).ok(), "Sampler needs validated params");
}

double Sampler::NextUniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

int32_t Sampler::Sample(std::span<const float> logits, std::span<const int32_t> history) {
  SKIPKV_CHECK(!logits.empty());
  cand_.clear();
  const SamplingParams& p = params_;
  std::span<const float> src = logits;
  if (p.repeat_penalty != 1.f && p.repeat_last_n != 0 && !history.empty()) {
    work_.assign(logits.begin(), logits.end());
    size_t n = history.size();
    if (p.repeat_last_n > 0) n = std::min(n, static_cast<size_t>(p.repeat_last_n));
    ApplyRepetitionPenalty(work_, history.subspan(history.size() - n), p.repeat_penalty, &seen_);
    src = work_;
  }
  if (p.temperature == 0.f) return Argmax(src);

  // Candidates ordered by descending probability, ties by id, so the draw is
  // deterministic. Only as much of the vocabulary is sorted as the filters
  // need: top-k sorts k entries; top-p first tries the best 1024.
  const size_t vocab = src.size();
  auto by_prob = [](const Candidate& a, const Candidate& b) {
    return a.prob > b.prob || (a.prob == b.prob && a.id < b.id);
  };
  cand_.resize(vocab);
  for (size_t i = 0; i < vocab; ++i) cand_[i] = {static_cast<int32_t>(i), src[i]};
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < vocab) {
    std::partial_sort(cand_.begin(), cand_.begin() + p.top_k, cand_.end(), by_prob);
    cand_.resize(p.top_k);
  }

  // Softmax of logit / T over the survivors (max first, so exp never overflows;
  // -inf logits give probability 0).
  const float inv_t = 1.f / p.temperature;
  float max_l = -INFINITY;
  for (const auto& c : cand_) max_l = std::max(max_l, c.prob);
  if (!std::isfinite(max_l)) return Argmax(src);  // all -inf (or NaN): nothing to draw from
  double sum = 0.0;
  for (auto& c : cand_) {
    c.prob = std::exp((c.prob - max_l) * inv_t);
    sum += c.prob;
  }
  for (auto& c : cand_) c.prob = static_cast<float>(c.prob / sum);

  // Top-p, then min-p (the HF order); min-p is relative to the most likely
  // surviving token and can run on an unsorted list.
  bool sorted = p.top_k > 0 && static_cast<size_t>(p.top_k) < vocab;
  if (p.top_p < 1.f) {
    if (!sorted) {
      const size_t head = std::min<size_t>(cand_.size(), 1024);
      std::partial_sort(cand_.begin(), cand_.begin() + head, cand_.end(), by_prob);
      double head_mass = 0.0;
      for (size_t i = 0; i < head; ++i) head_mass += cand_[i].prob;
      if (head_mass >= p.top_p) {
        cand_.resize(head);
      } else {
        std::sort(cand_.begin(), cand_.end(), by_prob);
      }
      sorted = true;
    }
    double cum = 0.0;
    size_t n = 0;
    while (n < cand_.size()) {
      cum += cand_[n].prob;
      ++n;
      if (cum >= p.top_p) break;
    }
    cand_.resize(n);
  }
  if (p.min_p > 0.f) {
    float max_p = 0.f;
    for (const auto& c : cand_) max_p = std::max(max_p, c.prob);
    const float floor_p = p.min_p * max_p;
    std::erase_if(cand_, [floor_p](const Candidate& c) { return c.prob < floor_p; });
  }
  // Pure temperature sampling draws in id order (no need to sort the vocabulary).
  if (!sorted && p.min_p > 0.f) std::sort(cand_.begin(), cand_.end(), by_prob);

  double total = 0.0;
  for (const auto& c : cand_) total += c.prob;
  for (auto& c : cand_) c.prob = static_cast<float>(c.prob / total);
  // Zero-probability entries (e.g. -inf logits) are never drawn: `u < cum`
  // needs a strictly positive increment, and the rounding fallback takes the
  // last entry with positive probability.
  const double u = NextUniform();
  double cum = 0.0;
  int32_t last_positive = cand_[0].id;
  for (const auto& c : cand_) {
    if (c.prob <= 0.f) continue;
    cum += c.prob;
    last_positive = c.id;
    if (u < cum) return c.id;
  }
  return last_positive;  // u within rounding of 1
}

}  // namespace engine
}  // namespace skipkv
