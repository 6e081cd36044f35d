#include "engine/scheduler/event_outbox.h"

#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace seqboat {
namespace {

struct Received {
  std::mutex mu;
  std::vector<GenerationEvent> events;
  SharedSink Sink() {
    return [this](GenerationEvent e) {
      std::lock_guard<std::mutex> lock(mu);
      events.push_back(std::move(e));
    };
  }
};

GenerationEvent Token(int32_t index, int32_t id) {
  GenerationEvent e;
  e.index = index;
  e.token_ids = {id};
  e.text = std::string(1, static_cast<char>('a' + id % 26));
  return e;
}

TEST(EventOutboxTest, NothingBeforeFlushEverythingByStop) {
  Received r;
  EventOutbox outbox;
  const SharedSink sink = r.Sink();
  outbox.Send(sink, Token(0, 1));
  {
    std::lock_guard<std::mutex> lock(r.mu);
    EXPECT_TRUE(r.events.empty());
  }
  outbox.Send(sink, Token(0, 2));
  outbox.Stop();
  std::lock_guard<std::mutex> lock(r.mu);
  int32_t tokens = 0;
  for (const GenerationEvent& e : r.events) tokens += e.token_ids.size();
  EXPECT_EQ(tokens, 2);
}

// One batch (sent before a flush) reaches each sequence as one event: its
// tokens and text in order, the last event's finish and counts; sequences
// and sinks stay apart, and an error is not joined to the tokens before it.
TEST(EventOutboxTest, ABatchJoinsEachSequencesEvents) {
  Received a, b;
  const SharedSink sa = a.Sink(), sb = b.Sink();
  EventOutbox outbox;
  outbox.Send(sa, Token(0, 1));
  outbox.Send(sa, Token(1, 7));
  outbox.Send(sb, Token(0, 4));
  outbox.Send(sa, Token(0, 2));
  GenerationEvent last = Token(0, 3);
  last.finish = FinishReason::kLength;
  last.generated_tokens = 3;
  outbox.Send(sa, std::move(last));
  outbox.Send(sb, Token(0, 5));
  GenerationEvent error;
  error.status = absl::InternalError("step failed");
  outbox.Send(sb, std::move(error));
  outbox.Flush();
  outbox.Stop();
  {
    std::lock_guard<std::mutex> lock(a.mu);
    ASSERT_EQ(a.events.size(), 2u);
    EXPECT_EQ(a.events[0].index, 0);
    EXPECT_EQ(a.events[0].token_ids, (std::vector<int32_t>{1, 2, 3}));
    EXPECT_EQ(a.events[0].text, "bcd");
    EXPECT_EQ(a.events[0].finish, FinishReason::kLength);
    EXPECT_EQ(a.events[0].generated_tokens, 3);
    EXPECT_EQ(a.events[1].index, 1);
    EXPECT_EQ(a.events[1].token_ids, (std::vector<int32_t>{7}));
  }
  std::lock_guard<std::mutex> lock(b.mu);
  ASSERT_EQ(b.events.size(), 2u);
  EXPECT_EQ(b.events[0].token_ids, (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(b.events[1].status.code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(b.events[1].token_ids.empty());
}

}  // namespace
}  // namespace seqboat
