// A block of the layer stack, written once against the Backend op set.
// Each block owns its weights (as backend handles) and a fixed-size state per
// arena slot; Forward runs every token of an engine step through it.
#ifndef SEQBOAT_ENGINE_LAYERS_LAYER_H_
#define SEQBOAT_ENGINE_LAYERS_LAYER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/backend/backend.h"
#include "engine/backend/step_rows.h"
#include "engine/state/slot_state.h"

namespace seqboat {

// A counter a block reports about its work so far, e.g. how many tokens a
// SeqBoat block's GAU evaluated out of how many it saw.
struct LayerStat {
  std::string name;
  int64_t value = 0;
};

// What a block sees of one engine step: its rows (ids packed into segments,
// one per sequence), the backend and scratch.
struct StepContext {
  Backend* backend = nullptr;
  const StepRows* rows = nullptr;  // host
  // Device, ScratchFloatsPerRow() * n floats at least.
  float* scratch = nullptr;

  int n() const { return rows->n(); }
  const Segment* segs() const { return rows->segs.data(); }
  int nsegs() const { return rows->nsegs(); }
};

// Its recurrent state (SlotState) lives in the arena, one region per block.
class Layer : public SlotState {
 public:
  // Scratch floats per step row that Forward may use.
  virtual int64_t ScratchFloatsPerRow() const = 0;
  // residual [n, d_model] is updated in place by the block.
  virtual absl::Status Forward(const StepContext& ctx, float* residual) = 0;
  // Appends the block's counters (none by default). settled: no step is in
  // flight, so reading counters from backend memory waits for nothing; a
  // block may otherwise report counts that lag its steps.
  virtual void AppendStats(std::vector<LayerStat>* /*out*/,
                           bool /*settled*/) const {}
};

// A block whose body can run on an input normed by its caller: the
// parallel_mamba2_attention kind norms once and runs two of them on the same
// normed rows (MODELS.md §16.1), so neither may norm again or read the
// residual as its input.
class Mixer : public Layer {
 public:
  // residual[n, d_model] += f(x) for x [n, d_model], which is left unchanged
  // and read only before the residual is written; uses ctx.scratch as
  // Forward does.
  virtual absl::Status Mix(const StepContext& ctx, const float* x,
                           float* residual) = 0;
  // Mix on Norm(x) (norm.kind != kNone): the norm folds into the mixer's
  // first GEMM (GemmParams::norm), which leaves Norm(x) in norm.out for the
  // mixer's later readers and the caller's. The mixer's own scratch starts
  // n * d_model floats into ctx.scratch, where norm.out may lie. kNone is
  // Mix(x).
  virtual absl::Status MixNormed(const StepContext& ctx, const float* x,
                                 const GemmNorm& norm, float* residual) = 0;
};

// The GEMM most blocks make, y[n, w.rows] = x[n, w.cols] · wᵀ + bias over
// contiguous rows; a caller sets ldx, ldy or accumulate after when its rows
// are a slice of a wider buffer or it adds into the residual.
inline GemmParams Projection(const float* x, int n, const Matrix& w,
                             const float* bias, float* y) {
  GemmParams p;
  p.x = x;
  p.ldx = static_cast<int>(w.cols);
  p.n = n;
  p.w = w;
  p.bias = bias;
  p.y = y;
  p.ldy = static_cast<int>(w.rows);
  return p;
}

// The activation after a stacked [up; gate] projection (or a plain up one):
// h [rows, ld] holds up's f columns, then gate's when gated; up's columns
// become act(up), or act(gate) ⊙ up when gated, in place.
inline ActivateMulParams StackedActivation(float* h, int rows, int f, int ld,
                                           Activation act, bool gated) {
  ActivateMulParams p;
  p.a = gated ? h + f : h;
  p.lda = ld;
  p.b = gated ? h : nullptr;
  p.ldb = ld;
  p.n = rows;
  p.f = f;
  p.act = act;
  p.out = h;
  p.ldo = ld;
  return p;
}

// Scratch floats a row that a GEMM's 16-bit input copy of `cols` columns
// may take (HalfInputAt): half a float a value, plus room to align.
inline int64_t HalfInputFloatsPerRow(int64_t cols) {
  return (cols + 1) / 2 + 4;
}

// The 16-bit copy of the input of a GEMM on w at n rows (half_rows.h) that
// the op producing that input writes beside its fp32 rows and the GEMM
// reads (GemmParams::x16), placed 16-byte aligned in `region` (n *
// HalfInputFloatsPerRow(w.cols) scratch floats); no copy (format kNone,
// region untouched) where the backend's GEMM reads fp32.
inline HalfRows HalfInputAt(const Backend& be, const Matrix& w, int n,
                            float* region) {
  HalfRows r;
  r.format = be.GemmInputFormat(w, n);
  if (r.format == HalfFormat::kNone) return r;
  const uintptr_t at =
      (reinterpret_cast<uintptr_t>(region) + 15) & ~static_cast<uintptr_t>(15);
  r.data = reinterpret_cast<void*>(at);
  r.ld = static_cast<int>(w.cols);
  return r;
}

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_LAYERS_LAYER_H_
