// Golden test: the trained testbed (data/models/testbed/testbed.gguf, embedded as ":testbed:") computes
// what PyTorch computed from the checkpoint it was exported from. data/models/testbed/refs.txt holds the
// trainer's logits on two test-split problems with their reference traces (tools/testbed/make_golden.py
// --ckpt); the engine must produce the trainer's token ids and reproduce those logits (f32 KV, one
// prefill with all logits). The export path (export.py -> HF directory -> `skipkv convert`) is what this
// checks end to end: a wrong tensor name, transpose or tokenizer merge breaks it.
#include <gtest/gtest.h>

#include <string>

#include "io/model_source.h"
#include "testbed_refs.h"
#include "tokenizer/tokenizer.h"

namespace skipkv {
namespace {

const std::string kRefs = std::string(SKIPKV_DATA_DIR) + "/models/testbed/refs.txt";

TEST(TestbedModel, EmbeddedModelMatchesTrainerLogits) {
  const auto refs = testbed_refs::ReadRefs(kRefs);
  ASSERT_EQ(refs.size(), 2u);
  for (const auto& r : refs) ASSERT_GT(r.ids.size(), 200u) << "a reference sequence is a whole problem + trace";
  testbed_refs::CheckModel(":testbed:", refs, "embedded testbed", /*tied=*/false);
}

TEST(TestbedModel, SentenceAndNameTokensAreWhole) {
  auto src = OpenModel(":testbed:");
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  auto tok = Tokenizer::FromModelSource(**src);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  // The SkipKV token sets (SPLIT ids, keywords N, delimiters D) and the names in both roles: the key at a
  // line start ("bak") and every other mention (" bak"), so a look-up is a one-token match (format 3).
  for (const char* s : {"Wait", "Alternatively", ".\n", ".\n\n", "\n", "bak", "zor", "tan", " bak", " zor", " tan"})
    EXPECT_EQ((*tok)->Encode(s, {.add_special = false}).size(), 1u) << "'" << s << "' is not one token";
}

}  // namespace
}  // namespace skipkv
