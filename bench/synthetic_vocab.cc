#include "bench/synthetic_vocab.h"

#include <algorithm>
#include <random>

#include "engine/tokenizer/byte_level.h"
#include "nlohmann/json.hpp"

namespace seqboat::bench {

Vocab Synthetic(int32_t size) {
  Vocab v{"synthetic " + std::to_string(size / 1000) + "k", {}};
  for (int b = 0; b < 256; ++b) v.tokens.push_back(std::string(1, char(b)));
  std::mt19937 rng(size);
  const std::string letters = "etaoinshrdlucmfwypvbgkjqxz";
  const char* pieces[] = {"\":", "\",",  "{\"", "\"}", "[", "]",  ", ", "\\n",
                          "é",   "日本", "語",  "0",   "1", "25", "."};
  std::vector<std::string> seen;
  std::sort(v.tokens.begin(), v.tokens.end());
  while (static_cast<int32_t>(v.tokens.size()) < size - 1) {
    std::string t;
    const int kind = rng() % 10;
    if (kind < 6) {
      if (rng() % 2) t += ' ';
      const int len = 2 + rng() % 9;
      for (int i = 0; i < len; ++i)
        t += letters[std::min<int>(rng() % 26, rng() % 26)];
      if (rng() % 8 == 0) t[t[0] == ' ' ? 1 : 0] -= 32;  // capitalised
    } else {
      const int len = 1 + rng() % 3;
      for (int i = 0; i < len; ++i) t += pieces[rng() % 15];
    }
    v.tokens.push_back(t);
    if (v.tokens.size() % 4096 == 0) {
      std::sort(v.tokens.begin(), v.tokens.end());
      v.tokens.erase(std::unique(v.tokens.begin(), v.tokens.end()),
                     v.tokens.end());
    }
  }
  std::sort(v.tokens.begin(), v.tokens.end());
  v.tokens.erase(std::unique(v.tokens.begin(), v.tokens.end()), v.tokens.end());
  v.tokens.push_back("");
  return v;
}

std::string SyntheticTokenizerJson(const Vocab& vocab) {
  std::vector<std::string> ids;
  for (int b = 0; b < 256; ++b) ids.push_back(std::string(1, char(b)));
  ids.push_back("");  // EOS, an added token
  for (const std::string& t : vocab.tokens) {
    if (t.size() > 1) ids.push_back(t);
  }
  nlohmann::json map = nlohmann::json::object();
  for (size_t id = 0; id < ids.size(); ++id) {
    std::string text;
    if (id == 256) {
      text = "<|endoftext|>";
    } else {
      ByteLevelEncode(ids[id], &text);
    }
    map[text] = id;
  }
  nlohmann::json tok = {
      {"version", "1.0"},
      {"added_tokens",
       {{{"id", 256}, {"content", "<|endoftext|>"}, {"special", true}}}},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model",
       {{"type", "BPE"}, {"vocab", map}, {"merges", nlohmann::json::array()}}}};
  return tok.dump();
}

}  // namespace seqboat::bench
