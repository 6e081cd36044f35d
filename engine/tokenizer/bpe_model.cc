#include "engine/tokenizer/bpe_model.h"

#include <cstdio>
#include <queue>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/json_reader.h"
#include "base/status_macros.h"
#include "engine/tokenizer/unicode_chars.h"

namespace seqboat {
namespace {

using json = nlohmann::json;

uint64_t PairKey(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
         static_cast<uint32_t>(right);
}

// One symbol of a word being merged: a doubly linked list over a vector, so
// merging marks the right symbol dead instead of moving memory.
struct Symbol {
  int32_t id;
  int32_t prev;
  int32_t next;
  bool alive;
};

// A candidate merge; the queue yields the lowest rank, then the leftmost.
struct Candidate {
  int32_t rank;
  int32_t pos;
  int32_t new_id;
  bool operator<(const Candidate& o) const {
    if (rank != o.rank) return rank > o.rank;
    return pos > o.pos;
  }
};

}  // namespace

absl::Status BpeModel::ParseMerges(const json& model) {
  auto merges = model.find("merges");
  if (merges == model.end() || !merges->is_array()) {
    return FieldError("model.merges", "must be an array");
  }
  for (size_t i = 0; i < merges->size(); ++i) {
    const json& entry = (*merges)[i];
    const std::string where = absl::StrCat("model.merges[", i, "]");
    std::string left;
    std::string right;
    if (entry.is_string()) {
      // The older "left right" form: exactly one space.
      const std::string& text = entry.get_ref<const std::string&>();
      const size_t space = text.find(' ');
      if (space == std::string::npos ||
          text.find(' ', space + 1) != std::string::npos || space == 0 ||
          space + 1 == text.size()) {
        return FieldError(where, "must be \"left right\" (one space)");
      }
      left = text.substr(0, space);
      right = text.substr(space + 1);
    } else if (entry.is_array() && entry.size() == 2 && entry[0].is_string() &&
               entry[1].is_string()) {
      left = entry[0].get<std::string>();
      right = entry[1].get<std::string>();
    } else {
      return FieldError(where,
                        "must be a \"left right\" string or a [left, right] "
                        "pair of strings");
    }
    const int32_t left_id = TokenToId(left);
    const int32_t right_id = TokenToId(right);
    const int32_t new_id = TokenToId(left + right);
    if (left_id < 0) {
      return FieldError(where,
                        absl::StrCat("\"", left, "\" is not in model.vocab"));
    }
    if (right_id < 0) {
      return FieldError(where,
                        absl::StrCat("\"", right, "\" is not in model.vocab"));
    }
    if (new_id < 0) {
      return FieldError(where, absl::StrCat("the merged token \"", left, right,
                                            "\" is not in model.vocab"));
    }
    // A repeated pair takes the later rank, as Hugging Face's map does.
    merges_[PairKey(left_id, right_id)] = {static_cast<int32_t>(i), new_id};
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<BpeModel>> BpeModel::Parse(const json& model) {
  auto bpe = std::unique_ptr<BpeModel>(new BpeModel());
  RETURN_IF_ERROR(ParseVocabObject(model, &bpe->vocab_, &bpe->tokens_));
  RETURN_IF_ERROR(bpe->ParseMerges(model));

  std::string unk;
  RETURN_IF_ERROR(OptionalString(model, "unk_token", "model", &unk));
  if (!unk.empty()) {
    bpe->unk_id_ = bpe->TokenToId(unk);
    if (bpe->unk_id_ < 0) {
      return FieldError("model.unk_token",
                        absl::StrCat("\"", unk, "\" is not in model.vocab"));
    }
  }
  for (const char* key : {"fuse_unk", "byte_fallback", "ignore_merges"}) {
    bool* field = key == std::string_view("fuse_unk") ? &bpe->fuse_unk_
                  : key == std::string_view("byte_fallback")
                      ? &bpe->byte_fallback_
                      : &bpe->ignore_merges_;
    RETURN_IF_ERROR(OptionalBool(model, key, "model", field));
  }
  // Word-piece style affixes and dropout change the algorithm; none of the
  // byte-level or SentencePiece families use them.
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    std::string affix;
    RETURN_IF_ERROR(OptionalString(model, key, "model", &affix));
    if (!affix.empty()) {
      return FieldError(absl::StrCat("model.", key), "is not supported");
    }
  }
  if (auto dropout = model.find("dropout");
      dropout != model.end() && !dropout->is_null() &&
      !(dropout->is_number() && dropout->get<double>() == 0.0)) {
    return FieldError("model.dropout",
                      "must be null (dropout is for training)");
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    bpe->byte_ids_[b] = bpe->TokenToId(name);
  }
  return bpe;
}

int32_t BpeModel::TokenToId(std::string_view token) const {
  auto it = vocab_.find(AbslView(token));
  return it == vocab_.end() ? -1 : it->second;
}

const std::string& BpeModel::IdToToken(int32_t id) const {
  static const std::string* const kEmpty = new std::string();
  if (id < 0 || id >= id_limit()) return *kEmpty;
  return tokens_[id];
}

const BpeModel::Merge* BpeModel::FindMerge(int32_t left, int32_t right) const {
  auto it = merges_.find(PairKey(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

std::vector<int32_t> BpeModel::Tokenize(std::string_view word) const {
  // Initial symbols: one per character; unknown characters become their
  // <0xXX> byte tokens, else the unk token (consecutive ones fused if asked).
  // The order of these cases follows Hugging Face's BPE::merge_word.
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  auto add = [&symbols](int32_t id) {
    const int32_t n = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, n - 1, n + 1, true});
  };
  bool pending_unk = false;
  for (size_t pos = 0; pos < word.size();) {
    char32_t cp;
    const size_t len = NextChar(word, pos, &cp);
    const std::string_view ch = word.substr(pos, len);
    pos += len;
    const int32_t id = TokenToId(ch);
    if (id >= 0) {
      if (pending_unk) add(unk_id_);
      pending_unk = false;
      add(id);
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (char c : ch) all = all && byte_ids_[static_cast<uint8_t>(c)] >= 0;
      if (all) {
        for (char c : ch) add(byte_ids_[static_cast<uint8_t>(c)]);
        continue;
      }
    }
    if (unk_id_ >= 0) {
      if (pending_unk && !fuse_unk_) add(unk_id_);
      pending_unk = true;
    }
    // Without an unk token the character is dropped, as Hugging Face does.
  }
  if (pending_unk) add(unk_id_);
  if (symbols.empty()) return {};
  symbols.back().next = -1;

  std::priority_queue<Candidate> queue;
  for (size_t i = 0; i + 1 < symbols.size(); ++i) {
    if (const Merge* m = FindMerge(symbols[i].id, symbols[i + 1].id)) {
      queue.push({m->rank, static_cast<int32_t>(i), m->new_id});
    }
  }
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& cur = symbols[top.pos];
    if (!cur.alive || cur.next < 0) continue;
    Symbol& right = symbols[cur.next];
    // Skip entries made stale by earlier merges.
    const Merge* m = FindMerge(cur.id, right.id);
    if (m == nullptr || m->new_id != top.new_id) continue;
    cur.id = top.new_id;
    right.alive = false;
    cur.next = right.next;
    if (cur.next >= 0) symbols[cur.next].prev = top.pos;
    if (cur.prev >= 0) {
      if (const Merge* p = FindMerge(symbols[cur.prev].id, cur.id)) {
        queue.push({p->rank, cur.prev, p->new_id});
      }
    }
    if (cur.next >= 0) {
      if (const Merge* n = FindMerge(cur.id, symbols[cur.next].id)) {
        queue.push({n->rank, top.pos, n->new_id});
      }
    }
  }
  std::vector<int32_t> ids;
  for (const Symbol& s : symbols) {
    if (s.alive) ids.push_back(s.id);
  }
  return ids;
}

void BpeModel::EncodeWord(std::string_view word,
                          std::vector<int32_t>* ids) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (const int32_t id = TokenToId(word); id >= 0) {
      ids->push_back(id);
      return;
    }
  }
  const bool cacheable = word.size() <= kMaxCachedWordBytes;
  if (cacheable) {
    absl::MutexLock lock(&cache_mu_);
    auto it = cache_.find(AbslView(word));
    if (it != cache_.end()) {
      ids->insert(ids->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> word_ids = Tokenize(word);
  ids->insert(ids->end(), word_ids.begin(), word_ids.end());
  if (cacheable) {
    absl::MutexLock lock(&cache_mu_);
    // Starting over keeps memory bounded and lets the cache follow the text
    // currently being served.
    if (cache_.size() >= kCacheCapacity) cache_.clear();
    cache_.emplace(std::string(word), std::move(word_ids));
  }
}

}  // namespace seqboat
