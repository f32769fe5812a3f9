// Byte-level BPE merging by rank over token ids; see bpe.h.
#include "tokenizer/bpe.h"

#include <queue>

#include "tokenizer/byte_level.h"

namespace skipkv {

StatusOr<std::unique_ptr<BpeModel>> BpeModel::Create(
    const TokenizerSpec& spec, const std::unordered_map<std::string, TokenId>* piece_to_id) {
  auto m = std::unique_ptr<BpeModel>(new BpeModel());
  m->spec_ = &spec;
  m->piece_to_id_ = piece_to_id;
  m->ignore_merges_ = spec.ignore_merges;
  m->unk_ = spec.unk;
  for (int b = 0; b < 256; ++b) {
    auto it = piece_to_id->find(byte_level::ByteToUtf8(static_cast<uint8_t>(b)));
    m->byte_token_[b] = it == piece_to_id->end() ? kNoToken : it->second;
  }
  m->merges_.reserve(spec.merges.size());
  for (size_t r = 0; r < spec.merges.size(); ++r) {
    const auto& [a, b] = spec.merges[r];
    auto ia = piece_to_id->find(a);
    auto ib = piece_to_id->find(b);
    auto iab = piece_to_id->find(a + b);
    if (ia == piece_to_id->end() || ib == piece_to_id->end() || iab == piece_to_id->end()) {
      const std::string& missing = ia == piece_to_id->end() ? a : ib == piece_to_id->end() ? b : a + b;
      return CorruptData(spec.name + ": merge #" + std::to_string(r) + " '" + a + " " + b + "' uses '" +
                         missing + "', which is not in the vocabulary");
    }
    // The first (lowest-rank) occurrence of a pair wins, as in Hugging Face.
    m->merges_.emplace(Key(ia->second, ib->second), Merge{static_cast<int32_t>(r), iab->second});
  }
  return m;
}

void BpeModel::EncodeWord(std::string_view bytes, std::vector<TokenId>* out) const {
  if (bytes.empty()) return;
  if (ignore_merges_) {
    // Llama-3: a pre-token that is itself a vocabulary piece is emitted whole.
    std::string mapped;
    byte_level::Encode(bytes, &mapped);
    auto it = piece_to_id_->find(mapped);
    if (it != piece_to_id_->end()) {
      const TokenType t = spec_->types.empty() ? TokenType::kNormal : spec_->types[it->second];
      if (t == TokenType::kNormal || t == TokenType::kByte || t == TokenType::kUndefined) {
        out->push_back(it->second);
        return;
      }
    }
  }
  if (bytes.size() > kMaxCachedWordBytes) {
    Merge_(bytes, out);
    return;
  }
  std::string key(bytes);
  {
    std::lock_guard<std::mutex> lock(cache_mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) {
      out->insert(out->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t before = out->size();
  Merge_(bytes, out);
  std::vector<TokenId> ids(out->begin() + before, out->end());
  std::lock_guard<std::mutex> lock(cache_mu_);
  if (cache_.size() >= kMaxCacheEntries) cache_.clear();
  cache_.emplace(std::move(key), std::move(ids));
}

void BpeModel::Merge_(std::string_view bytes, std::vector<TokenId>* out) const {
  // Symbols form a doubly linked list over the original byte positions; a
  // merge folds the right symbol into the left one.
  struct Sym {
    TokenId id;
    int prev, next;
  };
  struct Cand {
    int32_t rank;
    int left, right;
    TokenId left_id, right_id, merged;
  };
  // Min-heap on (rank, left position): lowest rank first, leftmost on ties.
  struct Worse {
    bool operator()(const Cand& x, const Cand& y) const {
      return x.rank != y.rank ? x.rank > y.rank : x.left > y.left;
    }
  };
  constexpr TokenId kDead = -2;
  const int n = static_cast<int>(bytes.size());
  std::vector<Sym> syms(n);
  for (int i = 0; i < n; ++i) {
    syms[i] = {byte_token_[static_cast<uint8_t>(bytes[i])], i - 1, i + 1 < n ? i + 1 : -1};
  }
  std::vector<Cand> storage;
  storage.reserve(n);
  std::priority_queue<Cand, std::vector<Cand>, Worse> heap(Worse{}, std::move(storage));
  auto try_push = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    const TokenId a = syms[l].id, b = syms[r].id;
    if (a < 0 || b < 0) return;
    auto it = merges_.find(Key(a, b));
    if (it == merges_.end()) return;
    heap.push({it->second.rank, l, r, a, b, it->second.merged});
  };
  for (int i = 0; i + 1 < n; ++i) try_push(i, i + 1);
  while (!heap.empty()) {
    const Cand c = heap.top();
    heap.pop();
    Sym& l = syms[c.left];
    // Stale candidate: one side was merged away or changed since the push.
    if (l.id != c.left_id || l.next != c.right || syms[c.right].id != c.right_id) continue;
    Sym& r = syms[c.right];
    l.id = c.merged;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = c.left;
    r.id = kDead;
    try_push(l.prev, c.left);
    try_push(c.left, l.next);
  }
  for (int i = 0; i >= 0; i = syms[i].next) {
    if (syms[i].id >= 0) {
      out->push_back(syms[i].id);
    } else if (unk_ != kNoToken) {
      out->push_back(unk_);
    }
  }
}

}  // namespace skipkv
