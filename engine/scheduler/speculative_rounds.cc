// The scheduler's share of speculative decoding (Sequence holds a round's
// rule): which sequences draft this step, their spare slots, the rounds'
// segments and their counts.
#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "engine/scheduler/scheduler.h"
#include "spdlog/spdlog.h"

namespace seqboat {
namespace {

// Whether `seq` may run a round this step: it speculates, is not held
// (pipelined), and has read its whole prompt.
bool RoundDue(const Sequence& seq, const SequenceView& v) {
  return seq.speculates() && !v.hold && v.prefilled >= v.prompt_len;
}

}  // namespace

bool Scheduler::RoundsRun() const {
  return static_cast<int64_t>(running_.size()) <=
         int64_t{options_.speculative_max_batch};
}

bool Scheduler::any_speculating() const {
  const bool rounds = RoundsRun();
  for (const auto& seq : running_) {
    if (seq->finished() || !seq->speculates()) continue;
    // Unfed tokens beyond the last one are caught up on the host's plan.
    if (rounds || seq->unfed() > 1) return true;
  }
  return false;
}

bool Scheduler::TakeSpareSlot(Sequence& seq) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!waiting_.empty() || arena_.free_slots() == 0) return false;
  seq.set_spare_slot(*arena_.Acquire());
  free_slots_ = arena_.free_slots();
  return true;
}

void Scheduler::ReturnSpareSlots() {
  for (auto& seq : running_) {
    if (seq->spare_slot() >= 0) {
      arena_.Release(seq->spare_slot());
      seq->set_spare_slot(-1);
    }
  }
}

void Scheduler::ProposeDrafts(const std::vector<SequenceView>& views) {
  std::vector<ModelDrafter::Ask> asks;
  std::vector<Sequence*> askers;
  for (size_t i = 0; i < running_.size(); ++i) {
    Sequence& seq = *running_[i];
    const int32_t room = seq.DraftRoom();
    if (seq.request().speculative.method != SpeculativeMethod::kDraftModel ||
        !RoundDue(seq, views[i]) || room == 0) {
      continue;
    }
    asks.push_back({&seq, &seq.request().prompt, &seq.output(), room, {}});
    askers.push_back(&seq);
  }
  if (asks.empty()) return;
  if (absl::Status s = drafter_->Propose(asks); !s.ok()) {
    // Drafts only speed decoding up: the round runs as a plain decode.
    spdlog::warn("draft model step failed, drafting nothing: {}", s.ToString());
    return;
  }
  for (size_t i = 0; i < asks.size(); ++i)
    askers[i]->set_proposed(std::move(asks[i].draft));
}

void Scheduler::NoteContextRows(const Sequence& seq, StepBatch& batch,
                                int32_t row, int64_t pos, int32_t len) const {
  if (mtp_ != nullptr && seq.speculates() &&
      seq.request().speculative.method == SpeculativeMethod::kMtp) {
    batch.context_rows.push_back({&seq, row, pos, len});
  }
}

void Scheduler::ProposeMtp(const std::vector<SequenceView>& views) {
  std::vector<MtpDrafter::Ask> asks;
  std::vector<Sequence*> askers;
  for (size_t i = 0; i < running_.size(); ++i) {
    Sequence& seq = *running_[i];
    const int32_t room = seq.DraftRoom();
    if (seq.request().speculative.method != SpeculativeMethod::kMtp ||
        !RoundDue(seq, views[i]) || room == 0) {
      continue;
    }
    const int64_t context =
        seq.prompt_len() + static_cast<int64_t>(seq.output().size());
    asks.push_back({&seq, context, room, {}});
    askers.push_back(&seq);
  }
  if (asks.empty()) return;
  if (absl::Status s = mtp_->Propose(asks); !s.ok()) {
    spdlog::warn("MTP head step failed, drafting nothing: {}", s.ToString());
    for (Sequence* seq : askers) seq->set_proposed({});
    return;
  }
  for (size_t i = 0; i < asks.size(); ++i)
    askers[i]->set_proposed(std::move(asks[i].draft));
}

void Scheduler::ObserveStep(const StepBatch& batch) {
  if (mtp_ == nullptr || batch.context_rows.empty()) return;
  // By the running sequences: one the step finished may be gone.
  absl::flat_hash_map<const Sequence*, const Sequence*> live;
  for (const auto& seq : running_) {
    if (!seq->finished()) live[seq.get()] = seq.get();
  }
  std::vector<MtpDrafter::Feed> feeds;
  for (const ContextRows& c : batch.context_rows) {
    auto it = live.find(c.seq);
    if (it == live.end()) continue;
    const Sequence& seq = *it->second;
    const std::vector<int32_t>& prompt = seq.request().prompt;
    const std::vector<int32_t>& output = seq.output();
    const int64_t p = static_cast<int64_t>(prompt.size());
    const int64_t n = p + static_cast<int64_t>(output.size());
    // Rows whose next token is known: a round's rejected drafts are not.
    const int64_t len = std::min<int64_t>(c.len, n - 1 - c.pos);
    if (len <= 0) continue;
    MtpDrafter::Feed feed{&seq, c.row, c.pos, static_cast<int32_t>(len), {}};
    for (int64_t i = c.pos + 1; i <= c.pos + len; ++i)
      feed.next.push_back(i < p ? prompt[i] : output[i - p]);
    feeds.push_back(std::move(feed));
  }
  if (feeds.empty()) return;
  if (absl::Status s = mtp_->Observe(feeds); !s.ok()) {
    // Its sequences draft nothing until the head has read them again.
    spdlog::warn("MTP head step failed: {}", s.ToString());
  }
}

int32_t Scheduler::PlanRounds(const std::vector<SequenceView>& views) {
  const bool rounds = RoundsRun();
  if (rounds && drafter_ != nullptr) ProposeDrafts(views);
  if (rounds && mtp_ != nullptr) ProposeMtp(views);
  int32_t draft_rows = options_.max_draft_rows;
  int32_t extra = 0;
  for (size_t i = 0; i < running_.size(); ++i) {
    Sequence& seq = *running_[i];
    const SequenceView& v = views[i];
    if (!RoundDue(seq, v)) continue;
    std::vector<int32_t> draft;
    if (rounds) draft = seq.Draft();
    if (static_cast<int32_t>(draft.size()) > draft_rows) draft.resize(0);
    if (!draft.empty() && seq.spare_slot() < 0 && !TakeSpareSlot(seq)) {
      draft.clear();
    }
    const int32_t unfed = seq.unfed();
    const int32_t k = static_cast<int32_t>(draft.size());
    seq.PlanRound(std::move(draft));
    // The slot's catch-up (if any) and the spare's unfed + draft.
    const int32_t catch_up = k > 0 && seq.round_catches_up() ? unfed : 0;
    extra += catch_up + unfed + k - 1;
    draft_rows -= k;
  }
  return extra;
}

void Scheduler::AppendRound(Sequence& seq, StepBatch& batch) {
  StepRows& rows = batch.rows;
  const std::vector<int32_t> unfed = seq.UnfedTokens();
  const std::vector<int32_t>& draft = seq.round_draft();
  const int32_t nu = static_cast<int32_t>(unfed.size());
  int target = seq.slot();
  if (!draft.empty()) {
    // In op order, before this step: the spare starts from the slot's state.
    arena_.CopySlot(seq.spare_slot(), seq.slot());
    if (seq.round_catches_up()) {
      rows.segs.push_back({seq.slot(), rows.n(), nu});
      rows.ids.insert(rows.ids.end(), unfed.begin(), unfed.end());
    }
    target = seq.spare_slot();
  }
  const int32_t start = rows.n();
  rows.ids.insert(rows.ids.end(), unfed.begin(), unfed.end());
  rows.ids.insert(rows.ids.end(), draft.begin(), draft.end());
  const int32_t len = rows.n() - start;
  rows.segs.push_back({target, start, len});
  NoteContextRows(
      seq, batch, start,
      seq.prompt_len() + static_cast<int64_t>(seq.output().size()) - nu, len);
  for (int32_t r = nu - 1; r < len; ++r) {
    rows.logit_rows.push_back(start + r);
    batch.logit_seqs.push_back(&seq);
  }
  seq.set_last_step(batch.step);
}

void Scheduler::DeliverRound(Sequence& seq, const float* logits, int32_t n) {
  const int32_t k = static_cast<int32_t>(seq.round_draft().size());
  int32_t accepted = 0;
  GenerationEvent event = seq.AdvanceRound(logits, n, &accepted);
  if (k > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    for (SpeculationCounts* c :
         {&speculation_,
          &speculation_by_method_[std::string(
              SpeculativeMethodName(seq.request().speculative.method))]}) {
      ++c->drafts;
      c->draft_tokens += k;
      c->accepted_tokens += accepted;
      auto& per_round = c->accepted_per_round;
      if (per_round.size() <= static_cast<size_t>(accepted))
        per_round.resize(static_cast<size_t>(accepted) + 1);
      ++per_round[static_cast<size_t>(accepted)];
    }
  }
  Deliver(seq, std::move(event));
}

}  // namespace seqboat
