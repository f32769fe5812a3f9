// The forward pass against the naive reference (model_test_util.h) on
// random-weight Qwen2 and Llama models: one-shot prefill, decoding, ragged
// batches, chunked prefill, padding, hooks, the query window and the stored
// K/V. Tolerance: max |error| / max |logit| per row <= 1e-4 with f32 weights
// and f32 KV.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <numeric>

#include "io/make_model.h"
#include "kernels/amx_trap_emulator.h"
#include "kernels/ops.h"
#include "kernels/simd_internal.h"
#include "model/forward.h"
#include "model/model.h"
#include "model_test_util.h"

namespace skipkv {
namespace {

using testing::MakeTinyModel;
using testing::RefForward;
using testing::RefToken;
using testing::RefTrace;
using testing::RelErr;
using testing::TinyModel;
using testing::TinySpec;

TinySpec Qwen2Spec() { return TinySpec{}; }  // GQA 6/2, q/k/v biases, rotate-half, untied

TinySpec LlamaSpec() {
  TinySpec s;
  s.arch = "llama";
  s.d_model = 40;
  s.n_heads = 4;
  s.n_kv_heads = 2;
  s.head_dim = 12;  // != D / heads: exercises attention.key_length
  s.ffn_dim = 72;
  s.vocab = 83;
  s.eps = 1e-5f;
  s.qkv_bias = false;
  s.tied = true;
  s.seed = 7;
  return s;
}

TinySpec Llama3ScaledSpec() {
  TinySpec s = LlamaSpec();
  s.tied = false;
  s.theta = 500000.f;
  s.llama3_factor = 8.f;  // head_dim 12: one short, one blended and four long wavelengths
  s.llama3_orig_ctx = 64;
  s.seed = 11;
  return s;
}

TinySpec PartialRotarySpec() {
  TinySpec s = Qwen2Spec();
  s.rot_dim = 4;  // only the first 4 of 8 dims rotate
  s.seed = 5;
  return s;
}

// Row lengths (D, q_dim, ffn) are multiples of `block` so every matrix quantises.
TinySpec QuantSpec(DType type, int block) {
  TinySpec s = Qwen2Spec();
  s.d_model = block;
  s.n_heads = 4;
  s.n_kv_heads = 2;
  s.head_dim = block / 4;
  s.ffn_dim = 2 * block;
  s.weight_type = type;
  s.seed = 13;
  return s;
}

std::vector<RefToken> RandomSeq(const TinySpec& s, int n, uint64_t seed) {
  testing::Rng rng(seed);
  std::vector<RefToken> seq(n);
  for (int i = 0; i < n; ++i) seq[i] = {rng.Int(s.vocab), i, true};
  return seq;
}

class ForwardFixture {
 public:
  explicit ForwardFixture(const TinySpec& spec) : tiny(MakeTinyModel(spec)) { Load(tiny.source); }
  // A model from elsewhere (a file); `tiny` stays empty.
  explicit ForwardFixture(std::shared_ptr<const ModelSource> source) { Load(std::move(source)); }

  void Load(std::shared_ptr<const ModelSource> source) {
    auto m = Model::Load(std::move(source));
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    if (m.ok()) model = std::move(m).value();
    if (model) pass = std::make_unique<ForwardPass>(*model);
  }

  std::unique_ptr<SequenceKvCache> NewCache(KvDType dtype = KvDType::kF32, int window = 8) {
    // A small initial capacity makes the cache grow during the tests.
    return std::make_unique<SequenceKvCache>(model->KvShape(dtype, window), 3, SequenceKvCache::kUnbounded);
  }

  // Feeds seq[begin, end) in one call; returns the logits rows (mode kAll).
  std::vector<std::vector<float>> Feed(SequenceKvCache& cache, const std::vector<RefToken>& seq, size_t begin,
                                       size_t end, const std::vector<int32_t>* gen_pos = nullptr) {
    std::vector<int32_t> tok, pos, gp;
    std::vector<uint8_t> valid;
    for (size_t i = begin; i < end; ++i) {
      tok.push_back(seq[i].token);
      pos.push_back(seq[i].pos);
      valid.push_back(seq[i].valid ? 1 : 0);
      if (gen_pos) gp.push_back((*gen_pos)[i]);
    }
    SequenceInput in;
    in.cache = &cache;
    in.tokens = tok;
    in.pos = pos;
    in.gen_pos = gp;
    in.valid = valid;
    in.logits = LogitsMode::kAll;
    ForwardBatch b;
    b.seqs = std::span<const SequenceInput>(&in, 1);
    auto out = pass->Run(b, pool);
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    std::vector<std::vector<float>> rows;
    if (!out.ok()) return rows;
    EXPECT_EQ(out->n_rows, static_cast<int64_t>(end - begin));
    for (int64_t r = 0; r < out->n_rows; ++r) rows.emplace_back(out->Row(r), out->Row(r) + out->vocab);
    return rows;
  }

  TinyModel tiny;
  std::unique_ptr<Model> model;
  std::unique_ptr<ForwardPass> pass;
  ThreadPool pool{2};
};

// ---- Reference agreement, per architecture and weight type --------------------

struct RefCase {
  const char* name;
  TinySpec spec;
  double tol;
};

void PrintTo(const RefCase& c, std::ostream* os) { *os << c.name; }

class ReferenceTest : public ::testing::TestWithParam<RefCase> {};

TEST_P(ReferenceTest, PrefillThenDecodeMatchesNaiveForward) {
  const RefCase& c = GetParam();
  ForwardFixture f(c.spec);
  ASSERT_NE(f.model, nullptr);
  const auto seq = RandomSeq(c.spec, 30, 99);
  const RefTrace ref = RefForward(f.tiny, seq);
  auto cache = f.NewCache();

  const size_t prefill = 23;
  auto rows = f.Feed(*cache, seq, 0, prefill);
  ASSERT_EQ(rows.size(), prefill);
  double worst = 0;
  for (size_t t = 0; t < prefill; ++t) worst = std::max(worst, RelErr(rows[t].data(), ref.logits[t]));
  for (size_t t = prefill; t < seq.size(); ++t) {  // decode, one token per call
    auto r = f.Feed(*cache, seq, t, t + 1);
    ASSERT_EQ(r.size(), 1u);
    worst = std::max(worst, RelErr(r[0].data(), ref.logits[t]));
  }
  EXPECT_LE(worst, c.tol) << c.name;
  RecordProperty("max_rel_err", std::to_string(worst));
  std::printf("[ %s ] max relative logits error vs reference: %.3g\n", c.name, worst);

  // The cache holds every token's post-RoPE K and V, in order.
  const int hkv = c.spec.n_kv_heads, d = c.spec.head_dim;
  std::vector<float> row(d);
  double kerr = 0;
  for (int l = 0; l < c.spec.n_layers; ++l) {
    ASSERT_EQ(cache->size(l), static_cast<int64_t>(seq.size()));
    for (int h = 0; h < hkv; ++h) {
      for (size_t t = 0; t < seq.size(); ++t) {
        EXPECT_EQ(cache->GenPos(l, h)[t], static_cast<int32_t>(t));
        EXPECT_EQ(cache->Valid(l, h)[t], 1);
        cache->ReadK(l, h, t, row.data());
        for (int e = 0; e < d; ++e) kerr = std::max(kerr, std::fabs(double{row[e]} - ref.k[l][t][h * d + e]));
        cache->ReadV(l, h, t, row.data());
        for (int e = 0; e < d; ++e) kerr = std::max(kerr, std::fabs(double{row[e]} - ref.v[l][t][h * d + e]));
      }
    }
  }
  EXPECT_LE(kerr, 50 * c.tol);
}

INSTANTIATE_TEST_SUITE_P(
    Models, ReferenceTest,
    ::testing::Values(RefCase{"qwen2_f32", Qwen2Spec(), 1e-4}, RefCase{"llama_tied_f32", LlamaSpec(), 1e-4},
                      RefCase{"llama3_scaled_f32", Llama3ScaledSpec(), 1e-4},
                      RefCase{"qwen2_partial_rotary_f32", PartialRotarySpec(), 1e-4},
                      RefCase{"qwen2_f16_weights_bf16_norms",
                              [] {
                                TinySpec s = Qwen2Spec();
                                s.weight_type = DType::kF16;
                                s.norm_type = DType::kBF16;
                                return s;
                              }(),
                              2e-3},
                      RefCase{"llama_f16_weights_f16_norms",
                              [] {
                                TinySpec s = LlamaSpec();
                                s.weight_type = DType::kF16;
                                s.norm_type = DType::kF16;
                                return s;
                              }(),
                              2e-3},
                      // Quantised weights (the reference uses the dequantised values): the
                      // tolerance allows kernels that quantise activations too (llama.cpp-style).
                      RefCase{"qwen2_q8_0_weights", QuantSpec(DType::kQ8_0, 64), 3e-2},
                      RefCase{"qwen2_q4_0_weights", QuantSpec(DType::kQ4_0, 64), 3e-2},
                      RefCase{"qwen2_q4_K_weights", QuantSpec(DType::kQ4_K, 256), 3e-2},
                      RefCase{"qwen2_q4_K_x16_weights",
                              [] {
                                TinySpec s = QuantSpec(DType::kQ4_K, 256);
                                s.interleave = true;
                                return s;
                              }(),
                              3e-2},
                      RefCase{"qwen2_q8_0_x16_weights",
                              [] {
                                TinySpec s = QuantSpec(DType::kQ8_0, 64);
                                s.interleave = true;
                                return s;
                              }(),
                              3e-2},
                      RefCase{"qwen2_q6_K_weights", QuantSpec(DType::kQ6_K, 256), 3e-2}),
    [](const ::testing::TestParamInfo<RefCase>& info) { return std::string(info.param.name); });

// The logits of two models fed the same tokens (a prefill, then one token a
// call) differ by at most `tol` relative to the largest logit.
void ExpectSameLogits(ForwardFixture& a, ForwardFixture& b, const std::vector<RefToken>& seq, size_t prefill,
                      double tol) {
  auto ca = a.NewCache(), cb = b.NewCache();
  double worst = 0;
  for (size_t begin = 0; begin < seq.size();) {
    const size_t end = begin == 0 ? prefill : begin + 1;
    const auto ra = a.Feed(*ca, seq, begin, end), rb = b.Feed(*cb, seq, begin, end);
    EXPECT_EQ(ra.size(), end - begin);
    EXPECT_EQ(rb.size(), end - begin);
    for (size_t t = 0; t < ra.size() && t < rb.size(); ++t)
      worst = std::max(worst, RelErr(ra[t].data(), rb[t]));
    begin = end;
  }
  EXPECT_LE(worst, tol);
  std::printf("max relative logits difference: %.3g\n", worst);
}

// A random tiny-llama GGUF of weight type `type` (make-model) in the temporary
// directory; its path, or "" when it could not be written.
std::string WriteTinyLlama(const char* type, uint64_t seed, const std::string& tag) {
  MakeModelOptions o;
  o.preset = "tiny-llama";
  o.shape = *LookupModelPreset("tiny-llama");
  o.type = *ParseWeightType(type);
  o.seed = seed;
  o.threads = 1;
  o.output_path = (std::filesystem::temp_directory_path() /
                   ("skipkv_" + tag + "_" + std::to_string(::getpid()) + "_" + type + ".gguf"))
                      .string();
  return MakeRandomModel(o).ok() ? o.output_path : "";
}

// InterleaveWeights on model files (Q4_K, Q8_0, Q4_K_M's mix of Q4_K and
// Q6_K, and F16 where the kernels want it): weights read into memory
// are rewritten in place (every matrix of whole 16-row groups, the token
// embedding included, whose rows GetRow then takes out of their groups);
// mapped weights are left alone. Both compute the same logits up to the
// activations' int8 quantisation (the two layouts sum in different orders, and
// a last-bit difference can move an activation to the next int8 step: the
// reference tests' 3e-2; the per-product agreement is in the kernel tests).
TEST(ModelForward, ReadWeightsAreInterleavedInPlace) {
  for (const char* type : {"q4_k", "q8_0", "q4_k_m", "f16"}) {  // f16 last: it skips where not wanted
    SCOPED_TRACE(type);
    const std::string path = WriteTinyLlama(type, 8, "x16");
    ASSERT_FALSE(path.empty());
    auto mapped = OpenModel(path, "", FileLoad::kMap);
    auto read = OpenModel(path, "", FileLoad::kRead);
    std::filesystem::remove(path);
    ASSERT_TRUE(mapped.ok() && read.ok());
    EXPECT_EQ(InterleaveWeights(**mapped), 0);
    const bool f16 = std::string(type) == "f16";
    if (!kernels::InterleavedWeightsWanted(f16 ? DType::kF16 : DType::kQ8_0)) {
      EXPECT_EQ(InterleaveWeights(**read), 0);
      GTEST_SKIP() << "the kernels want the file layout here (not x86 AVX2/AVX-512 for the int8 types, not "
                      "AVX-512 for F16, or SKIPKV_REPACK=0)";
    }
    int n = 0;
    for (const TensorView& t : (*mapped)->tensors) {
      n += CanInterleave(t.type, t.NumRows(), t.ne[0]) && kernels::InterleavedWeightsWanted(t.type);
    }
    ASSERT_GT(n, 0);
    EXPECT_EQ(InterleaveWeights(**read), n);
    if (std::string(type) == "q4_k_m") {  // its attn_v / ffn_down of some layers and output are Q6_K
      int q6 = 0;
      for (const TensorView& t : (*read)->tensors) q6 += t.type == DType::kQ6_Kx16;
      EXPECT_GT(q6, 0);
    }
    EXPECT_EQ(FileTypeOf((*read)->FindTensor("token_embd.weight")->type),
              (*mapped)->FindTensor("token_embd.weight")->type);
    EXPECT_NE((*read)->FindTensor("token_embd.weight")->type,
              (*mapped)->FindTensor("token_embd.weight")->type);
    EXPECT_NE(WeightsLoadDescription(**read).find(std::to_string(n) + " tensors interleaved"),
              std::string::npos);
    ForwardFixture a(std::shared_ptr<const ModelSource>(std::move(*mapped)));
    ForwardFixture b(std::shared_ptr<const ModelSource>(std::move(*read)));
    ASSERT_NE(a.model, nullptr);
    ASSERT_NE(b.model, nullptr);
    TinySpec vocab_only;
    vocab_only.vocab = a.model->config().vocab_size;
    ExpectSameLogits(a, b, RandomSeq(vocab_only, 12, 32), 9, 3e-2);
  }
}

// The forward pass over interleaved weights with the AMX tile kernels on
// gives the logits of AMX off bit for bit: a 66-token prefill runs on tiles
// (Q4_K and Q4_K_M's Q6_K from 64 tokens, Q8_0 from 8), a 9-token chunk on them for Q8_0, the
// single tokens between on the VNNI kernel (kernels/matmul_amx_x16_x86.cpp).
// `set_tiles` turns the tiles on and says whether it could.
void ExpectTilesGiveTheLogitsOfAmxOff(const std::function<bool()>& set_tiles, bool trapped) {
  using kernels::internal::AmxMode;
  for (const char* type : {"q4_k", "q8_0", "q4_k_m"}) {
    SCOPED_TRACE(type);
    const std::string path = WriteTinyLlama(type, 12, "amx");
    ASSERT_FALSE(path.empty());
    auto read = OpenModel(path, "", FileLoad::kRead);
    std::filesystem::remove(path);
    ASSERT_TRUE(read.ok());
    if (!kernels::InterleavedWeightsWanted(DType::kQ8_0))
      GTEST_SKIP() << "the kernels want the file layout here";
    ASSERT_GT(InterleaveWeights(**read), 0);
    ForwardFixture f(std::shared_ptr<const ModelSource>(std::move(*read)));
    ASSERT_NE(f.model, nullptr);
    TinySpec vocab_only;
    vocab_only.vocab = f.model->config().vocab_size;
    const auto seq = RandomSeq(vocab_only, 78, 33);
    const auto run = [&](bool tiles) {
      EXPECT_TRUE(tiles ? set_tiles() : kernels::internal::SetAmxModeForTesting(AmxMode::kOff, nullptr));
      auto cache = f.NewCache();
      auto rows = f.Feed(*cache, seq, 0, 66);
      for (size_t t = 66; t < 69; ++t) {
        auto r = f.Feed(*cache, seq, t, t + 1);
        rows.insert(rows.end(), r.begin(), r.end());
      }
      auto r = f.Feed(*cache, seq, 69, 78);
      rows.insert(rows.end(), r.begin(), r.end());
      kernels::internal::ResetAmxModeForTesting();
      return rows;
    };
    const auto off = run(false);
    const int64_t calls = kernels::internal::X16AmxRowsCalls();
    const int64_t emulated = testing::AmxInstructionsEmulated();
    const auto tiles = run(true);
    EXPECT_GT(kernels::internal::X16AmxRowsCalls(), calls) << "the tiles did not run";
    if (trapped) {
      EXPECT_GT(testing::AmxInstructionsEmulated(), emulated) << "no tile instruction was emulated";
    }
    ASSERT_EQ(off.size(), tiles.size());
    for (size_t t = 0; t < off.size(); ++t) {
      ASSERT_EQ(off[t].size(), tiles[t].size());
      EXPECT_EQ(0, std::memcmp(off[t].data(), tiles[t].data(), off[t].size() * sizeof(float)))
          << "token " << t;
    }
  }
}

// On software tiles: TDPBSSD's definition in scalar code, where the CPU has AVX-512.
TEST(ModelForward, InterleavedWeightsOnTilesGiveTheSameLogits) {
  using kernels::internal::AmxMode;
  std::string why;
  if (!kernels::internal::SetAmxModeForTesting(AmxMode::kSoftware, &why)) {
    GTEST_SKIP() << "not run here: " << why;
  }
  kernels::internal::ResetAmxModeForTesting();
  ExpectTilesGiveTheLogitsOfAmxOff(
      [] { return kernels::internal::SetAmxModeForTesting(AmxMode::kSoftware, nullptr); }, false);
}

// On the tile instructions: the CPU's where AMX runs, else trapped and
// emulated (kernels/amx_trap_emulator.h).
TEST(ModelForward, InterleavedWeightsOnTileInstructionsGiveTheSameLogits) {
  using kernels::internal::AmxMode;
  std::string why;
  if (kernels::internal::SetAmxModeForTesting(AmxMode::kTiles, nullptr)) {
    kernels::internal::ResetAmxModeForTesting();
    ExpectTilesGiveTheLogitsOfAmxOff(
        [] { return kernels::internal::SetAmxModeForTesting(AmxMode::kTiles, nullptr); }, false);
    return;
  }
  if (!testing::InstallAmxTrapEmulator(&why) ||
      !kernels::internal::ForceAmxTileInstructionsForTesting(&why)) {
    GTEST_SKIP() << "not run here: " << why;
  }
  kernels::internal::ResetAmxModeForTesting();
  ExpectTilesGiveTheLogitsOfAmxOff(
      [] { return kernels::internal::ForceAmxTileInstructionsForTesting(nullptr); }, true);
}

// ---- Equivalences ---------------------------------------------------------------

TEST(ModelForward, ChunkedPrefillEqualsOneShot) {
  ForwardFixture f(Qwen2Spec());
  ASSERT_NE(f.model, nullptr);
  const auto seq = RandomSeq(f.tiny.spec, 29, 3);
  auto one = f.NewCache();
  const auto full = f.Feed(*one, seq, 0, seq.size());
  const RefTrace ref = RefForward(f.tiny, seq);
  for (int chunk : {1, 3, 7}) {
    auto cache = f.NewCache();
    std::vector<std::vector<float>> rows;
    for (size_t b = 0; b < seq.size(); b += chunk) {
      auto r = f.Feed(*cache, seq, b, std::min(seq.size(), b + chunk));
      rows.insert(rows.end(), r.begin(), r.end());
    }
    ASSERT_EQ(rows.size(), seq.size());
    for (size_t t = 0; t < seq.size(); ++t) {
      EXPECT_LE(RelErr(rows[t].data(), std::vector<float>(full[t])), 1e-5)
          << "chunk " << chunk << " token " << t;
      EXPECT_LE(RelErr(rows[t].data(), ref.logits[t]), 1e-4) << "chunk " << chunk << " token " << t;
    }
  }
}

TEST(ModelForward, RaggedBatchOfFiveEqualsEachAlone) {
  ForwardFixture f(Qwen2Spec());
  ASSERT_NE(f.model, nullptr);
  const TinySpec& s = f.tiny.spec;
  // Two steps: a mixed prefill (different lengths), then a mix of decode
  // tokens and prefill chunks, as a continuous-batching engine would send.
  const std::vector<int> first = {7, 1, 12, 3, 5}, second = {1, 4, 1, 9, 2};
  std::vector<std::vector<RefToken>> seqs;
  std::vector<std::unique_ptr<SequenceKvCache>> batch_caches, solo_caches;
  for (int i = 0; i < 5; ++i) {
    seqs.push_back(RandomSeq(s, first[i] + second[i], 100 + i));
    batch_caches.push_back(f.NewCache());
    solo_caches.push_back(f.NewCache());
  }
  size_t begin[5] = {0, 0, 0, 0, 0};
  for (const auto& step : {first, second}) {
    // Batched call: sequence i contributes step[i] tokens; kAll except seq 1 (kLast) and seq 3 (kNone).
    std::vector<std::vector<int32_t>> tok(5), pos(5);
    std::vector<SequenceInput> in(5);
    const LogitsMode modes[5] = {LogitsMode::kAll, LogitsMode::kLast, LogitsMode::kAll, LogitsMode::kNone,
                                 LogitsMode::kAll};
    for (int i = 0; i < 5; ++i) {
      for (int j = 0; j < step[i]; ++j) {
        tok[i].push_back(seqs[i][begin[i] + j].token);
        pos[i].push_back(seqs[i][begin[i] + j].pos);
      }
      in[i].cache = batch_caches[i].get();
      in[i].tokens = tok[i];
      in[i].pos = pos[i];
      in[i].logits = modes[i];
    }
    ForwardBatch b;
    b.seqs = in;
    // A second ForwardPass on the same Model: its scratch and logits are its own.
    ForwardPass batch_pass(*f.model);
    auto out = batch_pass.Run(b, f.pool);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    ASSERT_EQ(out->n_rows, NumLogitRows(in));
    for (int i = 0; i < 5; ++i) {
      const auto solo = f.Feed(*solo_caches[i], seqs[i], begin[i], begin[i] + step[i]);
      const RefTrace ref =
          RefForward(f.tiny, std::vector<RefToken>(seqs[i].begin(), seqs[i].begin() + begin[i] + step[i]));
      const int64_t rows = out->seq_num_rows[i];
      EXPECT_EQ(rows, modes[i] == LogitsMode::kAll ? step[i] : modes[i] == LogitsMode::kLast ? 1 : 0);
      for (int64_t r = 0; r < rows; ++r) {
        const size_t j = step[i] - rows + r;  // token index within the step
        const float* got = out->Row(out->seq_first_row[i] + r);
        EXPECT_LE(RelErr(got, solo[j]), 1e-5) << "seq " << i << " token " << j;
        EXPECT_LE(RelErr(got, ref.logits[begin[i] + j]), 1e-4) << "seq " << i << " token " << j;
      }
      if (modes[i] != LogitsMode::kNone) {
        EXPECT_EQ(out->LastRow(i), out->Row(out->seq_first_row[i] + rows - 1));
      } else {
        EXPECT_EQ(out->LastRow(i), nullptr);
      }
      begin[i] += step[i];
    }
  }
  for (int i = 0; i < 5; ++i) {
    for (int l = 0; l < s.n_layers; ++l) EXPECT_EQ(batch_caches[i]->size(l), first[i] + second[i]);
  }
}

TEST(ModelForward, CallerLogitsBufferIsFilled) {
  ForwardFixture f(LlamaSpec());
  ASSERT_NE(f.model, nullptr);
  const auto seq = RandomSeq(f.tiny.spec, 6, 1);
  std::vector<int32_t> tok, pos;
  for (const auto& t : seq) {
    tok.push_back(t.token);
    pos.push_back(t.pos);
  }
  auto cache = f.NewCache();
  SequenceInput in;
  in.cache = cache.get();
  in.tokens = tok;
  in.pos = pos;
  in.logits = LogitsMode::kLast;
  std::vector<float> buf(f.tiny.spec.vocab, -1234.f);
  ForwardBatch b;
  b.seqs = std::span<const SequenceInput>(&in, 1);
  b.logits = buf.data();
  auto out = f.pass->Run(b, f.pool);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->logits, buf.data());
  const RefTrace ref = RefForward(f.tiny, seq);
  EXPECT_LE(RelErr(buf.data(), ref.logits.back()), 1e-4);
}

// Paper-faithful padded mode: leading padding slots (valid = false) hold K/V
// but are masked, so the real tokens see exactly what an unpadded sequence sees.
TEST(ModelForward, LeadingPaddingGivesUnpaddedLogits) {
  ForwardFixture f(Qwen2Spec());
  ASSERT_NE(f.model, nullptr);
  const int n_pad = 4, n = 11;
  const auto real = RandomSeq(f.tiny.spec, n, 21);
  const RefTrace ref = RefForward(f.tiny, real);

  // (a) Pads at gen_pos 0..3, real tokens keep RoPE positions 0..n-1 with
  //     gen_pos n_pad + i: identical maths, identical logits.
  // (b) Pads shift the RoPE positions too (pos = gen_pos): RoPE is relative,
  //     so the logits agree up to rounding.
  for (bool shift_positions : {false, true}) {
    std::vector<RefToken> padded;
    std::vector<int32_t> gen_pos;
    for (int i = 0; i < n_pad; ++i) {
      padded.push_back({0, i, false});
      gen_pos.push_back(i);
    }
    for (int i = 0; i < n; ++i) {
      padded.push_back({real[i].token, shift_positions ? n_pad + i : i, true});
      gen_pos.push_back(n_pad + i);
    }
    auto cache = f.NewCache();
    auto rows = f.Feed(*cache, padded, 0, n_pad + 3, &gen_pos);  // prompt with pads
    for (size_t t = n_pad + 3; t < padded.size(); ++t) {         // then decode
      auto r = f.Feed(*cache, padded, t, t + 1, &gen_pos);
      rows.insert(rows.end(), r.begin(), r.end());
    }
    ASSERT_EQ(rows.size(), padded.size());
    for (int i = 0; i < n; ++i) {
      EXPECT_LE(RelErr(rows[n_pad + i].data(), ref.logits[i]), shift_positions ? 2e-4 : 1e-4)
          << "shift " << shift_positions << " token " << i;
    }
    for (int l = 0; l < f.tiny.spec.n_layers; ++l) {
      for (int h = 0; h < f.tiny.spec.n_kv_heads; ++h) {
        for (int i = 0; i < n_pad + n; ++i) {
          EXPECT_EQ(cache->Valid(l, h)[i], i >= n_pad ? 1 : 0);
          EXPECT_EQ(cache->GenPos(l, h)[i], i);
        }
      }
    }
  }
}

TEST(ModelForward, F16KvCloseToF32Kv) {
  ForwardFixture f(Qwen2Spec());
  ASSERT_NE(f.model, nullptr);
  const auto seq = RandomSeq(f.tiny.spec, 20, 8);
  auto c32 = f.NewCache(KvDType::kF32);
  auto c16 = f.NewCache(KvDType::kF16);
  const auto a = f.Feed(*c32, seq, 0, seq.size());
  const auto b = f.Feed(*c16, seq, 0, seq.size());
  double worst = 0;
  for (size_t t = 0; t < seq.size(); ++t) worst = std::max(worst, RelErr(b[t].data(), a[t]));
  EXPECT_GT(worst, 0.0);   // f16 storage really rounds
  EXPECT_LE(worst, 5e-3);  // ... by about f16's precision
}

// ---- Query window -------------------------------------------------------------------

TEST(ModelForward, QueryWindowHoldsLastQueriesAcrossChunks) {
  ForwardFixture f(Qwen2Spec());
  ASSERT_NE(f.model, nullptr);
  const TinySpec& s = f.tiny.spec;
  const int window = 4;
  const auto seq = RandomSeq(s, 13, 4);
  const RefTrace ref = RefForward(f.tiny, seq);
  auto cache = f.NewCache(KvDType::kF32, window);
  const int H = s.n_heads, d = s.head_dim;
  std::vector<float> got(static_cast<size_t>(H) * window * d);
  // Chunks 2, 5, 1, 3, 2: the window must always hold the last min(total, 4) queries.
  size_t b = 0;
  for (int chunk : {2, 5, 1, 3, 2}) {
    f.Feed(*cache, seq, b, b + chunk);
    b += chunk;
    const int count = static_cast<int>(std::min<size_t>(b, window));
    for (int l = 0; l < s.n_layers; ++l) {
      ASSERT_EQ(cache->QueryWindowCount(l), count);
      cache->CopyQueryWindow(l, got.data());
      double err = 0;
      for (int h = 0; h < H; ++h) {
        for (int w = 0; w < count; ++w) {
          const size_t t = b - count + w;
          for (int e = 0; e < d; ++e) {
            err = std::max(err, std::fabs(double{got[(h * count + w) * d + e]} - ref.q[l][t][h * d + e]));
          }
        }
      }
      EXPECT_LE(err, 1e-4) << "layer " << l << " after " << b << " tokens";
    }
  }
}

// ---- Hooks --------------------------------------------------------------------------

TEST(ModelForward, HooksSeeShapesAndResidualEditMatchesReference) {
  ForwardFixture f(Qwen2Spec());
  ASSERT_NE(f.model, nullptr);
  const TinySpec& s = f.tiny.spec;
  const int D = s.d_model, steer_layer = 1;
  const auto seq_a = RandomSeq(s, 9, 31), seq_b = RandomSeq(s, 5, 32);
  testing::Rng rng(77);
  std::vector<float> u(D);
  for (float& x : u) x = rng.Uniform(-0.5f, 0.5f);

  auto ca = f.NewCache(), cb = f.NewCache();
  std::vector<int32_t> ta, pa, tb, pb;
  for (const auto& t : seq_a) ta.push_back(t.token), pa.push_back(t.pos);
  for (const auto& t : seq_b) tb.push_back(t.token), pb.push_back(t.pos);
  SequenceInput in[2];
  in[0] = {ca.get(), ta, pa, {}, {}, LogitsMode::kAll};
  in[1] = {cb.get(), tb, pb, {}, {}, LogitsMode::kAll};

  std::vector<int> layers_seen;
  int final_calls = 0;
  std::vector<std::vector<float>> final_rows, last_layer_rows;
  ForwardBatch b;
  b.seqs = in;
  // Steering: add u to the last token of sequence 0 at the input of layer 1.
  b.residual_hook = [&](int layer, std::span<const BatchToken> toks, float* hidden) {
    layers_seen.push_back(layer);
    ASSERT_EQ(toks.size(), 14u);
    EXPECT_EQ(toks[0].seq, 0);
    EXPECT_EQ(toks[9].seq, 1);
    EXPECT_EQ(toks[9].index, 0);
    EXPECT_TRUE(toks[8].last);
    EXPECT_EQ(toks[13].pos, 4);
    if (layer == s.n_layers) {
      for (size_t t = 0; t < toks.size(); ++t)
        last_layer_rows.emplace_back(hidden + t * D, hidden + (t + 1) * D);
    }
    if (layer != steer_layer) return;
    for (size_t t = 0; t < toks.size(); ++t) {
      if (toks[t].seq == 0 && toks[t].last) {
        for (int i = 0; i < D; ++i) hidden[t * D + i] += u[i];
      }
    }
  };
  b.final_hidden_hook = [&](std::span<const BatchToken> toks, const float* hidden) {
    ++final_calls;
    ASSERT_EQ(toks.size(), 14u);
    for (size_t t = 0; t < toks.size(); ++t) final_rows.emplace_back(hidden + t * D, hidden + (t + 1) * D);
  };
  auto out = f.pass->Run(b, f.pool);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  // The input of every layer, then the last layer's output.
  EXPECT_EQ(layers_seen, std::vector<int>({0, 1, 2, 3}));
  ASSERT_EQ(s.n_layers, 3);
  EXPECT_EQ(final_calls, 1);

  auto steer = [&](int layer, int t, std::vector<float>& x) {
    if (layer == steer_layer && t == 8) {
      for (int i = 0; i < D; ++i) x[i] += u[i];
    }
  };
  const RefTrace ref_a = RefForward(f.tiny, seq_a, steer);
  const RefTrace plain_a = RefForward(f.tiny, seq_a);
  const RefTrace ref_b = RefForward(f.tiny, seq_b);
  for (int t = 0; t < 9; ++t) {
    EXPECT_LE(RelErr(out->Row(t), ref_a.logits[t]), 1e-4) << t;
    EXPECT_LE(RelErr(final_rows[t].data(), ref_a.final_hidden[t]), 1e-4) << t;
    EXPECT_LE(RelErr(last_layer_rows[t].data(), ref_a.final_residual[t]), 1e-4) << t;
  }
  // The edit changed the steered token only (earlier tokens cannot see it).
  EXPECT_GT(RelErr(out->Row(8), plain_a.logits[8]), 1e-3);
  EXPECT_LE(RelErr(out->Row(7), plain_a.logits[7]), 1e-4);
  for (int t = 0; t < 5; ++t) {
    EXPECT_LE(RelErr(out->Row(9 + t), ref_b.logits[t]), 1e-4) << t;
    EXPECT_LE(RelErr(final_rows[9 + t].data(), ref_b.final_hidden[t]), 1e-4) << t;
    EXPECT_LE(RelErr(last_layer_rows[9 + t].data(), ref_b.final_residual[t]), 1e-4) << t;
  }

  // The steered K/V stay in the cache: decoding one more token of sequence 0
  // (no hook) matches the reference that steered token 8 at layer 1.
  auto seq_a2 = seq_a;
  seq_a2.push_back({3, 9, true});
  const RefTrace ref_a2 = RefForward(f.tiny, seq_a2, steer);
  const auto next = f.Feed(*ca, seq_a2, 9, 10);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_LE(RelErr(next[0].data(), ref_a2.logits[9]), 1e-4);
}

// An edit of the last layer's output (hook layer n_layers, llama.cpp's last
// control-vector direction) reaches the final norm and the logits exactly as
// the reference that edits x before its final norm.
TEST(ModelForward, LastLayerOutputEditMatchesReference) {
  ForwardFixture f(Qwen2Spec());
  ASSERT_NE(f.model, nullptr);
  const TinySpec& s = f.tiny.spec;
  const int D = s.d_model;
  const auto seq = RandomSeq(s, 7, 41);
  testing::Rng rng(78);
  std::vector<float> u(D);
  for (float& x : u) x = rng.Uniform(-2.0f, 2.0f);
  auto cache = f.NewCache();
  std::vector<int32_t> tok, pos;
  for (const auto& t : seq) tok.push_back(t.token), pos.push_back(t.pos);
  SequenceInput in[1];
  in[0] = {cache.get(), tok, pos, {}, {}, LogitsMode::kAll};
  ForwardBatch b;
  b.seqs = in;
  b.residual_hook = [&](int layer, std::span<const BatchToken> toks, float* hidden) {
    if (layer != s.n_layers) return;
    for (int i = 0; i < D; ++i) hidden[6 * D + i] += u[i];  // the last token
  };
  auto out = f.pass->Run(b, f.pool);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const RefTrace ref = RefForward(f.tiny, seq, [&](int layer, int t, std::vector<float>& x) {
    if (layer == s.n_layers && t == 6) {
      for (int i = 0; i < D; ++i) x[i] += u[i];
    }
  });
  const RefTrace plain = RefForward(f.tiny, seq);
  for (int t = 0; t < 7; ++t) EXPECT_LE(RelErr(out->Row(t), ref.logits[t]), 1e-4) << t;
  EXPECT_GT(RelErr(out->Row(6), plain.logits[6]), 1e-3);  // the edit did change the last row
}

TEST(ModelForward, AttentionScoresAccumulateWhenTracked) {
  ForwardFixture f(Qwen2Spec());
  ASSERT_NE(f.model, nullptr);
  const TinySpec& s = f.tiny.spec;
  SequenceKvCache cache(f.model->KvShape(KvDType::kF32, 8, /*track_attention=*/true), 4,
                        SequenceKvCache::kUnbounded);
  const auto seq = RandomSeq(s, 6, 2);
  f.Feed(cache, seq, 0, seq.size());
  // Every query row's probabilities sum to one per query head, so per KV head
  // the accumulated mass is rows * group size.
  const double group = s.n_heads / s.n_kv_heads;
  for (int l = 0; l < s.n_layers; ++l) {
    for (int h = 0; h < s.n_kv_heads; ++h) {
      const float* a = cache.AttentionScore(l, h);
      ASSERT_NE(a, nullptr);
      double total = 0;
      for (int i = 0; i < 6; ++i) total += a[i];
      EXPECT_NEAR(total, 6 * group, 1e-4);
    }
  }
}

TEST(ModelForward, FillSyntheticKvAppendsValidSlotsAfterExisting) {
  ForwardFixture f(LlamaSpec());
  ASSERT_NE(f.model, nullptr);
  auto cache = f.NewCache(KvDType::kF16);
  const auto seq = RandomSeq(f.tiny.spec, 3, 2);
  f.Feed(*cache, seq, 0, 3);
  ASSERT_TRUE(FillSyntheticKv(*cache, 50, 42).ok());
  for (int l = 0; l < f.tiny.spec.n_layers; ++l) {
    ASSERT_EQ(cache->size(l), 53);
    for (int i = 0; i < 53; ++i) EXPECT_EQ(cache->GenPos(l, 0)[i], i);
  }
  // Decoding continues after the synthetic depth.
  std::vector<RefToken> next = {{5, 53, true}};
  const auto rows = f.Feed(*cache, next, 0, 1);
  ASSERT_EQ(rows.size(), 1u);
  for (float x : rows[0]) ASSERT_TRUE(std::isfinite(x));
  EXPECT_FALSE(FillSyntheticKv(*cache, -1, 0).ok());
}

// Results must not depend on the thread count (fixed chunking, no racing
// reductions): a mixed batch run with 1 and with 3 threads is bit-identical.
TEST(ModelForward, BitIdenticalAcrossThreadCounts) {
  const TinyModel tiny = MakeTinyModel(Qwen2Spec());
  auto model = Model::Load(tiny.source);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  std::vector<std::vector<float>> results;
  for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    ForwardPass pass(**model);
    std::vector<std::unique_ptr<SequenceKvCache>> caches;
    std::vector<std::vector<int32_t>> tok(3), pos(3);
    std::vector<SequenceInput> in(3);
    const int lens[3] = {17, 1, 6};
    for (int s = 0; s < 3; ++s) {
      caches.push_back(std::make_unique<SequenceKvCache>((*model)->KvShape(KvDType::kF16), 4,
                                                         SequenceKvCache::kUnbounded));
      for (const RefToken& t : RandomSeq(tiny.spec, lens[s], 40 + s)) {
        tok[s].push_back(t.token);
        pos[s].push_back(t.pos);
      }
      in[s] = {caches[s].get(), tok[s], pos[s], {}, {}, LogitsMode::kAll};
    }
    ForwardBatch b;
    b.seqs = in;
    auto out = pass.Run(b, pool);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    results.emplace_back(out->logits, out->logits + out->n_rows * out->vocab);
  }
  ASSERT_EQ(results[0].size(), results[1].size());
  EXPECT_EQ(0, std::memcmp(results[0].data(), results[1].data(), results[0].size() * sizeof(float)));
}

}  // namespace
}  // namespace skipkv
