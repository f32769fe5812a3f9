// SkipKV's sentence side on the real stories260K model (the embedded
// default): greedy stories repeat sentences verbatim, so the PSS of each
// verbatim pair is computed here, in double, from the model's own final
// hidden states, and checked against what SkipkvSentenceHooks put in T;
// an eviction trace then shows that penalised slots go before unpenalised
// ones (spec §6.5–6.8, issue 9 "Done means").
//
// The hooks are installed through EngineInternals::SetSequenceHooks with policy rkv,
// and the penalty reaches the compressor through set_score_adjuster (the
// path an app has today; the skipkv policy wires its own state instead).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "engine/engine_internals.h"
#include "io/embedded/embedded_model.h"
#include "io/model_source.h"
#include "skipkv/engine.h"
#include "sentence/sentence_hooks.h"

namespace skipkv {
namespace {

using Table = std::map<std::pair<int32_t, int32_t>, float>;

// τ for this test: below the lowest PSS of the verbatim pairs (asserted).
constexpr float kTau = 0.95f;

struct Log {
  int64_t prompt_end = 0;
  std::map<int32_t, std::vector<float>> hidden;  // gen_pos -> final normed hidden row
  std::map<int32_t, int32_t> token;              // gen_pos -> fed token
  std::map<int64_t, Table> t_at;                 // l_before of each compressing forward -> T after the update
  std::vector<Sentence> sentences;
  Table final_t;
};

// Forwards everything to the real hooks and records what they were given.
class Probe : public SequenceHooks {
 public:
  Probe(const SkipkvConfig& c, std::shared_ptr<const SkipkvTokenSets> sets, Log* log)
      : inner_(MakeSkipkvSentenceHooks(c, std::move(sets), &penalty_)), log_(log) {}
  ~Probe() override {
    log_->sentences = inner_->tracker().sentences();
    log_->final_t = inner_->redundant().table();
    if (compressor_) compressor_->set_score_adjuster(nullptr);
  }
  void OnStart(const SequenceStart& s) override {
    log_->prompt_end = s.pad_len + static_cast<int64_t>(s.prompt.size());
    inner_->OnStart(s);
    compressor_ = s.compressor;
    compressor_->set_score_adjuster(&penalty_);
  }
  void BeforeForward(const SequenceStep& step) override {
    inner_->BeforeForward(step);
    if (step.compresses) log_->t_at[step.l_before] = penalty_.ranges();
  }
  bool WantsFinalHidden() const override { return true; }
  void OnFinalHidden(std::span<const BatchToken> rows, const float* hidden) override {
    const int d = inner_->tracker().d();
    for (size_t i = 0; i < rows.size(); ++i) {
      if (!rows[i].valid) continue;
      log_->hidden[rows[i].gen_pos].assign(hidden + i * d, hidden + (i + 1) * d);
      log_->token[rows[i].gen_pos] = rows[i].token;
    }
    inner_->OnFinalHidden(rows, hidden);
  }
  void OnToken(int32_t token, std::string_view text) override { inner_->OnToken(token, text); }
  std::vector<std::pair<std::string, double>> Diagnostics() const override { return inner_->Diagnostics(); }

 private:
  GenPosRangePenalty penalty_;
  std::unique_ptr<SkipkvSentenceHooks> inner_;
  KvCompressor* compressor_ = nullptr;
  Log* log_;
};

std::vector<double> UnitMean(const Log& log, int32_t b, int32_t e) {
  std::vector<double> m(log.hidden.begin()->second.size(), 0.0);
  for (int32_t p = b; p <= e; ++p) {
    const std::vector<float>& h = log.hidden.at(p);
    for (size_t x = 0; x < m.size(); ++x) m[x] += h[x];
  }
  double n = 0;
  for (double& v : m) {
    v /= e - b + 1;
    n += v * v;
  }
  for (double& v : m) v /= std::sqrt(n);
  return m;
}

double Dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

TEST(SkipkvStoriesTest, VerbatimRepeatsEnterTAndAreEvictedFirst) {
  const std::string trace = std::string(SKIPKV_BINARY_DIR) + "/steer_engine_test_trace.jsonl";
  std::filesystem::remove(trace);
  EngineOptions o;
  o.threads = 2;
  o.kv.policy = "rkv";
  o.kv.budget = 48;
  o.kv.window = 8;
  o.kv.interval = 16;
  o.kv.trace_path = trace;
  auto engine = Engine::Create(o);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  auto src = OpenModel(std::string(kEmbeddedModelPath));
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  auto tok = Tokenizer::FromModelSource(**src);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  const std::vector<std::string> dot = {"."};
  auto sets = BuildSkipkvTokenSets(**tok, dot);
  ASSERT_TRUE(sets.ok()) << sets.status().ToString();
  const int32_t delim = sets->delimiters.at(0);
  auto shared_sets = std::make_shared<const SkipkvTokenSets>(*sets);

  SkipkvConfig c;
  c.delimiters = dot;
  c.sim_threshold = kTau;
  Log log;
  EngineInternals::SetSequenceHooks(**engine, [&](size_t, const Request&) -> std::unique_ptr<SequenceHooks> {
    return std::make_unique<Probe>(c, shared_sets, &log);
  });
  Request r;
  r.prompt = "Tom had a box";
  r.max_new_tokens = 240;
  std::vector<Request> reqs = {r};
  auto res = (*engine)->Generate(reqs);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  const GenerationResult& g = (*res)[0];
  std::printf("text: %s\n", g.text.c_str());
  ASSERT_GT(g.kv.compressions, 5);

  // 1. Segmentation, recomputed from the fed tokens: spans closed at ".",
  //    at least 2 tokens (A9).
  std::vector<std::pair<int32_t, int32_t>> spans;
  int32_t open = 0, expect = 0;
  for (const auto& [pos, t] : log.token) {
    ASSERT_EQ(pos, expect++) << "every fed position once, in order";
    if (t != delim) continue;
    if (pos - open + 1 >= 2) spans.emplace_back(open, pos);
    open = pos + 1;
  }
  ASSERT_EQ(log.sentences.size(), spans.size());
  for (size_t i = 0; i < spans.size(); ++i) {
    EXPECT_EQ(log.sentences[i].b, spans[i].first);
    EXPECT_EQ(log.sentences[i].e, spans[i].second);
    EXPECT_EQ(log.sentences[i].prompt, spans[i].second < log.prompt_end);
  }

  // 2. The oracle T: at each compressing forward starting at L, every
  //    generated sentence closed before L (e < L) against every earlier one
  //    (K = 1024 exceeds their number), earlier one in with the max PSS.
  std::vector<size_t> gen;  // generated sentences (A3: prompt ones excluded)
  std::vector<std::vector<double>> emb(spans.size());
  for (size_t i = 0; i < spans.size(); ++i) {
    emb[i] = UnitMean(log, spans[i].first, spans[i].second);
    if (spans[i].second >= log.prompt_end) gen.push_back(i);
  }
  ASSERT_GT(gen.size(), 10u);
  double margin = 1;
  auto oracle_at = [&](int64_t l) {
    Table t;
    for (size_t jj = 0; jj < gen.size(); ++jj) {
      if (spans[gen[jj]].second >= l) break;
      for (size_t ii = 0; ii < jj; ++ii) {
        const double sim = Dot(emb[gen[ii]], emb[gen[jj]]);
        margin = std::min(margin, std::abs(sim - kTau));
        if (sim > kTau) {
          float& lam = t[spans[gen[ii]]];
          lam = std::max(lam, static_cast<float>(sim));
        }
      }
    }
    return t;
  };
  ASSERT_FALSE(log.t_at.empty());
  for (const auto& [l, got] : log.t_at) {
    const Table want = oracle_at(l);
    ASSERT_EQ(got.size(), want.size()) << "update at l = " << l;
    for (const auto& [span, lam] : want) {
      ASSERT_EQ(got.count(span), 1u) << span.first << ".." << span.second << " at l = " << l;
      EXPECT_NEAR(got.at(span), lam, 1e-5);
    }
  }
  EXPECT_EQ(log.final_t, log.t_at.rbegin()->second);
  EXPECT_GT(margin, 1e-4) << "a PSS within 1e-4 of τ: f32 and f64 may disagree";
  const int64_t last_update = log.t_at.rbegin()->first;

  // 3. The verbatim pairs: generated sentences with the same token ids.
  std::map<std::vector<int32_t>, std::vector<size_t>> copies;
  for (size_t i : gen) {
    std::vector<int32_t> ids;
    for (int32_t p = spans[i].first; p <= spans[i].second; ++p) ids.push_back(log.token.at(p));
    copies[ids].push_back(i);
  }
  int pairs = 0, checked = 0;
  double lowest = 1;
  for (const auto& [ids, list] : copies) {
    if (list.size() < 2) continue;
    auto text = (*engine)->Detokenize(ids);
    ASSERT_TRUE(text.ok());
    for (size_t a = 0; a + 1 < list.size(); ++a) {
      const size_t i = list[a], j = list[a + 1];
      const double pss = Dot(emb[i], emb[j]);
      ++pairs;
      lowest = std::min(lowest, pss);
      std::printf("verbatim pair \"%s\" [%d, %d] ~ [%d, %d]: PSS = %.6f\n", text->c_str(), spans[i].first,
                  spans[i].second, spans[j].first, spans[j].second, pss);
      if (spans[j].second >= last_update) continue;  // closed after the last PSS update
      // The earlier copy is in T with λ = its largest similarity with a
      // later sentence, at least this pair's.
      ASSERT_EQ(log.final_t.count(spans[i]), 1u) << text.value();
      EXPECT_GE(log.final_t.at(spans[i]), pss - 1e-5);
      ++checked;
    }
  }
  std::printf("%d verbatim pairs, lowest PSS %.6f, tau %.2f, %zu sentences, |T| = %zu\n", pairs, lowest, kTau,
              gen.size(), log.final_t.size());
  ASSERT_GE(pairs, 5);
  EXPECT_GT(lowest, kTau) << "pick τ below the lowest verbatim PSS";
  EXPECT_GE(checked, 5);

  // 4. The eviction trace: at every (compression, layer, KV head), if any
  //    penalised candidate survived then no unpenalised candidate was
  //    evicted (λ > τ dwarfs the R-KV score spread). The slots before a
  //    compression are the previous survivors plus every position fed since.
  std::ifstream in(trace);
  ASSERT_TRUE(in) << trace;
  std::map<std::pair<int, int>, std::set<int32_t>>
      before_next;  // (layer, head) -> kept after the last compression
  int64_t penalised_evicted = 0, lines = 0;
  std::string line;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    const int64_t l = j["l"];
    const int layer = j["layer"];
    ASSERT_EQ(log.t_at.count(l), 1u) << "compression at l = " << l << " without a PSS update";
    const Table& t = log.t_at.at(l);
    ++lines;
    for (size_t h = 0; h < j["kept"].size(); ++h) {
      std::set<int32_t> kept;
      for (const auto& run : j["kept"][h]) {
        for (int32_t p = run[0]; p <= static_cast<int32_t>(run[1]); ++p) kept.insert(p);
      }
      std::set<int32_t>& prev = before_next[{layer, static_cast<int>(h)}];
      std::set<int32_t> slots = prev;
      const int32_t from = prev.empty() ? 0 : *prev.rbegin() + 1;
      for (int32_t p = from; p <= l; ++p) slots.insert(p);
      ASSERT_EQ(static_cast<int64_t>(slots.size()), j["n"].get<int64_t>()) << line;
      ASSERT_EQ(static_cast<int64_t>(kept.size()), o.kv.budget);
      // Candidates: all but the most recent `window` slots.
      std::vector<int32_t> cand(slots.begin(), slots.end());
      cand.resize(cand.size() - o.kv.window);
      int64_t pen_kept = 0, pen_gone = 0, plain_gone = 0;
      for (int32_t p : cand) {
        bool pen = false;
        for (const auto& [span, lam] : t) pen |= p >= span.first && p <= span.second;
        const bool gone = !kept.count(p);
        pen_kept += pen && !gone;
        pen_gone += pen && gone;
        plain_gone += !pen && gone;
      }
      EXPECT_TRUE(pen_kept == 0 || plain_gone == 0)
          << "l = " << l << " layer " << layer << " head " << h << ": " << pen_kept
          << " penalised slots kept while " << plain_gone << " unpenalised were evicted";
      penalised_evicted += pen_gone;
      prev = kept;
    }
  }
  EXPECT_EQ(lines, g.kv.compressions * (*engine)->info().n_layers);  // every layer compresses together
  std::printf("%lld trace lines, %lld penalised slots evicted\n", static_cast<long long>(lines),
              static_cast<long long>(penalised_evicted));
  EXPECT_GT(penalised_evicted, 0);
}

// Padded mode (Δpad > 0): the hooks see pad rows and a prompt that starts at
// gen_pos Δpad. With no eviction (B above every length) the shorter
// request's sentences are its ragged sentences shifted by Δpad, and every
// sentence both runs put in T has the same λ.
TEST(SkipkvStoriesTest, PaddedRowSentencesAreTheRaggedOnesShifted) {
  auto sets = std::make_shared<const SkipkvTokenSets>([] {
    auto src = OpenModel(std::string(kEmbeddedModelPath));
    auto tok = Tokenizer::FromModelSource(**src);
    const std::vector<std::string> dot = {"."};
    return *BuildSkipkvTokenSets(**tok, dot);
  }());
  SkipkvConfig c;
  c.delimiters = {"."};
  c.sim_threshold = 0.9f;
  std::vector<Log> logs(4);
  std::vector<std::vector<int32_t>> tokens;
  for (PadPolicy pad : {PadPolicy::kRagged, PadPolicy::kPadded}) {
    EngineOptions o;
    o.threads = 2;
    o.kv.policy = "rkv";
    o.kv.budget = 400;  // never reached: PSS updates on the schedule, no eviction
    o.kv.interval = 16;
    o.kv.pad_policy = pad;
    auto engine = Engine::Create(o);
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    const size_t base = pad == PadPolicy::kRagged ? 0 : 2;
    EngineInternals::SetSequenceHooks(**engine, [&](size_t index, const Request&) -> std::unique_ptr<SequenceHooks> {
      return std::make_unique<Probe>(c, sets, &logs[base + index]);
    });
    std::vector<Request> reqs(2);
    reqs[0].prompt = "Tom had a box";
    reqs[1].prompt = "Once upon a time, there was a big dog named Max";
    reqs[0].max_new_tokens = reqs[1].max_new_tokens = 120;
    auto res = (*engine)->Generate(reqs);
    ASSERT_TRUE(res.ok()) << res.status().ToString();
    tokens.push_back((*res)[0].tokens);
    EXPECT_EQ((*res)[0].kv.compressions, 0);
  }
  ASSERT_EQ(tokens[0], tokens[1]);  // the same greedy story either way
  const Log &ragged = logs[0], &padded = logs[2];
  const int32_t pad = static_cast<int32_t>(padded.prompt_end - ragged.prompt_end);
  ASSERT_GT(pad, 0);
  EXPECT_EQ(padded.hidden.begin()->first, pad);  // pad rows never reach the tracker's log
  ASSERT_EQ(padded.sentences.size(), ragged.sentences.size());
  ASSERT_GT(ragged.sentences.size(), 5u);
  for (size_t i = 0; i < ragged.sentences.size(); ++i) {
    EXPECT_EQ(padded.sentences[i].b, ragged.sentences[i].b + pad);
    EXPECT_EQ(padded.sentences[i].e, ragged.sentences[i].e + pad);
    EXPECT_EQ(padded.sentences[i].prompt, ragged.sentences[i].prompt);
  }
  int common = 0;
  for (const auto& [span, lam] : ragged.final_t) {
    auto it = padded.final_t.find({span.first + pad, span.second + pad});
    if (it == padded.final_t.end()) continue;
    ++common;
    EXPECT_NEAR(it->second, lam, 1e-4);
  }
  EXPECT_GT(common, 0);
}

}  // namespace
}  // namespace skipkv
