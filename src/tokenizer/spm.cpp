// SentencePiece-style BPE (llama.cpp llm_tokenizer_spm semantics); see spm.h.
#include "tokenizer/spm.h"

#include <cstdio>
#include <queue>

#include "tokenizer/utf8.h"

namespace skipkv {

std::string EscapeSpmSpaces(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 4);
  for (char c : text) {
    if (c == ' ') {
      out.append("\xE2\x96\x81");
    } else {
      out.push_back(c);
    }
  }
  return out;
}

StatusOr<std::unique_ptr<SpmModel>> SpmModel::Create(
    const TokenizerSpec& spec, const std::unordered_map<std::string, TokenId>* piece_to_id) {
  if (spec.scores.size() != spec.pieces.size()) {
    return CorruptData(spec.name + ": SentencePiece vocabulary has " + std::to_string(spec.pieces.size()) +
                       " pieces but " + std::to_string(spec.scores.size()) + " scores");
  }
  auto m = std::unique_ptr<SpmModel>(new SpmModel());
  m->spec_ = &spec;
  m->piece_to_id_ = piece_to_id;
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof(hex), "<0x%02X>", b);
    auto it = piece_to_id->find(hex);
    if (it == piece_to_id->end()) it = piece_to_id->find(std::string(1, static_cast<char>(b)));
    m->byte_token_[b] = it == piece_to_id->end() ? spec.unk : it->second;
  }
  return m;
}

void SpmModel::Encode(std::string_view text, std::vector<TokenId>* out) const {
  struct Sym {
    size_t off, n;  // n == 0: merged away
    int prev, next;
  };
  struct Bigram {
    float score;
    int left, right;
    size_t size;  // byte length of the pair when pushed (detects stale entries)
  };
  // Highest score first; on equal scores the leftmost pair.
  struct Worse {
    bool operator()(const Bigram& x, const Bigram& y) const {
      return x.score < y.score || (x.score == y.score && x.left > y.left);
    }
  };
  std::vector<Sym> syms;
  syms.reserve(text.size());
  for (size_t off = 0; off < text.size();) {
    // One symbol per character; an invalid or truncated byte is its own symbol.
    size_t len = utf8::SequenceLength(static_cast<uint8_t>(text[off]));
    if (len == 0) len = 1;
    len = std::min(len, text.size() - off);
    const int idx = static_cast<int>(syms.size());
    syms.push_back({off, len, idx - 1, off + len == text.size() ? -1 : idx + 1});
    off += len;
  }
  if (syms.empty()) return;

  std::priority_queue<Bigram, std::vector<Bigram>, Worse> queue;
  std::string scratch;
  auto try_add = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    scratch.assign(text.data() + syms[l].off, syms[l].n + syms[r].n);
    auto it = piece_to_id_->find(scratch);
    if (it == piece_to_id_->end()) return;
    queue.push({spec_->scores[it->second], l, r, scratch.size()});
  };
  for (int i = 1; i < static_cast<int>(syms.size()); ++i) try_add(i - 1, i);
  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Sym& l = syms[b.left];
    Sym& r = syms[b.right];
    if (l.n == 0 || r.n == 0 || l.n + r.n != b.size || l.next != b.right) continue;
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }
  for (int i = 0; i >= 0; i = syms[i].next) {
    const Sym& s = syms[i];
    scratch.assign(text.data() + s.off, s.n);
    auto it = piece_to_id_->find(scratch);
    if (it != piece_to_id_->end()) {
      out->push_back(it->second);
      continue;
    }
    for (size_t j = 0; j < s.n; ++j) {
      const TokenId t = byte_token_[static_cast<uint8_t>(text[s.off + j])];
      if (t != kNoToken) out->push_back(t);
    }
  }
}

}  // namespace skipkv
