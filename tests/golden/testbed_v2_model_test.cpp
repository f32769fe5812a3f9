// Golden test: testbed v2 (data/models/testbed-v2/testbed.gguf, opened by path; not embedded) computes
// what PyTorch computed from the checkpoint it was exported from. data/models/testbed-v2/refs.txt holds
// the trainer's logits on two format-4 test-split problems with their reference traces
// (tools/testbed/make_golden.py --ckpt ... --fmt 4); the engine must produce the trainer's token ids and
// reproduce those logits (f32 KV, one prefill with all logits): the export path (export.py -> HF
// directory -> `skipkv convert`) end to end.
#include <gtest/gtest.h>

#include <string>

#include "io/model_source.h"
#include "testbed_refs.h"
#include "tokenizer/tokenizer.h"

namespace skipkv {
namespace {

const std::string kDir = std::string(SKIPKV_DATA_DIR) + "/models/testbed-v2";

TEST(TestbedV2Model, MatchesTrainerLogits) {
  const auto refs = testbed_refs::ReadRefs(kDir + "/refs.txt");
  ASSERT_EQ(refs.size(), 2u);
  for (const auto& r : refs) {
    ASSERT_GT(r.ids.size(), 200u) << "a reference sequence is a whole problem + trace";
    // Format 4: a blank line after every trace line, so ".\n\n" ends every step.
    EXPECT_NE(r.text.find(".\n\nCheck: at "), std::string::npos) << "not a format-4 trace";
  }
  testbed_refs::CheckModel(kDir + "/testbed.gguf", refs, "testbed v2", /*tied=*/false);
}

TEST(TestbedV2Model, SentenceAndNameTokensAreWhole) {
  auto src = OpenModel(kDir + "/testbed.gguf");
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  auto tok = Tokenizer::FromModelSource(**src);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  // v1's tokenizer, unchanged: the SkipKV token sets and the names in both roles are single tokens.
  for (const char* s :
       {"Wait", "Alternatively", ".\n", ".\n\n", "\n", "bak", "zor", "tan", " bak", " zor", " tan"})
    EXPECT_EQ((*tok)->Encode(s, {.add_special = false}).size(), 1u) << "'" << s << "' is not one token";
  EXPECT_EQ((*tok)->vocab_size(), 444);
}

}  // namespace
}  // namespace skipkv
