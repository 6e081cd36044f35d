// The op set every layer is written against. The CPU backend (engine/cpu) and
// the CUDA backend (kernels/) implement it; parity tests run both. Pointers
// passed to ops are device pointers of the backend that made them; small
// descriptors (token ids, segments, row lists) are host memory.
#ifndef SEQBOAT_ENGINE_BACKEND_BACKEND_H_
#define SEQBOAT_ENGINE_BACKEND_BACKEND_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend/attention_params.h"
#include "engine/backend/ffn_math.h"
#include "engine/backend/mamba2_params.h"
#include "engine/backend/mamba_params.h"
#include "engine/backend/s4d_params.h"
#include "engine/backend/sample_row.h"
#include "engine/backend/segment.h"
#include "engine/backend/seqboat_params.h"
#include "engine/backend/seqboat_shape.h"

namespace seqboat {

// A weight matrix [rows, cols] (PyTorch Linear layout: out x in) as the
// backend stores it. Owned by the backend's memory; the layer keeps the handle.
struct Matrix {
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  // Stored in fp32 whatever the backend's storage type (UploadMatrixFp32).
  bool fp32 = false;
};

// Device memory with an owner; freed when the last handle goes.
using DeviceBuffer = std::shared_ptr<void>;

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // For messages: "cpu", "CUDA device 0 (NVIDIA H100 80GB HBM3)".
  virtual std::string DeviceName() const { return name(); }
  // Bytes the device can still allocate, or -1 when it cannot tell (the CPU:
  // the arena is then only bounded by the allocator).
  virtual int64_t FreeBytes() const { return -1; }
  // Device bytes of the weights uploaded so far (UploadMatrix in its storage
  // type, UploadVector in fp32), or -1 when the backend aliases host memory.
  virtual int64_t WeightBytes() const { return -1; }

  // --- step capture --------------------------------------------------------
  // Decode batch sizes the backend can replay cheaply; the model pads a
  // decode-only step up to the smallest bucket that holds it (zero-length
  // segments, so padded rows touch no state). Empty: never pad.
  virtual std::vector<int> CaptureBuckets(int /*max_slots*/) const {
    return {};
  }
  // Runs `step`: op calls whose shapes and descriptor sizes depend only on
  // `key`, with no copy to the host inside. A backend may record the calls
  // the first time and replay the recording afterwards (host descriptors are
  // re-read on every replay). The default runs `step` as it is.
  virtual absl::Status RunCaptured(int64_t /*key*/,
                                   const std::function<absl::Status()>& step) {
    return step();
  }

  // The first asynchronous failure since the last call (a kernel fault, a
  // failed launch), then cleared. Ops return nothing; the model checks this
  // once per step.
  virtual absl::Status TakeError() { return absl::OkStatus(); }
  // OK while the backend can run further steps. After a fault that leaves
  // the device unusable for the rest of the process (CUDA's sticky errors:
  // an illegal address, a failed launch, ...), that fault, for good: the
  // engine then refuses work and the server stops so that it is restarted.
  virtual absl::Status Health() const { return absl::OkStatus(); }

  // --- memory ---------------------------------------------------------------
  // Whether device memory is the host's own (the CPU backend): ops may then
  // write into a caller's host buffer directly, with no CopyToHost after.
  virtual bool MemoryIsHost() const { return false; }
  // Zeroed device memory, aligned for vector loads.
  virtual absl::StatusOr<DeviceBuffer> Alloc(size_t bytes) = 0;
  virtual void Zero(void* dst, size_t bytes) = 0;
  virtual void CopyToDevice(void* dst, const void* host_src, size_t bytes) = 0;
  virtual void CopyToHost(void* host_dst, const void* src, size_t bytes) = 0;
  // Makes a device copy of a vector (norm weights, biases, recurrence params).
  virtual absl::StatusOr<const float*> UploadVector(const float* host,
                                                    int64_t n) = 0;
  // Makes the backend's matrix from fp32 host data, in the backend's own
  // memory and storage type (`host` may go once this returns).
  virtual absl::StatusOr<Matrix> UploadMatrix(const float* host, int64_t rows,
                                              int64_t cols) = 0;
  // UploadMatrix kept in fp32 even where the backend stores matrices in 16
  // bits: for routers, whose rounding would flip near-tied discrete choices
  // (MODELS.md routes in fp32). The default suits backends that store fp32.
  virtual absl::StatusOr<Matrix> UploadMatrixFp32(const float* host,
                                                  int64_t rows, int64_t cols) {
    return UploadMatrix(host, rows, cols);
  }

  // --- dense ops over the n rows of a step ---------------------------------
  // out[i, :] = scale * table[ids[i], :]; ids on the host; table is a matrix
  // [vocab, d] from UploadMatrix (so a tied head shares it).
  virtual void Embed(const int32_t* ids, int n, const Matrix& table,
                     float scale, float* out) = 0;
  // out[i, :] = x[i, :] / rms(x[i, :]) * w                     (w may be null)
  virtual void RmsNorm(const float* x, int n, int d, const float* w, float eps,
                       float* out) = 0;
  // RmsNorm over the first d columns of rows with strides ldx and ldo (a
  // column slice of a wider projection, e.g. Jamba's dt/B/C norms). out may
  // alias x.
  virtual void RmsNormStrided(const float* x, int ldx, int n, int d,
                              const float* w, float eps, float* out,
                              int ldo) = 0;
  // out[i, :] = (x[i, :] - mean) / sqrt(var + eps) * w + b   (w, b may be null)
  virtual void LayerNorm(const float* x, int n, int d, const float* w,
                         const float* b, float eps, float* out) = 0;
  // y[i, :] (+)= x[i, :] · Wᵀ + bias; x rows have stride ldx, y rows ldy.
  // accumulate adds into y (the residual add of a block).
  virtual void Gemm(const float* x, int ldx, int n, const Matrix& w,
                    const float* bias, float* y, int ldy, bool accumulate) = 0;
  // out[j, :] = x[rows[j], :]                                  rows on the host
  virtual void GatherRows(const float* x, int d, const int32_t* rows, int m,
                          float* out) = 0;

  // --- recurrent ops: one state per segment's slot
  // Mamba-1's causal depthwise conv + SiLU and selective scan over each
  // segment's tokens (MODELS.md §1.3/1.4; arguments in mamba_params.h).
  virtual void MambaConv(const MambaConvParams& p) = 0;
  virtual void MambaScan(const MambaScanParams& p) = 0;
  // Mamba-2's multi-head scan over each segment's tokens (MODELS.md §7.4;
  // arguments and math in mamba2_params.h / mamba2_math.h). Its conv over
  // xBC is MambaConv.
  virtual void Mamba2Scan(const Mamba2ScanParams& p) = 0;
  // y ⊙ SiLU(z) normalised per column group and scaled (MODELS.md §7.5).
  virtual void GatedRmsNorm(const GatedRmsNormParams& p) = 0;

  // --- attention over a sink + rolling-window KV cache (MODELS.md §3.4) ----
  // Arguments and contracts in attention_params.h. SinkAttention reads the
  // cache only; SinkCacheAppend then stores the step's keys.
  virtual void SinkAttention(const SinkAttentionParams& p) = 0;
  virtual void SinkCacheAppend(const SinkAppendParams& p) = 0;

  // --- SeqBoat (MODELS.md §2; math in seqboat_math.h) ----------------------
  // OK when this backend can run SeqBoat blocks of `shape`, else why not.
  // Asked when a model loads, so that no step fails for it later.
  virtual absl::Status CheckSeqBoat(const SeqBoatShape& /*shape*/) const {
    return absl::OkStatus();
  }
  // MD-EMA over each segment's tokens (arguments in seqboat_params.h).
  virtual void SeqBoatEma(const SeqBoatEmaParams& p) = 0;
  // Latent configurator over n rows of router logits u (stride ldu):
  // conf [n] (0 for inactive rows), compact [n] (a row's index among the
  // active rows, -1 if inactive), active [1 + n] = count, then the active
  // rows in order. temperature: [1] device. The caller copies `active` to
  // the host once to size the GAU's GEMMs.
  virtual void SeqBoatRoute(const float* u, int ldu, int n,
                            const float* temperature, float* conf,
                            int32_t* compact, int32_t* active) = 0;
  // Working-memory attention for the active tokens (seqboat_params.h). It
  // also advances every segment's stream position, so it runs every step
  // even when no token is active.
  virtual void SeqBoatAttend(const SeqBoatAttendParams& p) = 0;
  // out [n, d] = SiLU(s + g + conf · y[compact]) (y term 0 when compact < 0);
  // g has stride ldg, y is [m, d]. out may alias s.
  virtual void SeqBoatMix(const float* s, const float* g, int ldg,
                          const float* y, const float* conf,
                          const int32_t* compact, int n, int d, float* out) = 0;

  // --- feed-forward, mixture of experts, S4D (mlp, moe, s4d) ----------------
  // out[i, j] (+)= act(a[i, j]) * b[i, j]   (b null: * 1) for j < f; a, b, out
  // rows have strides lda, ldb, ldo. out may alias a.
  virtual void ActivateMul(const float* a, int lda, const float* b, int ldb,
                           int n, int f, Activation act, float* out, int ldo,
                           bool accumulate) = 0;
  // y[i, :d] += v for every row i < n.
  virtual void AddBias(float* y, int ldy, int n, int d, const float* v) = 0;
  // One router row per step row (ffn_math.h RouteRow): logits [n, x] ->
  // experts/gates [n, slots] (slots = top_k, or x for kReluDynamic).
  virtual void MoeRoute(const float* logits, int n, int x, MoeRouting routing,
                        int top_k, bool renormalize, int32_t* experts,
                        float* gates) = 0;
  // dst[rows[j], :d] += scales[j] * src[j, :d]; rows and scales on the host.
  // Rows are applied in order j (deterministic accumulation).
  virtual void ScatterAddScaled(const float* src, int d, const int32_t* rows,
                                const float* scales, int m, float* dst,
                                int lddst) = 0;
  // S4D diagonal recurrence over each segment's tokens (MODELS.md §4.3;
  // arguments in s4d_params.h).
  virtual void S4dScan(const S4dScanParams& p) = 0;

  // --- sampling (engine/backend/sample_row.h) ------------------------------
  // Whether the engine should sample with SampleRows rather than copy the
  // logits to the host and sample there: true where logits live on a device.
  virtual bool SamplesOnDevice() const { return false; }
  // tokens[j] = the token engine/backend's Sampler picks, with rows[j]'s
  // parameters, penalised ids and step, from row j of logit_scale * logits
  // (logits: [m, vocab], the backend's memory). rows, seen_ids (the flat id
  // array the rows index) and tokens are host memory; returns once tokens
  // are written. Rankings are exact (ties to the lower id); softmax weights
  // and their sums may differ from the host's in the last bits, so a row
  // gets another token only when a top-p, min-p or draw boundary lies within
  // that rounding. Not inside RunCaptured. The default is UNIMPLEMENTED.
  virtual absl::Status SampleRows(const float* /*logits*/, int /*m*/,
                                  int /*vocab*/, float /*logit_scale*/,
                                  const SampleRow* /*rows*/,
                                  const int32_t* /*seen_ids*/,
                                  int32_t* /*tokens*/) {
    return absl::UnimplementedError(name() + " backend has no SampleRows");
  }
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_BACKEND_BACKEND_H_
