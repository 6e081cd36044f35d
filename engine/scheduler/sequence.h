// One sequence of an admitted request on the engine thread: its slot, how
// far its prompt has been read, and the per-sequence pipeline from logits to
// events (sampler, incremental detokenizer, stop strings, finish rules). A
// request of n > 1 runs as n of them: the first (index 0) reads the prompt
// and holds the other n - 1 slots until its state is copied into them.
#ifndef SEQBOAT_ENGINE_SCHEDULER_SEQUENCE_H_
#define SEQBOAT_ENGINE_SCHEDULER_SEQUENCE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "engine/backend/backend.h"
#include "engine/backend/sample_row.h"
#include "engine/backend/sampler.h"
#include "engine/grammar/grammar.h"
#include "engine/request.h"
#include "engine/scheduler/draft_length.h"
#include "engine/speculative/prompt_lookup.h"
#include "engine/tokenizer/incremental_detokenizer.h"
#include "engine/tokenizer/stop_checker.h"
#include "engine/tokenizer/tokenizer.h"

namespace seqboat {

class Sequence {
 public:
  // `index`: which of the request's sequences this is (events carry it).
  Sequence(Request request, int slot, const Tokenizer& tokenizer,
           int32_t index = 0);

  // Samples the next token from this sequence's logits row and returns the
  // event to send; event.finish != kNone when the sequence is done.
  GenerationEvent Advance(const float* logits, int32_t n);
  // The other way to the same event: the backend samples the row that
  // NextSampleRow describes (Backend::SampleRows) and Accept takes its token.
  // The sampler's step and penalised ids advance exactly as in Advance, so a
  // seeded request draws the same tokens whichever way each step went.
  // Requests that want logprobs must use Advance (Accept has none to send).
  bool wants_logprobs() const { return request_.logprobs; }
  // With a token pending (below), the row of the draw after it.
  SampleRow NextSampleRow(std::vector<int32_t>* seen_ids) const;
  // The same row with its penalised ids in `tables` (Sampler::DescribeNext):
  // only what changed since the last row is written.
  SampleRow NextSampleRow(PenaltyTables* tables);
  GenerationEvent Accept(int32_t token);

  // Constrained decoding (Request::grammar): the sequence's own matcher
  // follows its tokens, and each draw is limited to the ids it allows.
  // A stop id (EOS, the request's stop_token_ids) is allowed exactly when
  // the text so far is complete, and ends the sequence (kEos, whatever
  // ignore_eos says); min_new_tokens holds the stops back only while the
  // grammar allows something else (a complete text that allows nothing
  // more stops). Constrained sequences do not speculate: drafts are cheap
  // to verify only when nothing on the host sits between the draws.
  bool constrained() const { return matcher_ != nullptr; }
  // Words of the next draw's allowed-id bitmask (token_bitmask.h).
  int32_t mask_words() const;
  // Fills `words` (mask_words() of them) with the ids the next draw may
  // take; the next Advance uses them (`words` must live until then). Its
  // result depends only on the tokens already taken, so it may run on
  // another thread while a step computes the logits, as long as nothing
  // else touches the sequence meanwhile.
  void FillMask(uint32_t* words);
  // The mask FillMask filled for the next draw, or nullptr.
  const uint32_t* filled_mask() const { return filled_mask_; }

  // Pipelined steps. A sequence's token is pending between the launch of
  // the step that samples it and Accept. The next row may run before the
  // pending token is read only when nothing of it depends on that token on
  // the host: no logprobs, no min_new_tokens mask lifted by it, and more
  // tokens to come (a length stop is known in advance, so no row is wasted
  // on it). Penalties do not hold it back: its sample row names the pending
  // token (SampleRow::pending_from), which the device counts in.
  bool pending() const { return pending_ > 0; }
  // Its index among the logit rows of the latest launched step that
  // samples a token of it.
  int32_t pending_row() const { return pending_row_; }
  // A pipelined step with a logit row of it (at `row`) is planned; `ahead`:
  // the step runs ahead of a token still pending, so the draw it describes
  // comes one after the sampler's count (NextSampleRow).
  void AddPending(int32_t row, bool ahead) {
    ++pending_;
    ahead_from_ = ahead ? pending_row_ : -1;
    pending_row_ = row;
    ahead_ = ahead;
  }
  bool CanRunAhead() const;
  // The last step planned with a row of this sequence: its slot is the
  // device's until the engine has read that step.
  int64_t last_step() const { return last_step_; }
  void set_last_step(int64_t step) { last_step_ = step; }
  // A row of this sequence ran after its last token (it finished while
  // that row was in flight): its state consumed the whole output.
  void set_ran_past_end() { ran_past_end_ = true; }
  // Whether its slot went back to the arena.
  bool released() const { return released_; }
  void set_released() { released_ = true; }
  // It ended on its own: its state is snapshotted when the slot goes back.
  bool snapshot_when_freed() const { return snapshot_when_freed_; }
  void set_snapshot_when_freed() { snapshot_when_freed_ = true; }
  // A copy into or out of its slot runs off the op stream (SlotArena's
  // async copies): no step may run on the slot until it is done. `source`
  // keeps a restore's host block alive until then.
  CopyTicket copy() const { return copy_; }
  const std::shared_ptr<const void>& copy_source() const {
    return copy_source_;
  }
  void set_copy(CopyTicket ticket,
                std::shared_ptr<const void> source = nullptr) {
    copy_ = ticket;
    copy_source_ = std::move(source);
  }
  // Speculative decoding (SpeculativeParams). The slot's state lags the
  // output by the unfed tokens: normally just the last one, which the next
  // decode feeds; after a partly rejected draft, the round's accepted
  // tokens too. A round runs the unfed tokens and a draft as one segment in
  // the spare slot (a copy of the slot made in op order before the step)
  // and, when it catches up, the unfed tokens alone in the slot; a draft
  // taken whole makes the spare the slot, anything less leaves the slot as
  // the committed state (lagging by the round's tokens, and by its unfed
  // ones too when it did not catch up).
  bool speculates() const { return speculates_; }
  std::vector<int32_t> UnfedTokens() const;
  int32_t unfed() const { return generated_ - fed_; }
  // Up to num_draft_tokens tokens to verify next (never past
  // max_new_tokens); empty when the drafter has none. A draft model's
  // guesses come from the scheduler (set_proposed) before the round.
  std::vector<int32_t> Draft() const;
  // The most tokens a draft may hold now (0: no round is worth it): within
  // num_draft_tokens, DraftLength's figure when adaptive.
  int32_t DraftRoom() const;
  // Drafts follow their acceptance (DraftLength) instead of always being
  // num_draft_tokens long (the default); set before the first round.
  void set_adaptive_draft_length(bool on) {
    draft_length_ = DraftLength(request_.speculative.num_draft_tokens, on);
  }
  void set_proposed(std::vector<int32_t> draft) {
    proposed_ = std::move(draft);
  }
  // Every sampled token, in order.
  const std::vector<int32_t>& output() const { return output_; }
  int spare_slot() const { return spare_slot_; }
  void set_spare_slot(int slot) { spare_slot_ = slot; }
  // The round planned: `draft` runs after the unfed tokens in the spare slot
  // (empty: they run in the slot itself, a plain decode). The slot catches
  // up on the unfed tokens in the same step unless the previous round was
  // taken whole: then this one is likely to be too, and the catch-up
  // would be thrown away with the slot; if it is not, the next round feeds
  // this one's unfed tokens again (twice: in the slot and in the spare).
  void PlanRound(std::vector<int32_t> draft) {
    draft_ = std::move(draft);
    proposed_.clear();
    catch_up_ = draft_.empty() || !last_round_whole_;
  }
  const std::vector<int32_t>& round_draft() const { return draft_; }
  // Whether the round planned runs the unfed tokens in the slot (always
  // when it has no draft: that is a plain decode).
  bool round_catches_up() const { return catch_up_; }
  // Takes the round's logits, draft.size() + 1 rows of n: draws at each
  // position in turn as Advance does, each draw the model's own, and stops
  // after the first draw that differs from the draft (or ends the
  // sequence). One event carries every token drawn; *accepted is the
  // number of draft tokens the draws matched.
  GenerationEvent AdvanceRound(const float* logits, int32_t n,
                               int32_t* accepted);

  // The final event for a sequence ended from outside (cancel, shutdown).
  GenerationEvent Abort(FinishReason reason,
                        absl::Status status = absl::OkStatus());

  const Request& request() const { return request_; }
  int32_t index() const { return index_; }
  int slot() const { return slot_; }
  // Slots held for the request's other sequences until they are forked
  // from this one's state (the first sequence of a request of n > 1).
  std::vector<int>& fork_slots() { return fork_slots_; }
  int32_t prompt_len() const {
    return static_cast<int32_t>(request_.prompt.size());
  }
  int32_t prefilled() const { return prefilled_; }
  void AddPrefilled(int32_t n) { prefilled_ += n; }
  // The slot holds a snapshot of the first `cached` prompt tokens' state:
  // prefill goes on from there, and events report them as cached.
  void ResumeFrom(int32_t cached);
  // A forked sequence: its slot holds the state after `prefilled` prompt
  // tokens, `cached` of which its first sequence restored from a snapshot.
  void StartAt(int32_t prefilled, int32_t cached);
  int32_t cached() const { return cached_; }
  // What the slot's state has consumed once the step planned last has run:
  // the prompt read so far, then (past the prompt) every output token but
  // the last, which the next decode would feed.
  std::vector<int32_t> ConsumedTokens() const;
  // The prompt length at which the state is to be snapshotted (the whole
  // prompt but its last token, so a later identical prompt still has one
  // token to compute its logits from); -1 when none is due.
  int32_t snapshot_at() const { return snapshot_at_; }
  void set_snapshot_at(int32_t n) { snapshot_at_ = n; }
  // The token the next decode step feeds.
  int32_t last_token() const { return last_token_; }
  int32_t generated() const { return generated_; }
  bool finished() const { return finished_; }

 private:
  // Everything after the draw: observe, count, detokenize, stop rules.
  GenerationEvent Emit(int32_t token, TokenLogprobs* logprobs);
  void Finish(GenerationEvent& event, FinishReason reason);
  // A constrained sequence's matcher takes `token`: false (the token is
  // dropped and the sequence ends) only when the grammar allowed nothing
  // the logits could give (complete, without a stop id to draw).
  bool GrammarTakes(int32_t token);
  // Sets the token counts of a final event.
  void Count(GenerationEvent& event) const;

  Request request_;
  int32_t index_;
  int slot_;
  std::vector<int> fork_slots_;
  int32_t eos_;
  Sampler sampler_;
  IncrementalDetokenizer detok_;
  StopChecker stops_;
  absl::flat_hash_set<int32_t> stop_ids_;
  int32_t prefilled_ = 0;
  int32_t cached_ = 0;
  int32_t snapshot_at_ = -1;
  int32_t generated_ = 0;
  std::vector<int32_t> output_;  // every sampled token
  // Output tokens the slot's state has consumed: all but the last, except
  // after a partly rejected draft.
  int32_t fed_ = 0;
  bool speculates_ = false;
  std::unique_ptr<PromptLookup> lookup_;     // prompt lookup's index, or null
  std::vector<int32_t> proposed_;            // a draft model's latest guess
  std::unique_ptr<GrammarMatcher> matcher_;  // null: unconstrained
  std::vector<uint32_t> own_mask_;  // FillMask's words when Advance fills
  const uint32_t* filled_mask_ = nullptr;
  int spare_slot_ = -1;
  std::vector<int32_t> draft_;
  bool catch_up_ = true;
  bool last_round_whole_ = false;  // the latest round with a draft
  DraftLength draft_length_{0, false};
  int32_t last_token_ = -1;
  bool finished_ = false;
  int32_t pending_ = 0;  // tokens sampled by launched steps, not accepted
  int32_t pending_row_ = -1;
  // Running ahead: the row of the token still pending (in the launch before
  // the latest), which the latest launch's draw must count.
  int32_t ahead_from_ = -1;
  bool ahead_ = false;
  int64_t last_step_ = -1;
  bool ran_past_end_ = false;
  bool released_ = false;
  bool snapshot_when_freed_ = false;
  CopyTicket copy_ = 0;
  std::shared_ptr<const void> copy_source_;
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_SCHEDULER_SEQUENCE_H_
