// Shared by the testbed golden tests: PyTorch reference logits written by
// tools/testbed/make_golden.py (refs.txt: per sequence "text <hex>", "ids ...", then
// "pos <p> <logits>" lines) and the check that the engine reproduces them.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "io/model_source.h"
#include "model/forward.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace skipkv::testbed_refs {

struct RefSeq {
  std::string text;
  std::vector<int32_t> ids;
  std::vector<std::pair<int, std::vector<float>>> logits;  // (position, all vocab logits)
};

inline std::string FromHex(const std::string& h) {
  std::string out;
  for (size_t i = 0; i + 1 < h.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16)));
  return out;
}

inline std::vector<RefSeq> ReadRefs(const std::string& path) {
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << "cannot open " << path;
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

// Loads `path` (any OpenModel path, ":testbed:" included), checks the tokenizer ids and that one
// prefill with all logits (f32 KV) reproduces the reference logits within `tol`.
inline void CheckModel(const std::string& path, const std::vector<RefSeq>& refs, const char* name, bool tied,
                       double tol = 1e-4) {
  auto src = OpenModel(path);
  ASSERT_TRUE(src.ok()) << name << ": " << src.status().ToString();
  std::shared_ptr<const ModelSource> source(std::move(src).value());
  auto tok = Tokenizer::FromModelSource(*source);
  ASSERT_TRUE(tok.ok()) << name << ": " << tok.status().ToString();
  EXPECT_EQ((*tok)->model(), TokenizerModel::kByteLevelBpe) << name;
  auto m = Model::Load(source);
  ASSERT_TRUE(m.ok()) << name << ": " << m.status().ToString();
  const Model& model = **m;
  EXPECT_EQ(model.config().tied_embeddings, tied) << name;
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
  EXPECT_LE(worst, tol) << name;
  std::printf("[ %s ] max |engine - PyTorch| logit %.3g\n", name, worst);
}

}  // namespace skipkv::testbed_refs
