// The multi-turn chat workload: conversations whose every turn resends the
// whole conversation so far, the shape a prefix cache is for. Turn 0's prompt
// is `history_len` synthetic token ids; turn t's prompt is turn t-1's prompt,
// then the answer the server streamed back for it, then a new user message of
// `user_len` synthetic ids. The synthetic ids are a pure function of the seed,
// the conversation and the turn; the answers come from the server.
//
// Also the per-turn statistics: TTFT, E2E, prompt and cached prompt lengths
// over the conversations, for each turn index. Pure: no clocks, no I/O.
#ifndef SEQBOAT_CLIENTS_LOAD_CHAT_H_
#define SEQBOAT_CLIENTS_LOAD_CHAT_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "clients/load/stats.h"

namespace seqboat {
namespace load {

struct ChatSpec {
  int32_t conversations = 1;
  int32_t turns = 4;
  int32_t history_len = 1024;  // turn 0's prompt
  int32_t user_len = 64;       // each later turn's new user message
  int32_t output_len = 128;    // max_new_tokens of every turn
  int32_t vocab_size = 256;    // ids are uniform in [0, vocab_size)
  uint64_t seed = 0;
};

absl::Status ValidateChatSpec(const ChatSpec& spec);

// The last turn's prompt length when every answer has output_len tokens
// (the run's longest prompt, to check against the server's limit).
int64_t LongestChatPrompt(const ChatSpec& spec);

// Turn 0's prompt of `conversation`. Conversations get different histories,
// so that a cache can only hit within a conversation.
std::vector<int32_t> ChatHistory(const ChatSpec& spec, int32_t conversation);

// The user message that starts `turn` (>= 1) of `conversation`.
std::vector<int32_t> ChatUserMessage(const ChatSpec& spec, int32_t conversation,
                                     int32_t turn);

// The next turn's prompt: `prompt`, then `answer`, then `user_message`.
std::vector<int32_t> NextChatPrompt(std::vector<int32_t> prompt,
                                    const std::vector<int32_t>& answer,
                                    const std::vector<int32_t>& user_message);

// The sampling seed of one turn, so that seeded sampling repeats run to run.
uint64_t ChatTurnSeed(const ChatSpec& spec, int32_t conversation, int32_t turn);

struct ChatTurnRecord {
  int32_t conversation = 0;
  int32_t turn = 0;
  RequestRecord request;
};

// One turn index over every conversation. Only successful turns enter the
// distributions; a conversation stops at its first failed turn, so later
// turns have fewer samples.
struct TurnSummary {
  int32_t turn = 0;
  int64_t completed = 0;
  int64_t failed = 0;
  Distribution ttft_s;  // turns whose stream carried tokens
  Distribution e2el_s;
  Distribution prompt_tokens;
  Distribution cached_prompt_tokens;
  // Sum of cached over sum of prompt tokens; 0 without prompt tokens.
  double cached_fraction = 0;
};

// One entry per turn index in [0, max(turns, largest index + 1)), so a turn
// that no conversation reached still has its (empty) row. Records with a
// negative turn index are ignored.
std::vector<TurnSummary> SummarizeTurns(
    const std::vector<ChatTurnRecord>& records, int32_t turns);

}  // namespace load
}  // namespace seqboat

#endif  // SEQBOAT_CLIENTS_LOAD_CHAT_H_
