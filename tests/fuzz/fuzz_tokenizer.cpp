// libFuzzer target: arbitrary bytes through the Qwen2 byte-level BPE (the
// npm tokenizer.json, see scripts/setup.sh; override the path with
// SKIPKV_FUZZ_TOKENIZER_JSON; without it the target exits 77, see
// scripts/fuzz_smoke.sh) and the llama2.c SentencePiece tokenizer, and
// random ids through Decode and the streaming detokenizer. Invariants: no
// crash or hang; Encode output ids are in range; ASCII input round-trips
// exactly; the streaming detokenizer only ever emits valid UTF-8.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

#include "fuzz_check.h"

namespace {

std::unique_ptr<skipkv::Tokenizer> g_bpe;
std::unique_ptr<skipkv::Tokenizer> g_spm;

// SKIPKV_SOURCE_DIR: set by tests/fuzz/CMakeLists.txt (a relative __FILE__
// once made these paths point outside the repository, so both tokenizers
// silently failed to load and nothing was fuzzed).
std::string RepoPath(const char* rel) { return (std::filesystem::path(SKIPKV_SOURCE_DIR) / rel).string(); }

void Exercise(const skipkv::Tokenizer& tok, const uint8_t* data, size_t size) {
  const uint8_t mode = size > 0 ? data[0] : 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  const auto ids = tok.Encode(text, {.add_special = (mode & 1) != 0, .parse_special = (mode & 2) != 0});
  for (skipkv::TokenId id : ids) Check(tok.IsValid(id), "Encode produced an out-of-range id");
  auto back = tok.Decode(ids, {.skip_special = false});
  Check(back.ok(), "Decode rejected Encode's ids");
  bool ascii = true;
  for (char c : text) ascii &= static_cast<unsigned char>(c) < 0x80;
  if (ascii && (mode & 3) == 0 && tok.model() == skipkv::TokenizerModel::kByteLevelBpe) {
    Check(*back == text, "ASCII text did not round-trip");
  }
  // Random ids (4 bytes each, some beyond the vocabulary) through both decoders.
  std::vector<skipkv::TokenId> rnd;
  for (size_t i = 0; i + 4 <= size; i += 4) {
    uint32_t v;
    std::memcpy(&v, data + i, 4);
    rnd.push_back(static_cast<skipkv::TokenId>(v % static_cast<uint32_t>(tok.vocab_size() + 16)));
  }
  (void)tok.Decode(rnd, {.skip_special = (mode & 4) != 0});
  skipkv::StreamingDetokenizer d(tok, {.skip_special = (mode & 4) != 0});
  for (skipkv::TokenId id : rnd)
    Check(skipkv::utf8::IsValid(d.Push(id)), "detokenizer emitted invalid UTF-8");
  Check(skipkv::utf8::IsValid(d.Flush()), "detokenizer flush emitted invalid UTF-8");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* env = std::getenv("SKIPKV_FUZZ_TOKENIZER_JSON");
  const std::string json = env ? env : RepoPath(".deps/npm/tokenizer-qwen3/models/tokenizer.json");
  auto bpe = skipkv::Tokenizer::FromHfJsonFile(json);
  if (!bpe.ok()) {
    // Exit 77: scripts/fuzz_smoke.sh reports a skip, or a failure when prerequisites are required.
    std::fprintf(stderr, "fuzz_tokenizer: missing prerequisite: the Qwen2 tokenizer.json (%s); run scripts/setup.sh\n",
                 bpe.status().ToString().c_str());
    std::exit(77);
  }
  g_bpe = std::move(bpe).value();
  auto spm = skipkv::Tokenizer::FromLlama2cFile(RepoPath("data/models/stories260K/tok512.bin"));
  if (!spm.ok()) {
    std::fprintf(stderr, "fuzz_tokenizer: %s\n", spm.status().ToString().c_str());
    std::exit(1);
  }
  g_spm = std::move(spm).value();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (g_bpe) Exercise(*g_bpe, data, size);
  if (g_spm) Exercise(*g_spm, data, size);
  return 0;
}
