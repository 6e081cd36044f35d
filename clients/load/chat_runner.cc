#include "clients/load/chat_runner.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <utility>

#include "absl/strings/str_cat.h"
#include "clients/load/stream.h"
#include "seqboat/v1/generate.grpc.pb.h"

namespace seqboat {
namespace load {
namespace {

struct Ended {
  int32_t conversation;
  StreamOutcome outcome;
};

// Shared by the driver and every stream's callbacks.
struct Shared {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Ended> ended;  // turns that ended, for the driver to take
  int64_t in_flight = 0;
  int64_t output_tokens = 0;
};

}  // namespace

absl::Status ValidateChatRunOptions(const ChatRunOptions& o) {
  if (o.concurrency < 1) {
    return absl::InvalidArgumentError("chat: --concurrency must be >= 1");
  }
  if (absl::Status s = ValidateChatSpec(o.spec); !s.ok()) return s;
  if (!(o.request_timeout_s > 0)) {
    return absl::InvalidArgumentError("--request_timeout_s must be > 0");
  }
  return absl::OkStatus();
}

absl::StatusOr<ChatRunResult> RunChat(
    const std::vector<std::shared_ptr<grpc::Channel>>& channels,
    const ChatRunOptions& options,
    const std::function<void(const ChatProgress&)>& on_progress) {
  if (absl::Status s = ValidateChatRunOptions(options); !s.ok()) return s;
  if (channels.empty()) return absl::InvalidArgumentError("no channels");
  std::vector<std::unique_ptr<v1::TextGeneration::Stub>> stubs;
  for (const auto& channel : channels) {
    stubs.push_back(v1::TextGeneration::NewStub(channel));
  }
  const ChatSpec& spec = options.spec;
  // The prompt each conversation sent last; the next turn extends it.
  std::vector<std::vector<int32_t>> prompts(
      static_cast<size_t>(spec.conversations));
  std::vector<int32_t> turn_of(static_cast<size_t>(spec.conversations), 0);

  Shared shared;
  // After `shared` and the stubs, so that it waits for the streams before
  // they go.
  StreamTracker tracker;
  const Clock::time_point origin = Clock::now();
  auto start_turn = [&](int32_t c) {
    const int32_t turn = turn_of[static_cast<size_t>(c)];
    const std::vector<int32_t>& ids = prompts[static_cast<size_t>(c)];
    v1::GenerateRequest r;
    r.set_request_id(
        absl::StrCat(options.request_id_prefix, "-c", c, "-t", turn));
    r.mutable_token_ids()->mutable_ids()->Add(ids.begin(), ids.end());
    r.mutable_sampling()->set_temperature(options.temperature);
    r.mutable_sampling()->set_seed(ChatTurnSeed(spec, c, turn));
    r.mutable_stopping()->set_max_new_tokens(
        static_cast<uint32_t>(spec.output_len));
    r.mutable_stopping()->set_ignore_eos(options.ignore_eos);
    StreamCallbacks callbacks;
    callbacks.on_tokens = [&shared](int64_t n) {
      std::lock_guard<std::mutex> guard(shared.mu);
      shared.output_tokens += n;
    };
    callbacks.on_done = [&shared, c](StreamOutcome outcome) {
      std::lock_guard<std::mutex> guard(shared.mu);
      shared.ended.push_back({c, std::move(outcome)});
      // Under the lock: once the last turn is queued the driver may return
      // and destroy `shared`.
      shared.cv.notify_all();
    };
    {
      std::lock_guard<std::mutex> guard(shared.mu);
      ++shared.in_flight;
    }
    StartGenerateStream(stubs[static_cast<size_t>(c) % stubs.size()].get(),
                        std::move(r), origin, options.request_timeout_s,
                        /*keep_token_ids=*/true, std::move(callbacks), tracker,
                        options.session_ids
                            ? absl::StrCat(options.request_id_prefix, "-c", c)
                            : "");
  };

  ChatRunResult result;
  ChatProgress progress;
  int32_t next_conversation = 0;
  auto start_conversation = [&]() {
    const int32_t c = next_conversation++;
    prompts[static_cast<size_t>(c)] = ChatHistory(spec, c);
    start_turn(c);
  };
  const int32_t first =
      std::min<int32_t>(options.concurrency, spec.conversations);
  for (int32_t i = 0; i < first; ++i) start_conversation();

  Clock::time_point next_progress = origin + std::chrono::seconds(1);
  int32_t conversations_done = 0;
  // Lockstep: turns and conversations held until the in-flight ones end.
  std::vector<int32_t> held_turns;
  int32_t held_conversations = 0;
  while (conversations_done < spec.conversations) {
    std::deque<Ended> ended;
    {
      std::unique_lock<std::mutex> lock(shared.mu);
      shared.cv.wait_until(lock, next_progress,
                           [&shared] { return !shared.ended.empty(); });
      ended.swap(shared.ended);
      shared.in_flight -= static_cast<int64_t>(ended.size());
      progress.in_flight = shared.in_flight;
      progress.output_tokens = shared.output_tokens;
    }
    // Next prompts are built here, not on gRPC's threads: at long histories
    // each is a copy of tens of thousands of ids.
    for (Ended& e : ended) {
      const int32_t c = e.conversation;
      const size_t ci = static_cast<size_t>(c);
      const bool ok = e.outcome.record.ok();
      result.duration_s = std::max(result.duration_s, e.outcome.done_s);
      ++progress.turns_done;
      if (!ok) ++progress.failed;
      const int32_t turn = turn_of[ci];
      if (ok && turn + 1 < spec.turns) {
        prompts[ci] =
            NextChatPrompt(std::move(prompts[ci]), e.outcome.token_ids,
                           ChatUserMessage(spec, c, turn + 1));
        turn_of[ci] = turn + 1;
        if (options.lockstep) {
          held_turns.push_back(c);
        } else {
          start_turn(c);
        }
      } else {
        prompts[ci] = {};
        ++conversations_done;
        if (next_conversation + held_conversations < spec.conversations) {
          if (options.lockstep) {
            ++held_conversations;
          } else {
            start_conversation();
          }
        }
      }
      result.turns.push_back({c, turn, std::move(e.outcome.record)});
    }
    // Nothing started above in lockstep, so in_flight is exact here.
    if (options.lockstep && progress.in_flight == 0) {
      for (int32_t c : held_turns) start_turn(c);
      held_turns.clear();
      for (; held_conversations > 0; --held_conversations) start_conversation();
    }
    progress.conversations_done = conversations_done;
    if (on_progress && Clock::now() >= next_progress) {
      next_progress = Clock::now() + std::chrono::seconds(1);
      progress.elapsed_s =
          std::chrono::duration<double>(Clock::now() - origin).count();
      on_progress(progress);
    }
  }
  tracker.Wait();
  return result;
}

}  // namespace load
}  // namespace seqboat
