#include "engine/backend/sampler.h"

#include <algorithm>
#include <cmath>

#include "engine/backend/sampling_math.h"
#include "engine/backend/token_bitmask.h"

namespace seqboat {

Sampler::Sampler(const SamplingParams& params, int32_t valid_vocab,
                 bool want_logprobs, int32_t top_logprobs)
    : params_(params),
      valid_vocab_(std::max<int32_t>(valid_vocab, 0)),
      want_logprobs_(want_logprobs),
      top_logprobs_(std::clamp<int32_t>(top_logprobs, 0, valid_vocab_)) {
  // Written as !(x >= lo) so NaN parameters fall back to "off" as well.
  greedy_ = sampling::IsGreedy(params_.temperature, params_.top_k);
  if (!(params_.repetition_penalty > 0.0f)) params_.repetition_penalty = 1.0f;
  penalize_ = params_.repetition_penalty != 1.0f;
  if (!(params_.top_p > 0.0f && params_.top_p <= 1.0f)) params_.top_p = 1.0f;
  if (!(params_.min_p > 0.0f)) params_.min_p = 0.0f;
  params_.min_p = std::min(params_.min_p, 1.0f);
  if (params_.top_k < 0) params_.top_k = 0;
  if (!std::isfinite(params_.presence_penalty)) params_.presence_penalty = 0;
  if (!std::isfinite(params_.frequency_penalty)) params_.frequency_penalty = 0;
  count_penalize_ =
      params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f;
  if (penalize_) seen_.assign(static_cast<size_t>(valid_vocab_), 0);
  if (count_penalize_) {
    counts_.assign(static_cast<size_t>(valid_vocab_), 0);
    counted_at_.assign(static_cast<size_t>(valid_vocab_), 0);
  }
}

void Sampler::Observe(int32_t token) {
  if (!penalize_ || token < 0 || token >= valid_vocab_) return;
  uint8_t& seen = seen_[static_cast<size_t>(token)];
  if (!seen) seen_ids_.push_back(token);
  seen = 1;
}

void Sampler::Suppress(const std::vector<int32_t>& ids) {
  lease_.suppressed_changed = true;
  for (int32_t id : suppressed_ids_) suppressed_[static_cast<size_t>(id)] = 0;
  suppressed_ids_.clear();
  for (int32_t id : ids) {
    if (id < 0 || id >= valid_vocab_) continue;
    if (suppressed_.empty()) {
      suppressed_.assign(static_cast<size_t>(valid_vocab_), 0);
    }
    uint8_t& flag = suppressed_[static_cast<size_t>(id)];
    if (!flag) suppressed_ids_.push_back(id);
    flag = 1;
  }
}

void Sampler::ObserveGenerated(int32_t token) {
  Observe(token);
  if (!count_penalize_ || token < 0 || token >= valid_vocab_) return;
  int32_t& count = counts_[static_cast<size_t>(token)];
  int32_t& at = counted_at_[static_cast<size_t>(token)];
  if (count == 0) {
    at = static_cast<int32_t>(counted_ids_.size());
    counted_ids_.push_back(token);
  } else if (at < lease_.counted_written) {
    lease_.recounted.push_back(at);
  }
  ++count;
}

SampleRow Sampler::DescribeParams() const {
  SampleRow row;
  row.temperature = greedy_ ? 0.0f : params_.temperature;
  row.top_k = params_.top_k;
  row.top_p = params_.top_p;
  row.min_p = params_.min_p;
  row.repetition_penalty = params_.repetition_penalty;
  row.presence_penalty = params_.presence_penalty;
  row.frequency_penalty = params_.frequency_penalty;
  row.valid_vocab = valid_vocab_;
  row.seed = params_.seed;
  row.step = step_;
  return row;
}

SampleRow Sampler::DescribeNext(std::vector<int32_t>* seen_ids) const {
  SampleRow row = DescribeParams();
  row.seen_offset = static_cast<int32_t>(seen_ids->size());
  row.seen_count = static_cast<int32_t>(seen_ids_.size());
  seen_ids->insert(seen_ids->end(), seen_ids_.begin(), seen_ids_.end());
  row.counted_offset = static_cast<int32_t>(seen_ids->size());
  row.counted_count = static_cast<int32_t>(counted_ids_.size());
  for (int32_t id : counted_ids_) {
    seen_ids->push_back(id);
    seen_ids->push_back(counts_[static_cast<size_t>(id)]);
  }
  row.suppressed_offset = static_cast<int32_t>(seen_ids->size());
  row.suppressed_count = static_cast<int32_t>(suppressed_ids_.size());
  seen_ids->insert(seen_ids->end(), suppressed_ids_.begin(),
                   suppressed_ids_.end());
  return row;
}

namespace {

// Makes `room` hold n ints: a larger room when it is too small (everything
// in it is then written anew: *written drops to 0).
void Fit(PenaltyTables* tables, int32_t n, PenaltyTables::Room* room,
         int32_t* written) {
  if (n <= room->capacity) return;
  tables->Free(*room);
  *room = tables->Allocate(n);
  *written = 0;
}

}  // namespace

SampleRow Sampler::DescribeNext(PenaltyTables* tables) {
  SampleRow row = DescribeParams();
  if (lease_.tables != tables) {
    if (!penalize_ && !count_penalize_ && suppressed_ids_.empty()) return row;
    lease_.Release();
    lease_.tables = tables;
    lease_.suppressed_changed = true;
  }
  if (penalize_) {
    const int32_t n = static_cast<int32_t>(seen_ids_.size());
    Fit(tables, n, &lease_.seen, &lease_.seen_written);
    for (int32_t i = lease_.seen_written; i < n; ++i)
      tables->Write(lease_.seen.offset + i, seen_ids_[static_cast<size_t>(i)]);
    lease_.seen_written = n;
    row.seen_offset = lease_.seen.offset;
    row.seen_count = n;
  }
  if (count_penalize_) {
    const int32_t n = static_cast<int32_t>(counted_ids_.size());
    Fit(tables, 2 * n, &lease_.counted, &lease_.counted_written);
    const int32_t base = lease_.counted.offset;
    // Pairs written before: only their counts moved. A position repeats
    // when its id came again, with the same count now (sample_row.h).
    for (int32_t at : lease_.recounted) {
      if (at >= lease_.counted_written) continue;
      const int32_t id = counted_ids_[static_cast<size_t>(at)];
      tables->Write(base + 2 * at + 1, counts_[static_cast<size_t>(id)]);
    }
    lease_.recounted.clear();
    for (int32_t i = lease_.counted_written; i < n; ++i) {
      const int32_t id = counted_ids_[static_cast<size_t>(i)];
      tables->Write(base + 2 * i, id);
      tables->Write(base + 2 * i + 1, counts_[static_cast<size_t>(id)]);
    }
    lease_.counted_written = n;
    row.counted_offset = base;
    row.counted_count = n;
  }
  const int32_t suppressed = static_cast<int32_t>(suppressed_ids_.size());
  if (lease_.suppressed_changed && suppressed > 0) {
    int32_t unused = 0;
    Fit(tables, suppressed, &lease_.suppressed, &unused);
    for (int32_t i = 0; i < suppressed; ++i) {
      tables->Write(lease_.suppressed.offset + i,
                    suppressed_ids_[static_cast<size_t>(i)]);
    }
  }
  lease_.suppressed_changed = false;
  if (suppressed > 0) {
    row.suppressed_offset = lease_.suppressed.offset;
    row.suppressed_count = suppressed;
  }
  return row;
}

float Sampler::PenalizedLogit(const float* logits, int32_t id) const {
  if (!suppressed_ids_.empty() && suppressed_[static_cast<size_t>(id)]) {
    return -INFINITY;
  }
  if (allowed_ != nullptr && !TokenBitmaskHas(allowed_, id)) return -INFINITY;
  float l = sampling::SanitizeLogit(logits[id]);
  if (penalize_ && seen_[static_cast<size_t>(id)]) {
    l = sampling::PenalizeLogit(l, params_.repetition_penalty);
  }
  if (count_penalize_) {
    l = sampling::PenalizeCount(l, counts_[static_cast<size_t>(id)],
                                params_.presence_penalty,
                                params_.frequency_penalty);
  }
  return l;
}

int32_t Sampler::Sample(const float* logits, int32_t n,
                        TokenLogprobs* logprobs) {
  const uint64_t step = step_++;
  const int32_t v = std::min(valid_vocab_, n);
  if (logits == nullptr || v <= 0) return 0;
  int32_t chosen = greedy_
                       ? ArgMax(logits, v)
                       : Draw(logits, v,
                              sampling::UniformFromBits(
                                  sampling::CounterRandom(params_.seed, step)));
  if (allowed_ != nullptr && !TokenBitmaskHas(allowed_, chosen)) {
    // Every allowed id is -inf or NaN: the grammar still decides.
    for (int32_t id = 0; id < v; ++id) {
      if (TokenBitmaskHas(allowed_, id)) {
        chosen = id;
        break;
      }
    }
  }
  if (want_logprobs_ && logprobs != nullptr) {
    FillLogprobs(logits, v, chosen, logprobs);
  }
  return chosen;
}

int32_t Sampler::ArgMax(const float* logits, int32_t v) const {
  // One pass; the penalty is applied on the fly rather than to a copy.
  int32_t best = 0;
  float best_logit = PenalizedLogit(logits, 0);
  for (int32_t i = 1; i < v; ++i) {
    const float l = PenalizedLogit(logits, i);
    if (sampling::RanksAbove(l, i, best_logit, best)) {
      best = i;
      best_logit = l;
    }
  }
  return best;
}

int32_t Sampler::Draw(const float* logits, int32_t v, double uniform) {
  const float inv_temperature = 1.0f / params_.temperature;
  candidates_.clear();
  for (int32_t i = 0; i < v; ++i) {
    const float l = PenalizedLogit(logits, i) * inv_temperature;
    // Impossible tokens (-inf, NaN) never take part.
    if (l > -INFINITY) candidates_.push_back({l, i});
  }
  if (candidates_.empty()) return ArgMax(logits, v);

  const auto ranks_above = [](const Candidate& a, const Candidate& b) {
    return sampling::RanksAbove(a.logit, a.id, b.logit, b.id);
  };
  bool ranked = false;
  if (params_.top_k > 0 &&
      static_cast<size_t>(params_.top_k) < candidates_.size()) {
    // Selection, not a full sort: O(V) to find the k best. nth_element
    // leaves them in an order of its own; sorting them makes the draw walk
    // them best first, as a backend that samples elsewhere walks them.
    std::nth_element(candidates_.begin(), candidates_.begin() + params_.top_k,
                     candidates_.end(), ranks_above);
    candidates_.resize(static_cast<size_t>(params_.top_k));
    std::sort(candidates_.begin(), candidates_.end(), ranks_above);
    ranked = true;
  }

  float max_logit = candidates_[0].logit;
  for (const Candidate& c : candidates_)
    max_logit = std::max(max_logit, c.logit);
  // An infinite logit takes all the mass (each weight below would be
  // exp(inf - inf), NaN): the best-ranked of them wins, as in greedy.
  if (max_logit == INFINITY) return ArgMax(logits, v);

  if (params_.top_p < 1.0f) {
    // Top-p needs the tokens in order.
    if (!ranked) std::sort(candidates_.begin(), candidates_.end(), ranks_above);
    double total = 0.0;
    for (const Candidate& c : candidates_) {
      total += sampling::SoftmaxWeight(c.logit, max_logit);
    }
    // Smallest prefix whose probability reaches top_p; always at least one.
    const double target = static_cast<double>(params_.top_p) * total;
    double cumulative = 0.0;
    size_t keep = candidates_.size();
    for (size_t i = 0; i < candidates_.size(); ++i) {
      cumulative += sampling::SoftmaxWeight(candidates_[i].logit, max_logit);
      if (cumulative >= target) {
        keep = i + 1;
        break;
      }
    }
    candidates_.resize(keep);
  }

  if (params_.min_p > 0.0f) {
    // Relative to the maximum, so renormalisation after top-k/top-p does not
    // change which tokens pass; the maximum itself always passes.
    const float min_p = params_.min_p;
    candidates_.erase(std::remove_if(candidates_.begin(), candidates_.end(),
                                     [max_logit, min_p](const Candidate& c) {
                                       return !sampling::PassesMinP(
                                           c.logit, max_logit, min_p);
                                     }),
                      candidates_.end());
  }
  double total = 0.0;
  for (const Candidate& c : candidates_) {
    total += sampling::SoftmaxWeight(c.logit, max_logit);
  }
  const double target = uniform * total;
  double cumulative = 0.0;
  for (const Candidate& c : candidates_) {
    cumulative += sampling::SoftmaxWeight(c.logit, max_logit);
    if (cumulative > target) return c.id;
  }
  // Rounding can leave target == total; the last candidate with weight wins.
  for (auto it = candidates_.rbegin(); it != candidates_.rend(); ++it) {
    if (sampling::SoftmaxWeight(it->logit, max_logit) > 0.0f) return it->id;
  }
  return candidates_.back().id;
}

void Sampler::FillLogprobs(const float* logits, int32_t v, int32_t chosen,
                           TokenLogprobs* out) {
  float max_logit = -INFINITY;
  for (int32_t i = 0; i < v; ++i) {
    max_logit = std::max(max_logit, sampling::SanitizeLogit(logits[i]));
  }
  double sum = 0.0;
  if (max_logit > -INFINITY) {
    for (int32_t i = 0; i < v; ++i) {
      sum += sampling::SoftmaxWeight(sampling::SanitizeLogit(logits[i]),
                                     max_logit);
    }
  }
  const auto logprob = [&](int32_t id) {
    if (!(max_logit > -INFINITY)) return -INFINITY;
    return sampling::LogSoftmax(sampling::SanitizeLogit(logits[id]), max_logit,
                                static_cast<float>(sum));
  };

  out->chosen = {chosen, logprob(chosen)};
  out->top.clear();
  if (top_logprobs_ == 0) return;

  // A bounded heap whose front is the worst kept entry: one pass, O(V log N),
  // without copying or sorting the vocabulary.
  const auto ranks_above = [](const Candidate& a, const Candidate& b) {
    return sampling::RanksAbove(a.logit, a.id, b.logit, b.id);
  };
  const size_t limit = static_cast<size_t>(top_logprobs_);
  top_heap_.clear();
  for (int32_t i = 0; i < v; ++i) {
    const Candidate c{sampling::SanitizeLogit(logits[i]), i};
    if (top_heap_.size() < limit) {
      top_heap_.push_back(c);
      std::push_heap(top_heap_.begin(), top_heap_.end(), ranks_above);
    } else if (ranks_above(c, top_heap_.front())) {
      std::pop_heap(top_heap_.begin(), top_heap_.end(), ranks_above);
      top_heap_.back() = c;
      std::push_heap(top_heap_.begin(), top_heap_.end(), ranks_above);
    }
  }
  std::sort_heap(top_heap_.begin(), top_heap_.end(), ranks_above);
  out->top.reserve(top_heap_.size());
  for (const Candidate& c : top_heap_)
    out->top.push_back({c.id, logprob(c.id)});
}

void SampleRowsOnHost(const SampleRowsParams& p) {
  const int vocab = p.vocab;
  const int32_t* seen_ids = p.seen_ids;
  std::vector<float> scaled;
  for (int j = 0; j < p.m; ++j) {
    const SampleRow& row = p.rows[j];
    const float* in = p.logits + static_cast<int64_t>(j) * vocab;
    if (p.logit_scale != 1.0f) {
      scaled.assign(in, in + vocab);
      for (float& l : scaled) l *= p.logit_scale;
      in = scaled.data();
    }
    SamplingParams params;
    params.temperature = row.temperature;
    params.top_k = row.top_k;
    params.top_p = row.top_p;
    params.min_p = row.min_p;
    params.repetition_penalty = row.repetition_penalty;
    params.presence_penalty = row.presence_penalty;
    params.frequency_penalty = row.frequency_penalty;
    params.seed = row.seed;
    // The row holds normalised parameters, which the constructor keeps.
    Sampler sampler(params, row.valid_vocab, false, 0);
    for (int32_t i = 0; i < row.seen_count; ++i)
      sampler.Observe(seen_ids[row.seen_offset + i]);
    if (sampler.count_penalize_) {
      for (int32_t i = 0; i < row.counted_count; ++i) {
        const int32_t* pair = seen_ids + row.counted_offset + 2 * i;
        if (pair[0] < 0 || pair[0] >= sampler.valid_vocab_ || pair[1] <= 0) {
          continue;
        }
        int32_t& count = sampler.counts_[static_cast<size_t>(pair[0])];
        if (count == 0) sampler.counted_ids_.push_back(pair[0]);
        count = pair[1];
      }
    }
    if (row.pending_from >= 0) {
      sampler.ObserveGenerated(p.pending_tokens[row.pending_from]);
    }
    if (row.suppressed_count > 0) {
      sampler.Suppress(std::vector<int32_t>(
          seen_ids + row.suppressed_offset,
          seen_ids + row.suppressed_offset + row.suppressed_count));
    }
    if (row.mask_row >= 0) {
      sampler.SetAllowedMask(p.masks +
                             static_cast<int64_t>(row.mask_row) * p.mask_words);
    }
    sampler.step_ = row.step;
    p.tokens[j] = sampler.Sample(in, vocab, nullptr);
  }
}

}  // namespace seqboat
