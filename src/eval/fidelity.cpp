// Teacher-forced fidelity against FullKV (see fidelity.h).
#include "eval/fidelity.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace skipkv::eval {

nlohmann::json FidelityRow::ToJson() const {
  return {{"method", method},
          {"budget", budget},
          {"steps", steps},
          {"top1_agreement", top1_agreement},
          {"kl_mean", kl_mean},
          {"kl_max", kl_max},
          {"compressions", compressions},
          {"peak_slots", peak_slots}};
}

std::vector<double> LogSoftmax(std::span<const float> logits) {
  std::vector<double> out(logits.size());
  if (logits.empty()) return out;
  double mx = logits[0];
  for (float v : logits) mx = std::max(mx, static_cast<double>(v));
  double sum = 0.0;
  for (float v : logits) sum += std::exp(static_cast<double>(v) - mx);
  const double lse = mx + std::log(sum);
  for (size_t i = 0; i < logits.size(); ++i) out[i] = static_cast<double>(logits[i]) - lse;
  return out;
}

double KlDivergence(std::span<const double> log_p, std::span<const double> log_q) {
  double kl = 0.0;
  for (size_t i = 0; i < log_p.size(); ++i) {
    const double p = std::exp(log_p[i]);
    if (p > 0.0) kl += p * (log_p[i] - log_q[i]);
  }
  return std::max(0.0, kl);  // rounding can leave a tiny negative value for P == Q
}

namespace {

size_t ArgMax(std::span<const double> v) {
  return static_cast<size_t>(std::max_element(v.begin(), v.end()) - v.begin());  // first on ties
}

// Running sums of one method.
struct Acc {
  int64_t steps = 0, agree = 0;
  double kl_sum = 0, kl_max = 0;
};

}  // namespace

StatusOr<FidelityResult> RunFidelity(Engine& engine, const std::string& text, const FidelityConfig& config) {
  if (config.pairs.empty()) return InvalidArgument("fidelity: no method given");
  if (config.prompt_tokens < 1)
    return InvalidArgument("fidelity: prompt_tokens must be >= 1, got " +
                           std::to_string(config.prompt_tokens));
  if (config.max_tokens < 0)
    return InvalidArgument("fidelity: max_tokens must be >= 0, got " + std::to_string(config.max_tokens));
  SKIPKV_ASSIGN_OR_RETURN(std::vector<int32_t> tokens, engine.Tokenize(text, /*add_bos=*/true));
  FidelityResult res;
  res.text_tokens = static_cast<int64_t>(tokens.size());
  int64_t used = std::min<int64_t>(res.text_tokens, engine.info().context_length);
  if (config.max_tokens > 0) used = std::min(used, config.max_tokens);
  if (used <= config.prompt_tokens) {
    return InvalidArgument("fidelity: the text has " + std::to_string(res.text_tokens) + " tokens (" +
                           std::to_string(used) + " used), which leaves none to force after a prompt of " +
                           std::to_string(config.prompt_tokens));
  }
  res.used_tokens = used;

  // Request 0 is the uncompressed reference; request k + 1 runs pairs[k].
  const size_t n = config.pairs.size();
  std::vector<Request> requests(n + 1);
  for (size_t r = 0; r <= n; ++r) {
    Request& q = requests[r];
    q.prompt_tokens.assign(tokens.begin(), tokens.begin() + config.prompt_tokens);
    q.forced_tokens.assign(tokens.begin() + config.prompt_tokens, tokens.begin() + used);
    q.max_new_tokens = static_cast<int>(q.forced_tokens.size());
    q.ignore_eos = true;
    if (r == 0) {
      MethodConfig full;
      full.name = "fidelity-reference";
      full.kv.policy = "full";
      q.method = full;
    } else {
      q.method = config.pairs[r - 1].method;
    }
  }

  // Reference rows wait here until every method has been compared at that
  // step; a method that runs ahead of the reference (a limited batch size)
  // parks its rows in `early`.
  std::map<int64_t, std::vector<double>> ref;
  std::map<int64_t, size_t> compared;
  std::vector<std::map<int64_t, std::vector<double>>> early(n);
  std::vector<Acc> acc(n);
  auto compare = [&](size_t k, int64_t step, const std::vector<double>& q) {
    const std::vector<double>& p = ref.at(step);
    Acc& a = acc[k];
    ++a.steps;
    a.agree += ArgMax(p) == ArgMax(q);
    const double kl = KlDivergence(p, q);
    a.kl_sum += kl;
    a.kl_max = std::max(a.kl_max, kl);
    if (++compared[step] == n) {
      ref.erase(step);
      compared.erase(step);
    }
  };
  auto on_logits = [&](const LogitsEvent& e) {
    std::vector<double> lp = LogSoftmax(e.logits);
    if (e.index == 0) {
      ref[e.step] = std::move(lp);
      for (size_t k = 0; k < n; ++k) {
        auto it = early[k].find(e.step);
        if (it == early[k].end()) continue;
        compare(k, e.step, it->second);
        early[k].erase(it);
      }
      return;
    }
    const size_t k = e.index - 1;
    if (ref.count(e.step)) {
      compare(k, e.step, lp);
    } else {
      early[k][e.step] = std::move(lp);
    }
  };
  SKIPKV_ASSIGN_OR_RETURN(std::vector<GenerationResult> results,
                          engine.Generate(requests, nullptr, nullptr, on_logits));
  for (size_t k = 0; k < n; ++k) {
    FidelityRow row;
    row.method = config.pairs[k].method.name;
    row.budget = config.pairs[k].full() ? 0 : config.pairs[k].method.kv.budget;
    row.steps = acc[k].steps;
    row.top1_agreement = acc[k].steps ? 100.0 * static_cast<double>(acc[k].agree) / acc[k].steps : 0.0;
    row.kl_mean = acc[k].steps ? acc[k].kl_sum / static_cast<double>(acc[k].steps) : 0.0;
    row.kl_max = acc[k].kl_max;
    row.compressions = results[k + 1].kv.compressions;
    row.peak_slots = results[k + 1].kv.peak_slots;
    res.rows.push_back(std::move(row));
  }
  return res;
}

}  // namespace skipkv::eval
