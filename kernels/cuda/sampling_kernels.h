// Launchers of the sampling kernels (sampling_kernels.cu): Backend::SampleRows
// on the GPU. Pointers are device memory; the launcher enqueues on `stream`
// and returns at once. Rows follow engine/backend/sampler.cc step by step
// (penalties, temperature, top-k, top-p, min-p, the draw) with the shared math
// of sampling_math.h, so a row gets the host Sampler's token.
#ifndef SEQBOAT_KERNELS_CUDA_SAMPLING_KERNELS_H_
#define SEQBOAT_KERNELS_CUDA_SAMPLING_KERNELS_H_

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/backend/sample_row.h"

namespace seqboat::cuda {

struct SampleLaunchParams {
  const float* logits = nullptr;  // [m, vocab], raw model rows
  int m = 0;
  int vocab = 0;
  float logit_scale = 1.0f;
  const SampleRow* rows = nullptr;    // [m]
  const int32_t* seen_ids = nullptr;  // the ids rows[j].seen_offset indexes
  // The launch before's tokens, which rows[j].pending_from indexes (device).
  const int32_t* pending_tokens = nullptr;
  // Constrained rows' allowed-id bitmasks, mask_words words each, which
  // rows[j].mask_row indexes (device; sample_row.h).
  const uint32_t* masks = nullptr;
  int32_t mask_words = 0;
  // Whether some row is sampled (not greedy) with top-k or top-p: only then
  // are rows sorted.
  bool any_ranked = false;
  void* workspace = nullptr;  // SampleRowsWorkspaceBytes(m, vocab) bytes
  size_t workspace_bytes = 0;
  int32_t* tokens = nullptr;  // [m] out
};

// Whether a row's draw may need its tokens ranked (a full sort of the row).
// Host and device agree on this through the shared greedy test.
bool SampleRowMayRank(const SampleRow& row);

// Device scratch the launcher needs for m rows of `vocab` logits: the
// tempered logits, sort keys twice over and CUB's sort storage. Asks CUB
// for its size, so needs a current device. 0 when m or vocab is not
// positive or m * vocab does not fit an int (CUB's segment offsets).
size_t SampleRowsWorkspaceBytes(int m, int vocab);

// One block per row prepares it (scaled, sanitised, penalised and tempered
// logits; the greedy argmax; sort keys), a segmented CUB radix sort ranks
// the rows that need it, then one block per row filters and draws.
// Returns the first launch or CUB error.
cudaError_t LaunchSampleRows(const SampleLaunchParams& p, cudaStream_t stream);

// The penalty table's update (sample_row.h, PenaltyTableUpdate): for each of
// the `count` pairs writes[2i] = index, writes[2i + 1] = value (device
// memory, indices within the table), table[index] = value. Enqueued on
// `stream` before the rows that read it.
cudaError_t LaunchPenaltyTableWrites(int32_t* table, const int32_t* writes,
                                     int32_t count, cudaStream_t stream);

}  // namespace seqboat::cuda

#endif  // SEQBOAT_KERNELS_CUDA_SAMPLING_KERNELS_H_
