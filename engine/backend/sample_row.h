// One row of a batched sampling op (Backend::SampleRows): a request's sampling
// parameters as its Sampler normalised them, the counter of the draw, and
// where the row's penalised ids (and the generated ids with their counts)
// lie in the batch's flat id array or the backend's penalty table, and which
// allowed-id bitmask (if any) limits its draw. Plain data with the same layout
// on the host and in CUDA kernels.
#ifndef SEQBOAT_ENGINE_BACKEND_SAMPLE_ROW_H_
#define SEQBOAT_ENGINE_BACKEND_SAMPLE_ROW_H_

#include <stdint.h>

namespace seqboat {

struct SampleRow {
  float temperature = 0.0f;         // greedy below sampling::kMinTemperature
  int32_t top_k = 0;                // 0: off; 1: greedy
  float top_p = 1.0f;               // in (0, 1]; 1: off
  float min_p = 0.0f;               // in [0, 1]; 0: off
  float repetition_penalty = 1.0f;  // > 0; 1: off
  int32_t valid_vocab = 0;          // ids >= this are never chosen
  uint64_t seed = 0;
  uint64_t step = 0;  // the draw uses CounterRandom(seed, step)
  // Distinct ids in [0, valid_vocab) whose logits the penalty applies to:
  // seen_ids[seen_offset, seen_offset + seen_count) of the op's id array.
  int32_t seen_offset = 0;
  int32_t seen_count = 0;
  float presence_penalty = 0.0f;   // finite; 0: off
  float frequency_penalty = 0.0f;  // finite; 0: off
  // Distinct generated ids with how often each was generated, as pairs
  // (id, count): seen_ids[counted_offset, counted_offset + 2 * counted_count)
  // of the same array. The presence and frequency penalties apply to them,
  // after the repetition penalty.
  int32_t counted_offset = 0;
  int32_t counted_count = 0;
  // Distinct ids that may not be drawn (min_new_tokens holding back EOS and
  // the stop ids): seen_ids[suppressed_offset, +suppressed_count). Their
  // logits count as -inf, after the penalties.
  int32_t suppressed_offset = 0;
  int32_t suppressed_count = 0;
  // A row that runs ahead of its sequence's pending token (the previous
  // launch's draw, not yet observed by the host): that token is
  // pending_tokens[pending_from] (SampleRowsParams), and it counts as seen
  // and generated once more, as the Sampler's ObserveGenerated would count
  // it. -1: the lists are complete.
  int32_t pending_from = -1;
  // A constrained row (engine/grammar): only the ids set in its bitmask,
  // masks[mask_row * mask_words, +mask_words) of SampleRowsParams, may be
  // drawn; the others count as -inf, after the penalties, and when every
  // allowed id is -inf the lowest allowed id is drawn (the Sampler's rule).
  // -1: no mask.
  int32_t mask_row = -1;
};

static_assert(sizeof(SampleRow) == 80, "SampleRow is copied to the device");

// The penalty table's part in a SampleRows call (engine/backend/
// penalty_table.h). With size > 0 the rows' seen, counted and suppressed
// offsets index the backend's penalty table, its memory kept from call to
// call, instead of SampleRowsParams::seen_ids: the table first grows to
// `size` ints (keeping what it holds), then takes the writes, write_count
// pairs (index, value) of host memory, before any row reads it. An index
// repeats within one update only with the same value, so the writes may
// land in any order (a device applies them at once).
struct PenaltyTableUpdate {
  int32_t size = 0;
  const int32_t* writes = nullptr;
  int32_t write_count = 0;
};

// Backend::SampleRows: tokens[j] = the token the host Sampler picks, with
// rows[j]'s parameters, penalised ids and step, from row j of
// logit_scale * logits. rows, seen_ids (the flat id array the rows index) and
// tokens are host memory; logits [m, vocab] the backend's, and so are
// pending_tokens: the tokens of the launch before (Backend::SampledTokens
// before this launch), which rows with pending_from >= 0 read.
struct SampleRowsParams {
  const float* logits = nullptr;
  int m = 0;
  int vocab = 0;
  float logit_scale = 1.0f;
  const SampleRow* rows = nullptr;
  const int32_t* seen_ids = nullptr;
  const int32_t* pending_tokens = nullptr;
  int32_t* tokens = nullptr;
  // The constrained rows' bitmasks (token_bitmask.h), host memory like
  // seen_ids: mask_words words each, at least TokenBitmaskWords(vocab) of
  // them; read only by rows with mask_row >= 0.
  const uint32_t* masks = nullptr;
  int32_t mask_words = 0;
  // size 0: the rows index seen_ids, as above.
  PenaltyTableUpdate table;
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_BACKEND_SAMPLE_ROW_H_
