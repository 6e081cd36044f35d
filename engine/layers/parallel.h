// Falcon-H1's layer (MODELS.md §16.1): one pre-norm, then a Mamba-2 mixer and
// an attention mixer on the same normed rows, both outputs added to the
// residual, r ← r + Mamba2(Norm(r)) + Attn(Norm(r)). Each operator is its own
// kind's block built without a norm (Mixer), so the math, the kernels and the
// per-slot state are theirs; a slot holds both states, Mamba-2's first.
#ifndef SEQBOAT_ENGINE_LAYERS_PARALLEL_H_
#define SEQBOAT_ENGINE_LAYERS_PARALLEL_H_

#include "engine/layers/attention.h"
#include "engine/layers/block.h"
#include "engine/layers/mamba2.h"

namespace seqboat {

// config.json's "parallel_mamba2_attention": "norm" (the one pre-norm, any
// type PreNorm binds), "mamba2" and "attention" objects holding those kinds'
// own fields (no "kind" and no "norm" of their own). Tensors: norm.*,
// mamba.* (mamba2's names less norm.weight) and attn.* (attention's).
struct ParallelConfig {
  Mamba2Config mamba2;
  AttentionConfig attention;
};

extern const BlockKind kParallelMamba2AttentionBlock;

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_LAYERS_PARALLEL_H_
