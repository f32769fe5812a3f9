// libFuzzer target: the llama2.c checkpoint + tokenizer.bin reader
// (Llama2cFromMemory). The first byte picks how the rest is used:
//   even: raw bytes; the next 4 bytes (little endian, modulo the rest) split
//         them into the checkpoint image and the tokenizer.bin image;
//   odd:  a small shape from the next 7 bytes, a checkpoint of exactly the
//         size that shape implies (weights cycled from the input, so the size
//         check passes and the tensor mapping runs), and the remaining bytes
//         as the tokenizer.bin image.
// Invariants: no crash, hang or uncaught exception; an accepted source has
// tensors lying inside the checkpoint image and printable metadata.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "io/llama2c.h"

namespace {

void CheckSource(const skipkv::ModelSource& src, const std::vector<uint8_t>& model) {
  for (const auto& t : src.tensors) {
    if (t.data < model.data() || t.data + t.NumBytes() > model.data() + model.size()) std::abort();
  }
  for (const auto& [key, value] : src.metadata.entries()) (void)value.ToString();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t mode = data[0];
  data += 1;
  size -= 1;
  std::vector<uint8_t> model, tok;
  if ((mode & 1) == 0) {
    if (size < 4) return 0;
    uint32_t split;
    std::memcpy(&split, data, 4);
    data += 4;
    size -= 4;
    const size_t m = size == 0 ? 0 : split % (size + 1);
    model.assign(data, data + m);
    tok.assign(data + m, data + size);
  } else {
    if (size < 7) return 0;
    skipkv::Llama2cConfig c;
    c.n_heads = 1 + data[0] % 4;
    c.n_kv_heads = 1 + data[1] % c.n_heads;
    c.dim = c.n_heads * 2 * (1 + data[2] % 4);
    c.hidden_dim = 1 + data[3] % 32;
    c.n_layers = 1 + data[4] % 3;
    c.vocab_size = 1 + data[5] % 64;
    c.seq_len = 1 + data[6] % 16;
    c.shared_classifier = (mode & 2) == 0;
    data += 7;
    size -= 7;
    int32_t header[7] = {c.dim,     c.hidden_dim, c.n_layers,
                         c.n_heads, c.n_kv_heads, c.shared_classifier ? c.vocab_size : -c.vocab_size,
                         c.seq_len};
    model.resize(c.ExpectedFileBytes());
    std::memcpy(model.data(), header, sizeof(header));
    for (size_t i = sizeof(header); i < model.size(); ++i) model[i] = size ? data[i % size] : 0;
    tok.assign(data, data + size);
  }
  auto src = skipkv::Llama2cFromMemory(model.data(), model.size(), tok.empty() ? nullptr : tok.data(),
                                       tok.size(), "fuzz.bin", "fuzz_tokenizer.bin");
  if (src.ok()) CheckSource(**src, model);
  return 0;
}
