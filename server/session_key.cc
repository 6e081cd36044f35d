#include "server/session_key.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace seqboat {
namespace {

void Mix(uint64_t& h, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
}

}  // namespace

absl::StatusOr<std::string> SessionKey(std::optional<absl::string_view> sent,
                                       absl::string_view scope,
                                       const std::vector<int32_t>& prompt) {
  if (sent.has_value()) {
    bool visible = !sent->empty() && sent->size() <= kMaxSessionKeyBytes;
    for (char c : *sent) visible &= c > 0x20 && c < 0x7f;
    if (!visible) {
      return absl::InvalidArgumentError(
          absl::StrCat(kSessionHeader, " must be 1 to ", kMaxSessionKeyBytes,
                       " visible ASCII characters"));
    }
    return std::string(*sent);
  }
  // A conversation's first turn: its next turns extend this prompt, so the
  // key names the conversation as long as the client sends it back.
  uint64_t h = 1469598103934665603ull;
  const uint64_t n = scope.size();
  Mix(h, &n, sizeof(n));
  Mix(h, scope.data(), scope.size());
  Mix(h, prompt.data(), prompt.size() * sizeof(int32_t));
  return absl::StrFormat("s-%016x", h);
}

}  // namespace seqboat
