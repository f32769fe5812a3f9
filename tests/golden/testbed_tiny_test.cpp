// Golden test: the testbed trainer (tools/testbed/qwen2.py, PyTorch) and the engine compute the same
// function. tests/data/testbed_tiny holds a tiny random-weight Qwen2 model written by the trainer's own
// exporter (HF directory: tied embeddings, GQA 4/2, q/k/v biases, the testbed byte-level BPE) and
// PyTorch's logits for two generated problems (tools/testbed/make_golden.py). The engine must
//   - tokenize the problem text to the trainer's ids, from the HF directory and from a GGUF made by the
//     project's converter (gpt2 tokenizer metadata, pre-tokenizer qwen2), and
//   - reproduce the reference logits (f32 KV, one prefill with all logits) within 1e-4, from both.
// A wrong causal mask, RoPE layout or bias handling in either implementation fails this.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "io/hf_vocab.h"
#include "io/model_source.h"
#include "io/model_writer.h"
#include "model/forward.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace skipkv {
namespace {

const std::string kDir = std::string(SKIPKV_TEST_DATA_DIR) + "/testbed_tiny";

struct RefSeq {
  std::string text;
  std::vector<int32_t> ids;
  std::vector<std::pair<int, std::vector<float>>> logits;  // (position, all vocab logits)
};

std::string FromHex(const std::string& h) {
  std::string out;
  for (size_t i = 0; i + 1 < h.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16)));
  return out;
}

std::vector<RefSeq> ReadRefs() {
  std::ifstream f(kDir + "/refs.txt");
  EXPECT_TRUE(f.good()) << "cannot open " << kDir << "/refs.txt";
  std::vector<RefSeq> out;
  std::string line;
  while (std::getline(f, line)) {
    std::istringstream s(line);
    std::string key;
    s >> key;
    if (key == "text") {
      std::string hex;
      s >> hex;
      out.push_back({FromHex(hex), {}, {}});
    } else if (key == "ids") {
      int32_t id;
      while (s >> id) out.back().ids.push_back(id);
    } else if (key == "pos") {
      int p;
      s >> p;
      std::vector<float> v;
      float x;
      while (s >> x) v.push_back(x);
      out.back().logits.emplace_back(p, std::move(v));
    } else {
      ADD_FAILURE() << "refs.txt: unexpected line key '" << key << "'";
    }
  }
  return out;
}

// The GGUF the converter would write: tensors as they are, tokenizer.json as gpt2 metadata (pre qwen2).
std::string ConvertToGguf(const ModelSource& hf) {
  auto src = OpenModel(kDir);
  EXPECT_TRUE(src.ok()) << src.status().ToString();
  Gpt2VocabOptions vo;
  vo.pre = "qwen2";
  vo.vocab_size = *(*src)->metadata.GetIntOr("qwen2.vocab_size", 0);
  const Status st = AddGpt2TokenizerMetadata(hf.tokenizer_json_path, vo, &(*src)->metadata);
  EXPECT_TRUE(st.ok()) << st.ToString();
  const std::string path =
      (std::filesystem::temp_directory_path() / ("testbed_tiny_" + std::to_string(::getpid()) + ".gguf"))
          .string();
  const Status w = WriteModelAsGguf(**src, path, {});
  EXPECT_TRUE(w.ok()) << w.ToString();
  return path;
}

void CheckModel(const std::string& path, const std::vector<RefSeq>& refs, const char* name) {
  auto src = OpenModel(path);
  ASSERT_TRUE(src.ok()) << name << ": " << src.status().ToString();
  std::shared_ptr<const ModelSource> source(std::move(src).value());
  auto tok = Tokenizer::FromModelSource(*source);
  ASSERT_TRUE(tok.ok()) << name << ": " << tok.status().ToString();
  EXPECT_EQ((*tok)->model(), TokenizerModel::kByteLevelBpe) << name;
  auto m = Model::Load(source);
  ASSERT_TRUE(m.ok()) << name << ": " << m.status().ToString();
  const Model& model = **m;
  EXPECT_TRUE(model.config().tied_embeddings) << name;
  EXPECT_TRUE(model.config().qkv_bias) << name;
  ThreadPool pool(2);
  double worst = 0;
  for (const RefSeq& r : refs) {
    EXPECT_EQ((*tok)->Encode(r.text, {.add_special = false}),
              std::vector<TokenId>(r.ids.begin(), r.ids.end()))
        << name << ": engine token ids differ from the trainer's";
    ForwardPass pass(model);
    SequenceKvCache cache(model.KvShape(KvDType::kF32), static_cast<int64_t>(r.ids.size()),
                          SequenceKvCache::kUnbounded);
    std::vector<int32_t> pos(r.ids.size());
    for (size_t i = 0; i < pos.size(); ++i) pos[i] = static_cast<int32_t>(i);
    SequenceInput in{&cache, r.ids, pos, {}, {}, LogitsMode::kAll};
    ForwardBatch b;
    b.seqs = std::span<const SequenceInput>(&in, 1);
    auto out = pass.Run(b, pool);
    ASSERT_TRUE(out.ok()) << name << ": " << out.status().ToString();
    ASSERT_EQ(out->n_rows, static_cast<int64_t>(r.ids.size()));
    for (const auto& [p, ref] : r.logits) {
      ASSERT_EQ(static_cast<int>(ref.size()), out->vocab) << name << " pos " << p;
      for (int i = 0; i < out->vocab; ++i)
        worst = std::max(worst, std::fabs(double{out->Row(p)[i]} - ref[i]));
    }
  }
  EXPECT_LE(worst, 1e-4) << name;
  std::printf("[ %s ] max |engine - PyTorch| logit %.3g\n", name, worst);
}

TEST(TestbedTiny, EngineMatchesTrainerFromHfDirectory) {
  const auto refs = ReadRefs();
  ASSERT_EQ(refs.size(), 2u);
  CheckModel(kDir, refs, "hf");
}

TEST(TestbedTiny, EngineMatchesTrainerFromConvertedGguf) {
  const auto refs = ReadRefs();
  ASSERT_EQ(refs.size(), 2u);
  auto hf = OpenModel(kDir);
  ASSERT_TRUE(hf.ok()) << hf.status().ToString();
  const std::string gguf = ConvertToGguf(**hf);
  CheckModel(gguf, refs, "gguf");
  std::filesystem::remove(gguf);
}

TEST(TestbedTiny, KeywordAndDelimiterTokensAreWhole) {
  auto src = OpenModel(kDir);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  auto tok = Tokenizer::FromModelSource(**src);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  for (const char* s : {"Wait", "Alternatively", ".\n", ".\n\n", "\n"}) {
    EXPECT_EQ((*tok)->Encode(s, {.add_special = false}).size(), 1u) << "'" << s << "' is not one token";
  }
}

}  // namespace
}  // namespace skipkv
