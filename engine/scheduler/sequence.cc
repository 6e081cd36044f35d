#include "engine/scheduler/sequence.h"

#include <algorithm>
#include <optional>

#include "engine/backend/token_bitmask.h"

namespace seqboat {
namespace {

// Generation continues the prompt's text unless the prompt holds only special
// tokens (a BOS): then the first generated token starts the text, and
// tokenizers that mark word starts with a space must not emit that space.
bool StartsText(const std::vector<int32_t>& prompt,
                const Tokenizer& tokenizer) {
  for (int32_t id : prompt) {
    if (!tokenizer.IsSpecial(id)) return false;
  }
  return true;
}

}  // namespace

Sequence::Sequence(Request request, int slot, const Tokenizer& tokenizer,
                   int32_t index)
    : request_(std::move(request)),
      index_(index),
      slot_(slot),
      eos_(tokenizer.eos_token_id()),
      sampler_(request_.sampling, tokenizer.vocab_size(), request_.logprobs,
               request_.top_logprobs),
      detok_(tokenizer, StartsText(request_.prompt, tokenizer)),
      stops_(request_.stopping.stop_strings),
      // A set: the check runs on the engine thread for every token.
      stop_ids_(request_.stopping.stop_token_ids.begin(),
                request_.stopping.stop_token_ids.end()) {
  for (int32_t id : request_.prompt) sampler_.Observe(id);
  if (request_.grammar != nullptr)
    matcher_ = std::make_unique<GrammarMatcher>(request_.grammar);
  const SpeculativeParams& spec = request_.speculative;
  // Constrained sequences do not speculate: a round would have to walk the
  // matcher through each draft token and back.
  speculates_ = spec.method != SpeculativeMethod::kNone &&
                spec.num_draft_tokens > 0 && matcher_ == nullptr;
  draft_length_ = DraftLength(spec.num_draft_tokens, /*adaptive=*/false);
  if (speculates_ && spec.method == SpeculativeMethod::kPromptLookup) {
    lookup_ = std::make_unique<PromptLookup>(spec.ngram_min, spec.ngram_max);
    lookup_->Append(request_.prompt);
  }
  // A constrained sequence's mask holds its stops back (FillMask).
  if (request_.stopping.min_new_tokens > 0 && matcher_ == nullptr) {
    // Until then neither EOS nor a stop id may be drawn (vLLM's min_tokens).
    std::vector<int32_t> held = request_.stopping.stop_token_ids;
    if (!request_.stopping.ignore_eos && eos_ >= 0) held.push_back(eos_);
    sampler_.Suppress(held);
  }
}

GenerationEvent Sequence::Advance(const float* logits, int32_t n) {
  TokenLogprobs lp;
  if (matcher_ != nullptr) {
    if (filled_mask_ == nullptr) {
      own_mask_.resize(static_cast<size_t>(mask_words()));
      FillMask(own_mask_.data());
    }
    sampler_.SetAllowedMask(filled_mask_);
  }
  const int32_t token =
      sampler_.Sample(logits, n, request_.logprobs ? &lp : nullptr);
  sampler_.SetAllowedMask(nullptr);
  return Emit(token, request_.logprobs ? &lp : nullptr);
}

int32_t Sequence::mask_words() const {
  return matcher_ == nullptr ? 0 : matcher_->bitmask_words();
}

void Sequence::FillMask(uint32_t* words) {
  const int32_t nwords = mask_words();
  // An error leaves only the grammar's stops allowed: the sequence ends
  // rather than leave the grammar.
  const absl::StatusOr<bool> masked = matcher_->FillNextTokenBitmask(words);
  if (masked.ok() && !*masked) std::fill(words, words + nwords, ~0u);
  const int64_t bits = int64_t{nwords} * 32;
  auto set = [&](int32_t id, bool on) {
    if (id < 0 || id >= bits) return;
    if (on) {
      TokenBitmaskSet(words, id);
    } else {
      words[id >> 5] &= ~(1u << (id & 31));
    }
  };
  // The vocabulary was compiled with EOS as its stop; the request's own
  // stop ids follow the same rule.
  const bool can_stop = matcher_->CanStop();
  for (int32_t id : request_.stopping.stop_token_ids) set(id, can_stop);
  if (generated_ < request_.stopping.min_new_tokens && can_stop) {
    // Hold the stops back unless nothing else is allowed.
    std::vector<uint32_t> saved;
    auto stops = request_.stopping.stop_token_ids;
    if (eos_ >= 0) stops.push_back(eos_);
    for (int32_t id : stops) {
      if (id >= 0 && id < bits && TokenBitmaskHas(words, id)) {
        saved.push_back(static_cast<uint32_t>(id));
        set(id, false);
      }
    }
    if (std::all_of(words, words + nwords, [](uint32_t w) { return w == 0; }))
      for (uint32_t id : saved) set(static_cast<int32_t>(id), true);
  }
  filled_mask_ = words;
}

bool Sequence::GrammarTakes(int32_t token) {
  filled_mask_ = nullptr;
  const bool is_stop = token == eos_ || stop_ids_.contains(token);
  if (is_stop && matcher_->CanStop()) return true;
  return matcher_->Accept(token).ok();
}

GenerationEvent Sequence::Accept(int32_t token) {
  sampler_.CountDraw();
  if (pending_ > 0) --pending_;
  if (pending_ == 0) ahead_ = false;
  return Emit(token, nullptr);
}

SampleRow Sequence::NextSampleRow(std::vector<int32_t>* seen_ids) const {
  SampleRow row = sampler_.DescribeNext(seen_ids);
  if (ahead_) {
    ++row.step;
    if (sampler_.CountsTokens()) row.pending_from = ahead_from_;
  }
  return row;
}

SampleRow Sequence::NextSampleRow(PenaltyTables* tables) {
  SampleRow row = sampler_.DescribeNext(tables);
  // CanRunAhead held: the pending draw changes the counter and, with
  // penalties, the counts, which the device adds the pending token to.
  if (ahead_) {
    ++row.step;
    if (sampler_.CountsTokens()) row.pending_from = ahead_from_;
  }
  return row;
}

bool Sequence::CanRunAhead() const {
  // The pending token lifts the min_new_tokens mask when it is the
  // min_new_tokens-th; before and after that the mask stays as it is.
  return !finished_ && !request_.logprobs &&
         generated_ + 1 != request_.stopping.min_new_tokens &&
         generated_ + 1 < request_.stopping.max_new_tokens;
}

GenerationEvent Sequence::Emit(int32_t token, TokenLogprobs* logprobs) {
  GenerationEvent event;
  event.index = index_;
  if (matcher_ != nullptr && !GrammarTakes(token)) {
    Finish(event,
           matcher_->CanStop() ? FinishReason::kEos : FinishReason::kLength);
    return event;
  }
  sampler_.ObserveGenerated(token);
  last_token_ = token;
  ++generated_;
  output_.push_back(token);
  fed_ = generated_ - 1;
  if (lookup_ != nullptr) lookup_->Append(token);
  event.token_ids.push_back(token);
  if (logprobs != nullptr) event.logprobs.push_back(std::move(*logprobs));

  // Before min_new_tokens nothing stops it but the length (vLLM checks the
  // stop rules from the min_tokens-th token on, and masks EOS and the stop
  // ids for the draws up to that one).
  const bool may_stop = generated_ >= request_.stopping.min_new_tokens;
  if (generated_ == request_.stopping.min_new_tokens) sampler_.Suppress({});
  const bool is_eos = (token == eos_ && (!request_.stopping.ignore_eos ||
                                         matcher_ != nullptr)) ||
                      stop_ids_.contains(token);
  // A constrained draw takes a stop only once the text is complete.
  if (is_eos && (may_stop || matcher_ != nullptr)) {
    Finish(event, FinishReason::kEos);
    return event;
  }
  std::optional<std::string> matched;
  event.text = stops_.Push(detok_.Push(token), &matched, may_stop);
  if (matched.has_value()) {
    event.matched_stop = *matched;
    finished_ = true;
    event.finish = FinishReason::kStopString;
    Count(event);
    return event;
  }
  if (generated_ >= request_.stopping.max_new_tokens)
    Finish(event, FinishReason::kLength);
  return event;
}

void Sequence::Finish(GenerationEvent& event, FinishReason reason) {
  // Bytes held back for an unfinished character or a possible stop string
  // belong to the output once nothing more can follow.
  std::optional<std::string> matched;
  event.text += stops_.Push(detok_.Flush(), &matched);
  if (matched.has_value()) {
    event.matched_stop = *matched;
    reason = FinishReason::kStopString;
  } else {
    event.text += stops_.Flush();
  }
  finished_ = true;
  event.finish = reason;
  Count(event);
}

void Sequence::Count(GenerationEvent& event) const {
  event.prompt_tokens = prompt_len();
  event.cached_prompt_tokens = cached_;
  event.generated_tokens = generated_;
}

void Sequence::ResumeFrom(int32_t cached) {
  cached_ = cached;
  prefilled_ = cached;
}

void Sequence::StartAt(int32_t prefilled, int32_t cached) {
  cached_ = cached;
  prefilled_ = prefilled;
}

std::vector<int32_t> Sequence::ConsumedTokens() const {
  std::vector<int32_t> tokens(request_.prompt.begin(),
                              request_.prompt.begin() + prefilled_);
  if (prefilled_ == prompt_len() && !output_.empty()) {
    tokens.insert(tokens.end(), output_.begin(),
                  ran_past_end_ ? output_.end() : output_.begin() + fed_);
  }
  return tokens;
}

std::vector<int32_t> Sequence::UnfedTokens() const {
  return std::vector<int32_t>(output_.begin() + fed_, output_.end());
}

int32_t Sequence::DraftRoom() const {
  if (!speculates_ || finished_) return 0;
  // Draws past max_new_tokens would be thrown away.
  const int32_t room = request_.stopping.max_new_tokens - generated_ - 1;
  return std::min({request_.speculative.num_draft_tokens, draft_length_.next(),
                   std::max(0, room)});
}

std::vector<int32_t> Sequence::Draft() const {
  const int32_t room = DraftRoom();
  if (room == 0) return {};
  if (lookup_ != nullptr) return lookup_->Draft(room);
  std::vector<int32_t> draft = proposed_;
  if (static_cast<int32_t>(draft.size()) > room) draft.resize(room);
  return draft;
}

GenerationEvent Sequence::AdvanceRound(const float* logits, int32_t n,
                                       int32_t* accepted) {
  const int32_t fed_before = fed_;
  const int32_t unfed_before = unfed();
  const size_t k = draft_.size();
  GenerationEvent merged;
  size_t i = 0;
  for (;; ++i) {
    GenerationEvent event = Advance(logits + static_cast<int64_t>(i) * n, n);
    const int32_t token = event.token_ids.back();
    if (i == 0) {
      merged = std::move(event);
    } else {
      merged.token_ids.push_back(token);
      merged.text += event.text;
      for (TokenLogprobs& lp : event.logprobs)
        merged.logprobs.push_back(std::move(lp));
      merged.finish = event.finish;
      merged.matched_stop = std::move(event.matched_stop);
      merged.prompt_tokens = event.prompt_tokens;
      merged.cached_prompt_tokens = event.cached_prompt_tokens;
      merged.generated_tokens = event.generated_tokens;
    }
    if (finished_ || i == k || token != draft_[i]) break;
  }
  *accepted = static_cast<int32_t>(i);
  draft_length_.Update(static_cast<int32_t>(k), *accepted);
  if (k > 0) last_round_whole_ = i == k;
  if (k > 0 && i == k) {
    // The spare consumed the unfed tokens and the whole draft: it is the
    // state, and the old slot the next round's spare.
    std::swap(slot_, spare_slot_);
  } else {
    // The slot consumed the unfed tokens if it caught up, else nothing.
    fed_ = catch_up_ ? fed_before + unfed_before : fed_before;
  }
  draft_.clear();
  catch_up_ = true;
  return merged;
}

GenerationEvent Sequence::Abort(FinishReason reason, absl::Status status) {
  GenerationEvent event;
  event.index = index_;
  finished_ = true;
  event.finish = reason;
  event.status = std::move(status);
  Count(event);
  return event;
}

}  // namespace seqboat
