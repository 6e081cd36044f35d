// The op set every layer is written against. The CPU backend (kernels/cpu)
// and the CUDA backend (kernels/cuda) implement it; parity tests run both.
// Pointers passed to ops are device pointers of the backend that made them;
// small descriptors (token ids, segments, row lists) are host memory.
#ifndef SEQBOAT_ENGINE_BACKEND_BACKEND_H_
#define SEQBOAT_ENGINE_BACKEND_BACKEND_H_

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend/attention_params.h"
#include "engine/backend/dense_params.h"
#include "engine/backend/ffn_math.h"
#include "engine/backend/gdn_params.h"
#include "engine/backend/half_rows.h"
#include "engine/backend/mamba2_params.h"
#include "engine/backend/mamba_params.h"
#include "engine/backend/moe_params.h"
#include "engine/backend/s4d_params.h"
#include "engine/backend/sample_row.h"
#include "engine/backend/segment.h"
#include "engine/backend/seqboat_params.h"
#include "engine/backend/seqboat_shape.h"

namespace seqboat {

// The op set, each op with its params struct, in one list so that Backend,
// both backends and test decorators declare the same virtuals:
// SEQBOAT_BACKEND_OPS(X) expands X(Name, Params) once per op.
#define SEQBOAT_BACKEND_OPS(X)                \
  /* dense (dense_params.h) */                \
  X(Embed, EmbedParams)                       \
  X(RmsNorm, NormParams)                      \
  X(LayerNorm, NormParams)                    \
  X(Gemm, GemmParams)                         \
  X(GatherRows, GatherRowsParams)             \
  X(ScatterAddScaled, ScatterAddParams)       \
  X(ActivateMul, ActivateMulParams)           \
  X(AddBias, AddBiasParams)                   \
  X(MoeRoute, MoeRouteParams)                 \
  /* device-grouped experts (moe_params.h) */ \
  X(MoeGroup, MoeGroupParams)                 \
  X(MoeGemm, MoeGemmParams)                   \
  X(MoeCombine, MoeCombineParams)             \
  /* Mamba-1 (mamba_params.h) */              \
  X(MambaConv, MambaConvParams)               \
  X(MambaScan, MambaScanParams)               \
  /* Mamba-2 (mamba2_params.h) */             \
  X(Mamba2Scan, Mamba2ScanParams)             \
  X(GatedRmsNorm, GatedRmsNormParams)         \
  X(Mamba2Step, Mamba2StepParams)             \
  /* Gated DeltaNet (gdn_params.h) */         \
  X(GdnScan, GdnScanParams)                   \
  /* sink attention (attention_params.h) */   \
  X(SinkAttention, SinkAttentionParams)       \
  X(SinkCacheAppend, SinkAppendParams)        \
  /* SeqBoat (seqboat_params.h) */            \
  X(SeqBoatEma, SeqBoatEmaParams)             \
  X(SeqBoatRoute, SeqBoatRouteParams)         \
  X(SeqBoatAttend, SeqBoatAttendParams)       \
  X(SeqBoatMix, SeqBoatMixParams)             \
  /* S4D (s4d_params.h) */                    \
  X(S4dScan, S4dScanParams)

// The override list of a backend that implements every op.
#define SEQBOAT_OVERRIDE_BACKEND_OP(Name, Params) \
  void Name(const Params& p) override;

// Device memory with an owner; freed when the last handle goes.
using DeviceBuffer = std::shared_ptr<void>;
// Host memory the backend copies to and from off its op stream (pinned on
// CUDA); freed when the last handle goes.
using HostBuffer = std::shared_ptr<void>;
// An asynchronous copy (Backend::CopyToHostAsync); 0 is one already done.
using CopyTicket = int64_t;

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
  // The fewest one-row segments of a mixed step (one that also carries
  // longer segments) worth a padded, captured pass of their own beside an
  // eager pass for the rest (engine/model/step_split.h); 0: never split.
  virtual int MixedStepGraphRows() const { return 0; }
  // Runs `step`: op calls whose shapes and descriptor sizes depend only on
  // `key`, with no copy to the host inside. A backend may record the calls
  // the first time and replay the recording afterwards (host descriptors are
  // re-read on every replay). The default runs `step` as it is.
  virtual absl::Status RunCaptured(int64_t /*key*/,
                                   const std::function<absl::Status()>& step) {
    return step();
  }
  // RunCaptured keys are per model: a draft model runs on its target's
  // backend, and a recording replayed for the other model would run on the
  // first one's weights and slots. Each model takes a base of its own and
  // keys base + k, |k| < kCaptureScopeKeys / 2.
  static constexpr int64_t kCaptureScopeKeys = int64_t{1} << 32;
  int64_t NewCaptureScope() { return kCaptureScopeKeys * capture_scopes_++; }

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
  // Device to device, in op order: ops enqueued later see the copy.
  virtual void CopyOnDevice(void* dst, const void* src, size_t bytes) {
    if (MemoryIsHost()) {
      std::memcpy(dst, src, bytes);
      return;
    }
    std::vector<uint8_t> bounce(bytes);
    CopyToHost(bounce.data(), src, bytes);
    CopyToDevice(dst, bounce.data(), bytes);
  }

  // --- copies off the op stream (snapshots and restores of slots) ---------
  // A device streams these on a queue of their own while its ops run. Each
  // copy starts once every op enqueued before it has run; ops enqueued after
  // it do not wait for it, so until CopyDone(ticket) the caller must let no
  // op touch the device side and must keep the host side (neither read a
  // snapshot nor free a restore's source). The defaults copy at once and
  // return 0.
  // Host memory for those copies; `bytes` > 0.
  virtual absl::StatusOr<HostBuffer> AllocHost(size_t bytes) {
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (p == nullptr) {
      return absl::ResourceExhaustedError("host allocation failed");
    }
    return HostBuffer(p, [](void* q) { std::free(q); });
  }
  virtual CopyTicket CopyToHostAsync(void* host_dst, const void* src,
                                     size_t bytes) {
    CopyToHost(host_dst, src, bytes);
    return 0;
  }
  virtual CopyTicket CopyToDeviceAsync(void* dst, const void* host_src,
                                       size_t bytes) {
    CopyToDevice(dst, host_src, bytes);
    return 0;
  }
  // Whether the copy is over (a failed copy counts as over: its error comes
  // from TakeError). Never blocks.
  virtual bool CopyDone(CopyTicket /*ticket*/) { return true; }
  // Blocks until the copy is over.
  virtual void WaitCopy(CopyTicket /*ticket*/) {}

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
  // The 16-bit format a Gemm on `w` at n rows reads its input in
  // (half_rows.h): where it is not kNone, the op producing the GEMM's input
  // may write that copy too (its out16) and hand it to the GEMM (x16), which
  // then converts nothing. The default: GEMMs read fp32.
  virtual HalfFormat GemmInputFormat(const Matrix& /*w*/, int /*n*/) const {
    return HalfFormat::kNone;
  }

  // --- ops -----------------------------------------------------------------
  // Each op takes one params struct, defined with its contract beside the
  // per-element math: dense_params.h (embedding, norms, GEMM, row gathers and
  // scatters, feed-forward and router ops), mamba_params.h, mamba2_params.h,
  // attention_params.h, seqboat_params.h, s4d_params.h. Ops enqueue work and
  // return nothing; TakeError reports an asynchronous failure.
#define SEQBOAT_DECLARE_BACKEND_OP(Name, Params) \
  virtual void Name(const Params& p) = 0;
  SEQBOAT_BACKEND_OPS(SEQBOAT_DECLARE_BACKEND_OP)
#undef SEQBOAT_DECLARE_BACKEND_OP

  // OK when this backend can run SeqBoat blocks of `shape`, else why not.
  // Asked when a model loads, so that no step fails for it later.
  virtual absl::Status CheckSeqBoat(const SeqBoatShape& /*shape*/) const {
    return absl::OkStatus();
  }

  // --- sampling (engine/backend/sample_row.h) ------------------------------
  // Whether the engine should sample with SampleRows rather than copy the
  // logits to the host and sample there: true where logits live on a device.
  virtual bool SamplesOnDevice() const { return false; }
  // SampleRowsParams' tokens, from the host Sampler's rules (sampler.h)
  // applied to each logit row; returns once the tokens are written. Rankings
  // are exact (ties to the lower id); softmax weights and their sums may
  // differ from the host's in the last bits, so a row gets another token
  // only when a top-p, min-p or draw boundary lies within that rounding. Not
  // inside RunCaptured. The default is UNIMPLEMENTED. A backend that samples
  // keeps a penalty table (SampleRowsParams::table, penalty_table.h) from
  // call to call: a call grows it and applies its writes, in call order,
  // before its rows read it, after every earlier call's rows read it.
  virtual absl::Status SampleRows(const SampleRowsParams& /*p*/) {
    return absl::UnimplementedError(name() + " backend has no SampleRows");
  }

  // --- pipelined steps (the engine's overlapped loop) ----------------------
  // Whether the engine may launch a step before it has read the tokens of
  // the one before: a device runs steps in its stream's order while the
  // host plans the next one and finishes the last. The backend then keeps
  // the tokens of its last LaunchSampleRows in its own memory
  // (SampledTokens()), where the next step's Embed reads the ids of the
  // rows that continue those sequences (EmbedParams::fed_*).
  virtual bool PipelinesSteps() const { return false; }
  // SampleRows without the wait: the tokens stay in the backend's memory and
  // reach p.tokens (host) by the time the matching WaitSampledTokens
  // returns. Launches are waited for in order; two may be outstanding.
  virtual absl::Status LaunchSampleRows(const SampleRowsParams& /*p*/) {
    return absl::UnimplementedError(name() + " backend pipelines no steps");
  }
  // Blocks until the oldest outstanding launch's tokens are on the host.
  virtual absl::Status WaitSampledTokens() {
    return absl::UnimplementedError(name() + " backend pipelines no steps");
  }
  // The last launch's tokens, the backend's memory; null before the first.
  virtual const int32_t* SampledTokens() const { return nullptr; }

 private:
  int64_t capture_scopes_ = 0;
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_BACKEND_BACKEND_H_
