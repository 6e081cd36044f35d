#include "engine/tokenizer/utf8.h"

#include <cstdint>

namespace seqboat {
namespace {

// The length of the sequence a lead byte starts and the valid range of its
// second byte (narrowed for E0/ED/F0/F4 so that overlong forms, surrogates
// and code points above U+10FFFF are rejected at the earliest byte).
struct LeadInfo {
  int length;  // 0: the byte cannot start a sequence
  uint8_t second_lo;
  uint8_t second_hi;
};

LeadInfo Lead(uint8_t b) {
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) {
    return {3, 0x80, 0xBF};
  }
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

}  // namespace

size_t DecodeUtf8Lossy(std::string_view bytes, bool final, std::string* out) {
  const size_t n = bytes.size();
  size_t i = 0;
  while (i < n) {
    const uint8_t b = static_cast<uint8_t>(bytes[i]);
    if (b < 0x80) {
      out->push_back(static_cast<char>(b));
      ++i;
      continue;
    }
    const LeadInfo lead = Lead(b);
    if (lead.length == 0) {
      out->append(kReplacementChar);
      ++i;
      continue;
    }
    // Count how many bytes of the sequence are valid so far.
    size_t good = 1;
    while (good < static_cast<size_t>(lead.length) && i + good < n) {
      const uint8_t c = static_cast<uint8_t>(bytes[i + good]);
      const uint8_t lo = good == 1 ? lead.second_lo : 0x80;
      const uint8_t hi = good == 1 ? lead.second_hi : 0xBF;
      if (c < lo || c > hi) break;
      ++good;
    }
    if (good == static_cast<size_t>(lead.length)) {
      out->append(bytes.substr(i, good));
      i += good;
    } else if (i + good == n && !final) {
      // Valid so far and cut off by the end of the input: more may come.
      return i;
    } else {
      out->append(kReplacementChar);
      i += good;
    }
  }
  return n;
}

std::string Utf8Lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  DecodeUtf8Lossy(bytes, /*final=*/true, &out);
  return out;
}

}  // namespace seqboat
