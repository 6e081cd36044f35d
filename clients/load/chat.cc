#include "clients/load/chat.h"

#include <algorithm>
#include <limits>
#include <random>

#include "absl/strings/str_cat.h"

namespace seqboat {
namespace load {
namespace {

// Which stream of random numbers a generator feeds: the history and each
// user message draw from separate ones, so changing one length leaves the
// other ids as they were.
enum class Draw : uint32_t { kHistory = 1, kUserMessage = 2, kSampling = 3 };

std::mt19937_64 Generator(const ChatSpec& spec, Draw draw, int32_t conversation,
                          int32_t turn) {
  std::seed_seq seq{
      static_cast<uint32_t>(spec.seed), static_cast<uint32_t>(spec.seed >> 32),
      static_cast<uint32_t>(draw), static_cast<uint32_t>(conversation),
      static_cast<uint32_t>(turn)};
  return std::mt19937_64(seq);
}

std::vector<int32_t> RandomIds(const ChatSpec& spec, int32_t n,
                               std::mt19937_64 rng) {
  std::uniform_int_distribution<int32_t> id(0, spec.vocab_size - 1);
  std::vector<int32_t> ids;
  ids.reserve(static_cast<size_t>(std::max<int32_t>(n, 0)));
  for (int32_t i = 0; i < n; ++i) ids.push_back(id(rng));
  return ids;
}

}  // namespace

absl::Status ValidateChatSpec(const ChatSpec& spec) {
  if (spec.conversations < 1) {
    return absl::InvalidArgumentError("chat: conversations must be >= 1");
  }
  if (spec.turns < 1) {
    return absl::InvalidArgumentError("--chat_turns must be >= 1");
  }
  if (spec.history_len < 1) {
    return absl::InvalidArgumentError("--chat_history_len must be >= 1");
  }
  if (spec.user_len < 0) {
    return absl::InvalidArgumentError("--chat_user_len must be >= 0");
  }
  if (spec.output_len < 1) {
    return absl::InvalidArgumentError("--output_len must be >= 1");
  }
  if (spec.vocab_size < 1) {
    return absl::InvalidArgumentError("vocabulary size must be >= 1");
  }
  if (LongestChatPrompt(spec) > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("chat: the last turn's prompt (", LongestChatPrompt(spec),
                     " tokens) does not fit an int32"));
  }
  return absl::OkStatus();
}

int64_t LongestChatPrompt(const ChatSpec& spec) {
  return static_cast<int64_t>(spec.history_len) +
         static_cast<int64_t>(spec.turns - 1) *
             (static_cast<int64_t>(spec.output_len) + spec.user_len);
}

std::vector<int32_t> ChatHistory(const ChatSpec& spec, int32_t conversation) {
  return RandomIds(spec, spec.history_len,
                   Generator(spec, Draw::kHistory, conversation, 0));
}

std::vector<int32_t> ChatUserMessage(const ChatSpec& spec, int32_t conversation,
                                     int32_t turn) {
  return RandomIds(spec, spec.user_len,
                   Generator(spec, Draw::kUserMessage, conversation, turn));
}

std::vector<int32_t> NextChatPrompt(std::vector<int32_t> prompt,
                                    const std::vector<int32_t>& answer,
                                    const std::vector<int32_t>& user_message) {
  prompt.reserve(prompt.size() + answer.size() + user_message.size());
  prompt.insert(prompt.end(), answer.begin(), answer.end());
  prompt.insert(prompt.end(), user_message.begin(), user_message.end());
  return prompt;
}

uint64_t ChatTurnSeed(const ChatSpec& spec, int32_t conversation,
                      int32_t turn) {
  return Generator(spec, Draw::kSampling, conversation, turn)();
}

std::vector<TurnSummary> SummarizeTurns(
    const std::vector<ChatTurnRecord>& records, int32_t turns) {
  int32_t n = std::max<int32_t>(turns, 0);
  for (const ChatTurnRecord& r : records) n = std::max(n, r.turn + 1);
  struct Samples {
    std::vector<double> ttft, e2el, prompt, cached;
    int64_t prompt_sum = 0, cached_sum = 0;
  };
  std::vector<Samples> samples(static_cast<size_t>(n));
  std::vector<TurnSummary> out(static_cast<size_t>(n));
  for (const ChatTurnRecord& r : records) {
    if (r.turn < 0) continue;
    TurnSummary& t = out[static_cast<size_t>(r.turn)];
    if (!r.request.ok()) {
      ++t.failed;
      continue;
    }
    ++t.completed;
    Samples& s = samples[static_cast<size_t>(r.turn)];
    const RequestTimings timings = TimingsOf(r.request);
    if (timings.ttft >= 0) s.ttft.push_back(timings.ttft);
    s.e2el.push_back(timings.e2el);
    s.prompt.push_back(static_cast<double>(r.request.prompt_tokens));
    s.cached.push_back(static_cast<double>(r.request.cached_prompt_tokens));
    s.prompt_sum += r.request.prompt_tokens;
    s.cached_sum += r.request.cached_prompt_tokens;
  }
  for (int32_t i = 0; i < n; ++i) {
    TurnSummary& t = out[static_cast<size_t>(i)];
    Samples& s = samples[static_cast<size_t>(i)];
    t.turn = i;
    t.ttft_s = Describe(std::move(s.ttft));
    t.e2el_s = Describe(std::move(s.e2el));
    t.prompt_tokens = Describe(std::move(s.prompt));
    t.cached_prompt_tokens = Describe(std::move(s.cached));
    if (s.prompt_sum > 0) {
      t.cached_fraction =
          static_cast<double>(s.cached_sum) / static_cast<double>(s.prompt_sum);
    }
  }
  return out;
}

}  // namespace load
}  // namespace seqboat
