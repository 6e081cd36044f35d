// The conversation key a balancer routes by: deploy/k8s/nginx.conf hashes
// the x-session-id header consistently, so every turn of a conversation
// reaches the replica that holds its last turn's prefix snapshot. The client
// sends the key (x-session-id, gRPC metadata or an HTTP header; or the
// OpenAI API's `user` field); without one the server derives one from the
// request's cache scope and prompt, and either way returns it (response
// header, initial metadata) for the client to send with the next turn.
#ifndef SEQBOAT_SERVER_SESSION_KEY_H_
#define SEQBOAT_SERVER_SESSION_KEY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace seqboat {

inline constexpr char kSessionHeader[] = "x-session-id";
inline constexpr size_t kMaxSessionKeyBytes = 128;

// `sent` checked (1 to 128 visible ASCII characters: INVALID_ARGUMENT
// naming the header otherwise), or, when nothing was sent, "s-" and 16 hex
// digits of a hash of `scope` and `prompt`.
absl::StatusOr<std::string> SessionKey(std::optional<absl::string_view> sent,
                                       absl::string_view scope,
                                       const std::vector<int32_t>& prompt);

}  // namespace seqboat

#endif  // SEQBOAT_SERVER_SESSION_KEY_H_
