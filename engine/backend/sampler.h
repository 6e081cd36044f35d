// Turns one row of logits into a token id with one request's sampling
// parameters. Processing order matches Hugging Face / vLLM: repetition
// penalty (over prompt and output), frequency and presence penalties (over
// the output only, as vLLM and OpenAI define them), temperature (0 =
// greedy), top-k, top-p, min-p, then a draw from the renormalised
// remainder, walked best first when top-k or top-p ranked it and in id
// order otherwise. Reproducible: the draw for the k-th Sample() call uses
// CounterRandom(seed, k) from sampling_math.h, so the same seed and logits
// give the same tokens on any backend, including a backend that samples on
// the device (Backend::SampleRows, fed by DescribeNext and CountDraw). One
// instance per request, used from the engine thread only.
#ifndef SEQBOAT_ENGINE_BACKEND_SAMPLER_H_
#define SEQBOAT_ENGINE_BACKEND_SAMPLER_H_

#include <cstdint>
#include <vector>

#include "engine/backend/penalty_table.h"
#include "engine/backend/sample_row.h"
#include "engine/backend/sampling_params.h"

namespace seqboat {

class Sampler {
 public:
  // valid_vocab: ids >= valid_vocab (padding rows of the embedding) are never
  // sampled. Parameters are assumed validated by the server; out-of-range
  // values are clamped rather than trusted (penalty <= 0 means off,
  // temperature below 1e-5 means greedy, top_p outside (0, 1] means off,
  // a presence or frequency penalty that is not finite means off).
  Sampler(const SamplingParams& params, int32_t valid_vocab, bool want_logprobs,
          int32_t top_logprobs);

  // A prompt token, for the repetition penalty. Ids outside
  // [0, valid_vocab) are ignored.
  void Observe(int32_t token);
  // A generated token: the repetition penalty's, and counted for the
  // presence and frequency penalties.
  void ObserveGenerated(int32_t token);
  // Ids that may not be drawn from now on (replacing any earlier ones; an
  // empty list lifts the rule): their logits count as -inf in the draw and
  // the argmax, as vLLM's min_tokens masks EOS and the stop ids. Ids outside
  // [0, valid_vocab) are ignored. Logprobs stay the model's own.
  void Suppress(const std::vector<int32_t>& ids);
  // The ids a grammar allows for the next draws (a token_bitmask.h bitmask
  // over at least valid_vocab ids, owned by the caller and valid until the
  // draw), or nullptr to lift the rule: the others count as -inf in the
  // draw and the argmax, as suppressed ids do, and logprobs stay the
  // model's own. When every allowed id is impossible under the logits, the
  // lowest allowed id is drawn. DescribeNext does not carry the mask: a
  // backend's draw gets it as SampleRow::mask_row, set by the caller.
  void SetAllowedMask(const uint32_t* words) { allowed_ = words; }
  bool has_allowed_mask() const { return allowed_ != nullptr; }

  // logits: the model's row (n >= valid_vocab entries; if n is smaller only n
  // are used). Returns the chosen id. When the sampler was built with
  // want_logprobs and `logprobs` is non-null, fills it with the chosen
  // token's and the top_logprobs best tokens' log-probabilities under the
  // raw model distribution (log-softmax over valid_vocab), best first.
  int32_t Sample(const float* logits, int32_t n, TokenLogprobs* logprobs);

  // Whether a drawn token changes later draws' logits (a repetition,
  // presence or frequency penalty is on, after normalisation).
  bool CountsTokens() const { return penalize_ || count_penalize_; }

  // Number of draws so far: the counter of the next random draw.
  uint64_t step() const { return step_; }

  // The next draw for a backend to make: the normalised parameters, the
  // current step and valid_vocab, with the ids the repetition penalty
  // applies to, then the (id, count) pairs of the generated ids, then the
  // suppressed ids, appended to *seen_ids (the row's seen_offset,
  // counted_offset and suppressed_offset index that array).
  SampleRow DescribeNext(std::vector<int32_t>* seen_ids) const;
  // The same row with its lists in `tables` (penalty_table.h): the first
  // call writes them whole, later calls only what changed since the last
  // (new ids, changed counts, the suppressed ids after Suppress), so the
  // work per draw does not grow with the history; a sampler without
  // penalties or suppressed ids writes nothing. The rooms are the
  // sampler's until it is destroyed, and `tables` must outlive it. A call
  // with other tables than the last starts over in them.
  SampleRow DescribeNext(PenaltyTables* tables);
  // Counts a draw made elsewhere from DescribeNext's row, as Sample() counts
  // its own; the caller still Observe()s the token.
  void CountDraw() { ++step_; }

 private:
  struct Candidate {
    float logit;
    int32_t id;
  };

  SampleRow DescribeParams() const;
  float PenalizedLogit(const float* logits, int32_t id) const;
  int32_t ArgMax(const float* logits, int32_t v) const;
  int32_t Draw(const float* logits, int32_t v, double uniform);
  void FillLogprobs(const float* logits, int32_t v, int32_t chosen,
                    TokenLogprobs* out);

  SamplingParams params_;
  int32_t valid_vocab_;
  bool want_logprobs_;
  int32_t top_logprobs_;
  bool greedy_;
  bool penalize_;                        // repetition penalty
  bool count_penalize_;                  // presence or frequency penalty
  std::vector<uint8_t> seen_;            // 1 for ids passed to Observe
  std::vector<int32_t> seen_ids_;        // the same ids, each once
  std::vector<int32_t> counts_;          // times each id was generated
  std::vector<int32_t> counted_ids_;     // ids with a count, each once
  std::vector<int32_t> counted_at_;      // each id's place in counted_ids_
  std::vector<uint8_t> suppressed_;      // 1 for ids that may not be drawn
  std::vector<int32_t> suppressed_ids_;  // the same ids, each once
  const uint32_t* allowed_ = nullptr;    // SetAllowedMask's, not owned
  uint64_t step_ = 0;
  PenaltyTableLease lease_;  // DescribeNext(tables)'s lists
  // Scratch reused across steps so the per-token path does not allocate.
  std::vector<Candidate> candidates_;
  std::vector<Candidate> top_heap_;

  friend void SampleRowsOnHost(const SampleRowsParams& p);
};

// The host reference of Backend::SampleRows, for backends whose logits are
// host memory: tokens[j] is the token a Sampler with rows[j]'s parameters,
// penalised ids, allowed-id mask and step picks from logit_scale *
// logits[j * vocab, +vocab) (the scaling Model::Forward applies).
void SampleRowsOnHost(const SampleRowsParams& p);

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_BACKEND_SAMPLER_H_
