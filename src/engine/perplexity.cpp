// Chunked perplexity (llama.cpp `perplexity` style, all window tokens
// scored): the text's tokens are cut into consecutive windows of ctx tokens;
// in each window token i+1 is scored by −log softmax(logits_i)[token_{i+1}]
// for i in [0, ctx − 1), with a full KV cache. Several windows run in one
// forward (each its own sequence), fed in chunks so the logits buffer stays
// bounded whatever the vocabulary.
#include <chrono>
#include <cmath>
#include <string>

#include "engine/engine_impl.h"

namespace skipkv {
namespace {

// Rows of logits one forward may produce: 512 rows × 152k vocab × 4 bytes is
// about 300 MB for Qwen-sized vocabularies.
constexpr int64_t kMaxLogitRows = 512;

// log(sum(exp(row))) − row[target], in double for stability.
double TokenNll(const float* row, int vocab, int32_t target) {
  float mx = row[0];
  for (int i = 1; i < vocab; ++i) mx = std::max(mx, row[i]);
  double sum = 0.0;
  for (int i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(row[i]) - mx);
  return std::log(sum) + mx - row[target];
}

}  // namespace

StatusOr<PerplexityResult> Engine::Impl::Perplexity(const std::string& text, const PerplexityOptions& o,
                                                    const PerplexityCallback& progress) {
  if (o.ctx < 2) return InvalidArgument("perplexity: ctx must be >= 2, got " + std::to_string(o.ctx));
  if (o.ctx > n_ctx) {
    return InvalidArgument("perplexity: ctx " + std::to_string(o.ctx) + " exceeds the context length " +
                           std::to_string(n_ctx));
  }
  if (o.batch < 1) return InvalidArgument("perplexity: batch must be >= 1, got " + std::to_string(o.batch));
  if (o.max_windows < 0) return InvalidArgument("perplexity: max_windows must be >= 0");
  EncodeOptions eo;
  eo.add_special = o.add_bos;
  const std::vector<int32_t> tokens = tokenizer->Encode(text, eo);
  int64_t n_windows = static_cast<int64_t>(tokens.size()) / o.ctx;
  if (n_windows == 0) {
    return InvalidArgument("perplexity: the text has " + std::to_string(tokens.size()) +
                           " tokens, fewer than one window of ctx = " + std::to_string(o.ctx) +
                           " (use a longer text or a smaller --ctx)");
  }
  if (o.max_windows > 0) n_windows = std::min(n_windows, o.max_windows);
  const int32_t bos = tokenizer->bos();
  const int vocab = model->config().vocab_size;

  PerplexityResult res;
  res.text_tokens = static_cast<int64_t>(tokens.size());
  res.windows = n_windows;
  double sum = 0.0, sum_sq = 0.0;
  const auto t0 = std::chrono::steady_clock::now();
  const KvCacheShape shape = model->KvShape(options.kv_type);

  for (int64_t w0 = 0; w0 < n_windows; w0 += o.batch) {
    const int64_t group = std::min<int64_t>(o.batch, n_windows - w0);
    std::vector<std::vector<int32_t>> win(group);
    std::vector<std::unique_ptr<SequenceKvCache>> caches(group);
    std::vector<double> win_sum(group, 0.0);
    for (int64_t g = 0; g < group; ++g) {
      const auto begin = tokens.begin() + (w0 + g) * o.ctx;
      win[g].assign(begin, begin + o.ctx);
      if (o.add_bos && bos != kNoToken) win[g][0] = bos;  // every window starts like a document
      caches[g] = std::make_unique<SequenceKvCache>(shape, o.ctx, o.ctx);
    }
    std::vector<int32_t> pos(o.ctx);
    for (int64_t i = 0; i < o.ctx; ++i) pos[i] = static_cast<int32_t>(i);
    const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(options.n_ubatch, kMaxLogitRows / group));
    for (int64_t c0 = 0; c0 < o.ctx; c0 += chunk) {
      const int64_t n = std::min(chunk, o.ctx - c0);
      std::vector<SequenceInput> in(group);
      for (int64_t g = 0; g < group; ++g) {
        in[g].cache = caches[g].get();
        in[g].tokens = std::span<const int32_t>(win[g]).subspan(c0, n);
        in[g].pos = std::span<const int32_t>(pos).subspan(c0, n);
        in[g].logits = LogitsMode::kAll;
      }
      ForwardBatch batch;
      batch.seqs = in;
      StatusOr<ForwardOutput> out = forward->Run(batch, *pool);
      if (!out.ok()) return out.status().WithContext("perplexity forward");
      for (int64_t g = 0; g < group; ++g) {
        for (int64_t i = 0; i < n; ++i) {
          const int64_t t = c0 + i;  // logits of token t predict token t + 1
          if (t + 1 >= o.ctx) break;
          const double nll = TokenNll(out->Row(out->seq_first_row[g] + i), vocab, win[g][t + 1]);
          win_sum[g] += nll;
          sum += nll;
          sum_sq += nll * nll;
          ++res.tokens_scored;
        }
      }
    }
    for (int64_t g = 0; g < group; ++g) res.window_ppl.push_back(std::exp(win_sum[g] / (o.ctx - 1)));
    if (progress) {
      PerplexityProgress p;
      p.windows_done = w0 + group;
      p.windows_total = n_windows;
      p.tokens_scored = res.tokens_scored;
      p.ppl_so_far = std::exp(sum / res.tokens_scored);
      p.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      p.eta_s = p.elapsed_s / p.windows_done * (n_windows - p.windows_done);
      progress(p);
    }
  }
  const double n = static_cast<double>(res.tokens_scored);
  res.mean_nll = sum / n;
  const double var = n > 1 ? std::max(0.0, (sum_sq / n - res.mean_nll * res.mean_nll) * n / (n - 1)) : 0.0;
  res.nll_stddev = std::sqrt(var / n);  // standard error of the mean
  res.ppl = std::exp(res.mean_nll);
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace skipkv
