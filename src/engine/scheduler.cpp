// Capacity and micro-batch stages of the scheduler, and padded-mode batch
// grouping; see scheduler.h.
#include "engine/scheduler.h"

#include <algorithm>
#include <numeric>

namespace skipkv::engine {

namespace {
bool Active(SeqState s) { return s == SeqState::kPrefill || s == SeqState::kDecode; }
}  // namespace

std::vector<size_t> Admit(std::span<const SeqView> seqs, const SchedulerLimits& limits) {
  std::vector<size_t> out;
  const int64_t active = std::count_if(seqs.begin(), seqs.end(), [](const SeqView& s) { return Active(s.state); });
  if (limits.grouped) {
    if (active > 0) return out;
    int64_t group = -1;
    for (const SeqView& s : seqs) {
      if (s.state == SeqState::kWaiting && (group < 0 || s.group < group)) group = s.group;
    }
    for (size_t i = 0; i < seqs.size(); ++i) {
      if (seqs[i].state == SeqState::kWaiting && seqs[i].group == group) out.push_back(i);
    }
    return out;
  }
  int64_t room = limits.max_active > 0 ? limits.max_active - active : static_cast<int64_t>(seqs.size());
  size_t reserved = 0;
  for (const SeqView& s : seqs) {
    if (Active(s.state)) reserved += s.kv_bytes;
  }
  for (size_t i = 0; i < seqs.size() && room > 0; ++i) {
    if (seqs[i].state != SeqState::kWaiting) continue;
    if (limits.kv_memory > 0 && reserved + seqs[i].kv_bytes > limits.kv_memory) break;  // FIFO: no overtaking
    out.push_back(i);
    reserved += seqs[i].kv_bytes;
    --room;
  }
  return out;
}

int64_t StepPlan::tokens() const {
  int64_t n = 0;
  for (const StepItem& it : items) n += it.count;
  return n;
}

StepPlan PlanStep(std::span<const SeqView> seqs, const SchedulerLimits& limits) {
  StepPlan plan;
  const int64_t ubatch = std::max(1, limits.n_ubatch);
  int64_t budget = std::max(1, limits.n_batch);
  if (limits.mixed) {
    const int64_t decodes =
        std::count_if(seqs.begin(), seqs.end(), [](const SeqView& s) { return s.state == SeqState::kDecode; });
    budget = std::max<int64_t>(1, budget - decodes);  // a prefill chunk is never starved
  }
  int64_t planned = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const SeqView& s = seqs[i];
    if (limits.mixed && s.state == SeqState::kDecode) {
      plan.items.push_back({i, 0, 1, false, false});
      continue;
    }
    if (s.state != SeqState::kPrefill) continue;
    plan.prefill = true;
    if (planned >= budget) {
      if (limits.mixed) continue;  // decodes further on still ride along
      break;
    }
    const int64_t remaining = s.prompt_len - s.prefilled;
    if (remaining <= 0) continue;  // cannot happen for a consistent state; skip defensively
    const int64_t count = std::min({ubatch, remaining, budget - planned});
    plan.items.push_back({i, s.prefilled, count, count == remaining, true});
    planned += count;
  }
  if (plan.prefill || limits.mixed) return plan;
  for (size_t i = 0; i < seqs.size(); ++i) {
    if (seqs[i].state == SeqState::kDecode) plan.items.push_back({i, 0, 1, false, false});
  }
  return plan;
}

std::vector<std::vector<size_t>> GroupBatches(std::span<const int64_t> lens, int batch_size, bool sort) {
  std::vector<size_t> order(lens.size());
  std::iota(order.begin(), order.end(), size_t{0});
  if (sort) std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return lens[a] < lens[b]; });
  const size_t bs = batch_size > 0 ? static_cast<size_t>(batch_size) : std::max<size_t>(order.size(), 1);
  std::vector<std::vector<size_t>> batches;
  for (size_t k = 0; k < order.size(); k += bs) {
    batches.emplace_back(order.begin() + k, order.begin() + std::min(order.size(), k + bs));
  }
  return batches;
}

std::vector<int64_t> PadLens(std::span<const int64_t> lens, std::span<const size_t> batch) {
  int64_t mx = 0;
  for (size_t i : batch) mx = std::max(mx, lens[i]);
  std::vector<int64_t> pads;
  for (size_t i : batch) pads.push_back(mx - lens[i]);
  return pads;
}

}  // namespace skipkv::engine
