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
#include "testbed_refs.h"
#include "io/model_source.h"
#include "io/model_writer.h"
#include "model/forward.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace skipkv {
namespace {

const std::string kDir = std::string(SKIPKV_TEST_DATA_DIR) + "/testbed_tiny";
using testbed_refs::CheckModel;
using testbed_refs::ReadRefs;
using testbed_refs::RefSeq;

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

TEST(TestbedTiny, EngineMatchesTrainerFromHfDirectory) {
  const auto refs = ReadRefs(kDir + "/refs.txt");
  ASSERT_EQ(refs.size(), 2u);
  CheckModel(kDir, refs, "hf", /*tied=*/true);
}

TEST(TestbedTiny, EngineMatchesTrainerFromConvertedGguf) {
  const auto refs = ReadRefs(kDir + "/refs.txt");
  ASSERT_EQ(refs.size(), 2u);
  auto hf = OpenModel(kDir);
  ASSERT_TRUE(hf.ok()) << hf.status().ToString();
  const std::string gguf = ConvertToGguf(**hf);
  CheckModel(gguf, refs, "gguf", /*tied=*/true);
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
