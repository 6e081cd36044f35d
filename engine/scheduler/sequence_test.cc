#include "engine/scheduler/sequence.h"

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/backend/sample_row.h"
#include "engine/backend/sampler.h"
#include "engine/request.h"
#include "engine/tokenizer/byte_tokenizer.h"
#include "gtest/gtest.h"

namespace seqboat {
namespace {

// The token SampleRowsOnHost draws for one row of n logits.
int32_t DrawOnHost(const std::vector<float>& logits, int n,
                   const SampleRow& row, const int32_t* seen_ids) {
  int32_t token = -1;
  SampleRowsParams p;
  p.logits = logits.data();
  p.m = 1;
  p.vocab = n;
  p.rows = &row;
  p.seen_ids = seen_ids;
  p.tokens = &token;
  SampleRowsOnHost(p);
  return token;
}

constexpr int32_t kEos = 256;

std::unique_ptr<ByteTokenizer> Tokenizer() {
  AddedToken eos;
  eos.id = kEos;
  eos.content = "<eos>";
  eos.special = true;
  auto tok = ByteTokenizer::Create({eos});
  EXPECT_TRUE(tok.ok()) << tok.status();
  return *std::move(tok);
}

Request MakeRequest(const SamplingParams& sampling, int max_new) {
  Request r;
  r.prompt = {'a', 'b', 'a', 'c'};
  r.sampling = sampling;
  r.stopping.max_new_tokens = max_new;
  r.stopping.stop_strings = {"zz!"};
  return r;
}

// Row logits favouring printable bytes, with the EOS made likely late on
// so that some runs end by EOS, some by length.
std::vector<float> StepLogits(std::mt19937& rng, int32_t n, int step) {
  std::normal_distribution<float> normal(0.0f, 1.5f);
  std::vector<float> logits(n);
  for (int32_t i = 0; i < n; ++i) {
    logits[i] = normal(rng) + (i >= 'a' && i <= 'z' ? 3.0f : 0.0f);
  }
  logits[kEos] = step > 20 ? 6.0f : -5.0f;
  return logits;
}

void ExpectSameEvent(const GenerationEvent& a, const GenerationEvent& b,
                     int step) {
  EXPECT_EQ(a.token_ids, b.token_ids) << "step " << step;
  EXPECT_EQ(a.text, b.text) << "step " << step;
  EXPECT_EQ(a.finish, b.finish) << "step " << step;
  EXPECT_EQ(a.matched_stop, b.matched_stop) << "step " << step;
  EXPECT_EQ(a.generated_tokens, b.generated_tokens) << "step " << step;
  EXPECT_TRUE(b.logprobs.empty());
}

// A sequence that takes backend-drawn tokens (NextSampleRow, then Accept)
// sends the events of one that samples itself (Advance), and its sampler
// stays in step: seeded draws, penalised ids and the counter all agree, also
// when the two ways alternate.
TEST(SequenceTest, AcceptedTokensAdvanceLikeHostSampling) {
  auto tokenizer = Tokenizer();
  const int32_t n = 264;  // model rows beyond the tokenizer's 257 ids
  std::vector<SamplingParams> cases(5);
  cases[0].temperature = 0.0f;
  cases[0].repetition_penalty = 1.8f;
  cases[1].seed = 11;
  cases[2].seed = 12;
  cases[2].top_k = 20;
  cases[2].repetition_penalty = 1.3f;
  cases[3].seed = 13;
  cases[3].top_p = 0.7f;
  cases[3].temperature = 0.8f;
  cases[4].seed = 14;
  cases[4].min_p = 0.1f;
  cases[4].repetition_penalty = 0.9f;
  for (size_t c = 0; c < cases.size(); ++c) {
    for (bool alternate : {false, true}) {
      Sequence host(MakeRequest(cases[c], 30), 0, *tokenizer);
      Sequence fed(MakeRequest(cases[c], 30), 1, *tokenizer);
      std::mt19937 rng(static_cast<uint32_t>(c));
      for (int step = 0; !host.finished(); ++step) {
        ASSERT_FALSE(fed.finished());
        const std::vector<float> logits = StepLogits(rng, n, step);
        const GenerationEvent want = host.Advance(logits.data(), n);
        GenerationEvent got;
        if (alternate && step % 2 == 1) {
          got = fed.Advance(logits.data(), n);
        } else {
          std::vector<int32_t> seen = {7, 7};  // an earlier row's ids
          const SampleRow row = fed.NextSampleRow(&seen);
          got = fed.Accept(DrawOnHost(logits, n, row, seen.data()));
        }
        ExpectSameEvent(want, got, step);
        EXPECT_EQ(fed.last_token(), host.last_token());
      }
      EXPECT_TRUE(fed.finished());
      EXPECT_EQ(fed.generated(), host.generated());
      std::vector<int32_t> host_seen, fed_seen;
      const SampleRow a = host.NextSampleRow(&host_seen);
      const SampleRow b = fed.NextSampleRow(&fed_seen);
      EXPECT_EQ(a.step, b.step);
      EXPECT_EQ(a.step, static_cast<uint64_t>(host.generated()));
      EXPECT_EQ(host_seen, fed_seen);
    }
  }
}

TEST(SequenceTest, AcceptEndsOnEosAndStopStrings) {
  auto tokenizer = Tokenizer();
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  {
    Sequence seq(MakeRequest(greedy, 10), 0, *tokenizer);
    EXPECT_EQ(seq.Accept('x').text, "x");
    const GenerationEvent last = seq.Accept(kEos);
    EXPECT_EQ(last.finish, FinishReason::kEos);
    EXPECT_TRUE(seq.finished());
  }
  {
    Sequence seq(MakeRequest(greedy, 10), 0, *tokenizer);
    std::string text;
    GenerationEvent e;
    for (char ch : std::string("yzz!")) {
      e = seq.Accept(ch);
      text += e.text;
    }
    EXPECT_EQ(e.finish, FinishReason::kStopString);
    EXPECT_EQ(e.matched_stop, "zz!");
    EXPECT_EQ(text, "y");
  }
  {
    Sequence seq(MakeRequest(greedy, 2), 0, *tokenizer);
    seq.Accept('q');
    EXPECT_EQ(seq.Accept('r').finish, FinishReason::kLength);
    EXPECT_EQ(seq.generated(), 2);
  }
}

// min_new_tokens: the draws up to the min_new_tokens-th token never give
// EOS or a stop id (on the host and through a backend's row alike), and no
// stop rule ends the sequence before that token; from it on they do.
TEST(SequenceTest, MinNewTokensHoldsTheStopRulesBack) {
  auto tokenizer = Tokenizer();
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  const int32_t n = 264;
  // EOS is always the likeliest, then the stop id 'q', then 'x'.
  std::vector<float> logits(n, 0.0f);
  logits[kEos] = 9.0f;
  logits['q'] = 8.0f;
  logits['x'] = 7.0f;
  for (bool on_host : {true, false}) {
    Request r = MakeRequest(greedy, 10);
    r.stopping.min_new_tokens = 3;
    r.stopping.stop_token_ids = {'q'};
    Sequence seq(std::move(r), 0, *tokenizer);
    std::vector<int32_t> tokens;
    GenerationEvent e;
    while (!seq.finished()) {
      if (on_host) {
        e = seq.Advance(logits.data(), n);
      } else {
        std::vector<int32_t> ids;
        const SampleRow row = seq.NextSampleRow(&ids);
        EXPECT_EQ(row.suppressed_count, tokens.size() < 3 ? 2 : 0);
        e = seq.Accept(DrawOnHost(logits, n, row, ids.data()));
      }
      tokens.push_back(e.token_ids[0]);
    }
    EXPECT_EQ(tokens, (std::vector<int32_t>{'x', 'x', 'x', kEos})) << on_host;
    EXPECT_EQ(e.finish, FinishReason::kEos);
  }
  {
    // With ignore_eos only the stop id is held back.
    Request r = MakeRequest(greedy, 10);
    r.stopping.min_new_tokens = 2;
    r.stopping.stop_token_ids = {'q'};
    r.stopping.ignore_eos = true;
    Sequence seq(std::move(r), 0, *tokenizer);
    std::vector<int32_t> ids;
    EXPECT_EQ(seq.NextSampleRow(&ids).suppressed_count, 1);
    EXPECT_EQ(seq.Advance(logits.data(), n).token_ids[0], kEos);
  }
  {
    // A stop id taken before min_new_tokens (a backend that drew it anyway)
    // does not end it; at the min_new_tokens-th token it does.
    Request r = MakeRequest(greedy, 10);
    r.stopping.min_new_tokens = 2;
    r.stopping.stop_token_ids = {'q'};
    Sequence seq(std::move(r), 0, *tokenizer);
    EXPECT_EQ(seq.Accept('q').finish, FinishReason::kNone);
    EXPECT_EQ(seq.Accept('q').finish, FinishReason::kEos);
    EXPECT_EQ(seq.generated(), 2);
  }
}

TEST(SequenceTest, MinNewTokensIgnoresStopStringsEndingBeforeIt) {
  auto tokenizer = Tokenizer();
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  const auto run = [&](int32_t min_new, const std::string& bytes) {
    Request r = MakeRequest(greedy, 20);  // stop string "zz!"
    r.stopping.min_new_tokens = min_new;
    Sequence seq(std::move(r), 0, *tokenizer);
    std::string text;
    GenerationEvent e;
    for (char ch : bytes) {
      e = seq.Accept(ch);
      text += e.text;
      if (seq.finished()) break;
    }
    return std::make_pair(text, seq.generated());
  };
  // "zz!" complete at the third token: ignored under min 4, its text kept;
  // the next one ends it.
  EXPECT_EQ(run(4, "zz!abzz!cd"), std::make_pair(std::string("zz!ab"), 8));
  // At the min_new_tokens-th token a stop string counts (as vLLM's check).
  EXPECT_EQ(run(3, "zz!abzz!cd"), std::make_pair(std::string(""), 3));
  // Begun before min_new_tokens, ended after: it counts.
  EXPECT_EQ(run(4, "azz!b"), std::make_pair(std::string("a"), 4));
}

TEST(SequenceTest, WantsLogprobsFollowsTheRequest) {
  auto tokenizer = Tokenizer();
  Request r = MakeRequest(SamplingParams(), 4);
  EXPECT_FALSE(Sequence(r, 0, *tokenizer).wants_logprobs());
  r.logprobs = true;
  EXPECT_TRUE(Sequence(r, 0, *tokenizer).wants_logprobs());
}

// Greedy logits, one row per token: each row's argmax is its token.
std::vector<float> RowsFor(const std::vector<int32_t>& tokens, int32_t n) {
  std::vector<float> logits(tokens.size() * n, 0.0f);
  for (size_t i = 0; i < tokens.size(); ++i) logits[i * n + tokens[i]] = 9.0f;
  return logits;
}

// The draft length follows acceptance inside the sequence: a round whose
// second draft token is rejected shrinks the next draft's room to two, one
// taken whole grows it again; a sequence without it keeps its request's.
TEST(SequenceTest, DraftRoomFollowsAcceptanceWhenAdaptive) {
  auto tok = Tokenizer();
  const int32_t n = tok->vocab_size();
  Request r = MakeRequest(SamplingParams{}, 50);
  r.speculative.method = SpeculativeMethod::kDraftModel;
  r.speculative.num_draft_tokens = 4;
  Sequence adaptive(r, 0, *tok), fixed(r, 1, *tok);
  adaptive.set_adaptive_draft_length(true);
  adaptive.set_spare_slot(2);
  fixed.set_spare_slot(3);
  for (Sequence* seq : {&adaptive, &fixed}) {
    ASSERT_TRUE(seq->speculates());
    EXPECT_EQ(seq->DraftRoom(), 4);
    seq->Advance(RowsFor({'x'}, n).data(), n);
    seq->set_proposed({'p', 'q', 'r', 's'});
    seq->PlanRound(seq->Draft());
    int32_t accepted = -1;
    const GenerationEvent e = seq->AdvanceRound(
        RowsFor({'p', 'z', 'r', 's', 't'}, n).data(), n, &accepted);
    EXPECT_EQ(accepted, 1);
    EXPECT_EQ(e.token_ids, (std::vector<int32_t>{'p', 'z'}));
  }
  EXPECT_EQ(adaptive.DraftRoom(), 2);
  EXPECT_EQ(fixed.DraftRoom(), 4);
  adaptive.set_proposed({'a', 'b', 'c', 'd'});
  const std::vector<int32_t> draft = adaptive.Draft();
  EXPECT_EQ(draft, (std::vector<int32_t>{'a', 'b'}));
  adaptive.PlanRound(draft);
  int32_t accepted = -1;
  adaptive.AdvanceRound(RowsFor({'a', 'b', 'c'}, n).data(), n, &accepted);
  EXPECT_EQ(accepted, 2);
  EXPECT_EQ(adaptive.DraftRoom(), 3);
}

// The slot catches up on the unfed tokens in a round unless the previous
// round was taken whole; a round without that catch-up and partly rejected
// leaves its unfed token unfed as well, so the next round (which catches
// up) feeds it, the accepted tokens and the model's own.
TEST(SequenceTest, RoundAfterOneTakenWholeSkipsTheCatchUp) {
  auto tok = Tokenizer();
  const int32_t n = tok->vocab_size();
  Request r = MakeRequest(SamplingParams{}, 50);
  r.speculative.method = SpeculativeMethod::kDraftModel;
  r.speculative.num_draft_tokens = 3;
  Sequence seq(r, 0, *tok);
  seq.set_spare_slot(1);
  seq.Advance(RowsFor({'x'}, n).data(), n);
  int32_t accepted = -1;
  // The first round catches up; taken whole, the spare is the slot.
  seq.set_proposed({'p', 'q'});
  seq.PlanRound(seq.Draft());
  EXPECT_TRUE(seq.round_catches_up());
  seq.AdvanceRound(RowsFor({'p', 'q', 'r'}, n).data(), n, &accepted);
  EXPECT_EQ(accepted, 2);
  EXPECT_EQ(seq.slot(), 1);
  EXPECT_EQ(seq.unfed(), 1);
  // The next one does not; rejected at its second token, the slot still
  // lacks its unfed 'r', then 'a' and the model's 'z'.
  seq.set_proposed({'a', 'b', 'c'});
  seq.PlanRound(seq.Draft());
  EXPECT_FALSE(seq.round_catches_up());
  seq.AdvanceRound(RowsFor({'a', 'z', 'c', 'd'}, n).data(), n, &accepted);
  EXPECT_EQ(accepted, 1);
  EXPECT_EQ(seq.slot(), 1);
  EXPECT_EQ(seq.UnfedTokens(), (std::vector<int32_t>{'r', 'a', 'z'}));
  // After a partly rejected round the slot catches up again, and a round
  // without a draft (a plain decode of the unfed tokens) always does.
  seq.set_proposed({'e'});
  seq.PlanRound(seq.Draft());
  EXPECT_TRUE(seq.round_catches_up());
  seq.AdvanceRound(RowsFor({'y', 'w'}, n).data(), n, &accepted);
  EXPECT_EQ(accepted, 0);
  EXPECT_EQ(seq.UnfedTokens(), (std::vector<int32_t>{'y'}));
  seq.PlanRound({});
  EXPECT_TRUE(seq.round_catches_up());
}

}  // namespace
}  // namespace seqboat
