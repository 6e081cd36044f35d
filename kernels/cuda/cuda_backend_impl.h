// The CUDA backend's class, shared by the files that define its ops: memory,
// descriptor staging, GEMMs and graph capture in cuda_backend.cc, then one
// host file per op family (dense_ops.cc, mamba_ops.cc, ...) that stages the
// op's host descriptors and calls the family's launchers (*_kernels.h).
//
// Host descriptors (token ids, segments, row lists) go through a pinned
// staging buffer: Stage() copies them there and enqueues the upload, so a
// recorded graph re-reads them on every replay. While replaying (see
// RunCaptured) ops only stage and launch nothing. The buffer has two halves
// that steps use in turn (an epoch per step, ended by its sampling or a
// read back), so the host stages step N+1 while the device still reads
// step N's half; a half is reused once the event recorded at the end of
// its last epoch has passed.
#ifndef SEQBOAT_KERNELS_CUDA_BACKEND_IMPL_H_
#define SEQBOAT_KERNELS_CUDA_BACKEND_IMPL_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstring>
#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/backend/backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/dense_kernels.h"
#include "kernels/cuda/descriptor_staging.h"
#include "kernels/cuda/launch_queue.h"

namespace seqboat::cuda {

// Rows one SampleRows samples at most (the size of its tokens' buffers).
inline constexpr size_t kMaxSampledRows = size_t{1} << 16;

class CudaBackend final : public Backend {
 public:
  // Use Create; the constructor only stores the options.
  static absl::StatusOr<std::unique_ptr<CudaBackend>> Create(
      const CudaBackendOptions& options);
  ~CudaBackend() override;

  std::string name() const override { return "cuda"; }
  std::string DeviceName() const override;
  int64_t FreeBytes() const override;
  int64_t WeightBytes() const override { return weight_bytes_; }

  // Step capture (cuda_backend.cc).
  std::vector<int> CaptureBuckets(int max_slots) const override;
  int MixedStepGraphRows() const override;
  absl::Status RunCaptured(int64_t key,
                           const std::function<absl::Status()>& step) override;

  // Memory (cuda_backend.cc).
  absl::StatusOr<DeviceBuffer> Alloc(size_t bytes) override;
  void Zero(void* dst, size_t bytes) override;
  void CopyToDevice(void* dst, const void* host_src, size_t bytes) override;
  void CopyToHost(void* host_dst, const void* src, size_t bytes) override;
  void CopyOnDevice(void* dst, const void* src, size_t bytes) override;
  absl::StatusOr<const float*> UploadVector(const float* host,
                                            int64_t n) override;
  absl::StatusOr<Matrix> UploadMatrix(const float* host, int64_t rows,
                                      int64_t cols) override;
  absl::StatusOr<Matrix> UploadMatrixFp32(const float* host, int64_t rows,
                                          int64_t cols) override;
  // GEMMs (cuda_backend.cc): cuBLAS's 16-bit input past the GEMV's rows.
  HalfFormat GemmInputFormat(const Matrix& w, int n) const override;

  // Copies off the op stream (async_copies.cc).
  absl::StatusOr<HostBuffer> AllocHost(size_t bytes) override;
  CopyTicket CopyToHostAsync(void* host_dst, const void* src,
                             size_t bytes) override;
  CopyTicket CopyToDeviceAsync(void* dst, const void* host_src,
                               size_t bytes) override;
  bool CopyDone(CopyTicket ticket) override;
  void WaitCopy(CopyTicket ticket) override;

  // Every op: dense_ops.cc (Gemm in cuda_backend.cc), mamba_ops.cc,
  // mamba2_ops.cc, attention_ops.cc, seqboat_ops.cc, s4d_ops.cc.
  SEQBOAT_BACKEND_OPS(SEQBOAT_OVERRIDE_BACKEND_OP)
  absl::Status CheckSeqBoat(const SeqBoatShape& shape) const override;

  // Sampling (sampling_ops.cc).
  bool SamplesOnDevice() const override { return true; }
  absl::Status SampleRows(const SampleRowsParams& p) override;
  bool PipelinesSteps() const override { return options_.pipeline; }
  absl::Status LaunchSampleRows(const SampleRowsParams& p) override;
  absl::Status WaitSampledTokens() override;
  const int32_t* SampledTokens() const override { return sampled_; }

  // The first CUDA or cuBLAS error since the last call (sticky until taken).
  absl::Status TakeError() override;
  absl::Status Health() const override { return fault_; }

  cudaStream_t stream() const { return stream_; }
  // The kernels' queue: the stream, early launches as options_ say.
  LaunchQueue queue() const {
    return LaunchQueue(stream_, options_.early_launch);
  }
  Storage storage() const { return storage_; }
  // How `w` is stored on the device.
  Storage StorageOf(const Matrix& w) const {
    return w.fp32 ? Storage::kF32 : storage_;
  }
  // False while a recorded step replays: ops then stage and return.
  bool launching() const { return !replaying_; }

  // Copies `count` host elements to the staging buffer and enqueues their
  // upload; returns the device copy (valid for the current step). Returns
  // null for count 0.
  template <typename T>
  const T* Stage(const T* host, size_t count) {
    return static_cast<const T*>(StageBytes(host, count * sizeof(T)));
  }

  // Scratch device memory of at least `bytes` for one op family (`id`: a
  // ScratchId). It never moves under a recording: growing keeps the old
  // buffer alive with the backend, since graphs recorded with it may still
  // replay. Null on failure, which is recorded for TakeError.
  enum ScratchId {
    kGemmInput = 0,
    kGemmWeights,   // an fp8 matrix widened to bf16 for cuBLAS
    kGemvPartials,  // the GEMV's column splits
    kScaledRows,    // a GEMM's rows before a scaled residual add
    kSinkAttentionSplits,
    kScratchIds
  };
  void* Scratch(ScratchId id, size_t bytes, const char* what);

  // Makes options_.device current on the calling thread: the CUDA runtime's
  // current device is per thread, and the engine runs steps on its own.
  void UseDevice();

  // Records the first failure; ops have no Status of their own.
  void Check(cudaError_t e, const char* what);
  void CheckLaunch(const char* what) { Check(cudaGetLastError(), what); }

 private:
  explicit CudaBackend(const CudaBackendOptions& options);
  // Gemm past the GEMV's batches with a residual scale != 1: cuBLAS into
  // scratch, then ScatterAddScaled (cuda_backend.cc says why).
  void ScaledGemm(const GemmParams& p);
  absl::Status Init();
  absl::StatusOr<Matrix> UploadAs(const float* host, int64_t rows, int64_t cols,
                                  Storage storage);
  const void* StageBytes(const void* host, size_t bytes);
  // Waits for the stream and starts staging from offset 0 again.
  void SyncAndRewindStaging();
  // Starts staging from offset 0; everything staged must have been consumed.
  void RewindStaging();
  // Starts a staging epoch in the other half (from its offset 0, once the
  // device is done with that half's last epoch), unless one is open.
  void OpenEpoch();
  // Ends the open epoch: an event on the stream marks its half consumed.
  void CloseEpoch();
  DescriptorStaging& staging() { return staging_[half_]; }
  // Enqueues one copy on copy_stream_ behind the ops enqueued so far.
  CopyTicket EnqueueCopy(void* dst, const void* src, size_t bytes,
                         cudaMemcpyKind kind);
  // Retires the finished copies at the head of copies_.
  void RetireCopies();
  void DestroyCopyQueue();
  void DropGraphs();

  struct Recording {
    cudaGraphExec_t exec = nullptr;
    // What the recorded step staged: a replay must stage the same.
    DescriptorStaging::Log staged;
  };

  CudaBackendOptions options_;
  Storage storage_ = Storage::kBf16;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  void* cublas_workspace_ = nullptr;
  // Descriptor staging: pinned host and device buffers of equal size, in two
  // halves, and where the current pass placed what in each.
  uint8_t* staging_host_ = nullptr;
  uint8_t* staging_dev_ = nullptr;
  DescriptorStaging staging_[2] = {{nullptr, 0}, {nullptr, 0}};
  int half_ = 0;
  bool epoch_open_ = false;
  cudaEvent_t half_done_[2] = {nullptr, nullptr};
  bool half_pending_[2] = {false, false};  // an event was recorded
  std::vector<int32_t> fed_map_;           // Embed's, reused
  // A scaled residual add past the GEMV's batches: rows 0.. and the scale
  // per row, staged for ScatterAddScaled.
  std::vector<int32_t> scaled_rows_;
  std::vector<float> scaled_by_;
  // Pipelined sampling: the last launch's tokens on the device (the next
  // step's fed ids), and two pinned host copies, one per launch
  // outstanding, each with its event.
  int32_t* sampled_ = nullptr;
  int32_t* sampled_host_[2] = {nullptr, nullptr};
  cudaEvent_t sampled_done_[2] = {nullptr, nullptr};
  struct Outstanding {
    int buffer = 0;
    int32_t* host = nullptr;
    int m = 0;
  };
  std::deque<Outstanding> outstanding_;
  int64_t launches_ = 0;
  // Slot snapshots and restores: their own stream, which waits for the op
  // stream at each copy (ops_mark_) but is never waited for by it; copies
  // finish in ticket order, each marked by an event.
  cudaStream_t copy_stream_ = nullptr;
  cudaEvent_t ops_mark_ = nullptr;
  struct Copy {
    CopyTicket ticket = 0;
    cudaEvent_t done = nullptr;
  };
  std::deque<Copy> copies_;
  std::vector<cudaEvent_t> spare_copy_events_;
  CopyTicket last_ticket_ = 0;
  CopyTicket done_ticket_ = 0;
  bool capturing_ = false;
  bool replaying_ = false;
  std::map<int64_t, Recording> graphs_;
  std::map<int64_t, int> capture_failures_;
  std::vector<DeviceBuffer> owned_;  // uploaded weights
  struct ScratchBuffer {
    DeviceBuffer buffer;
    size_t bytes = 0;
  };
  ScratchBuffer scratch_[kScratchIds];
  std::vector<DeviceBuffer> retired_scratch_;
  int64_t weight_bytes_ = 0;
  absl::Status error_;
  // The first sticky CUDA error (IsStickyCudaError): the device is lost.
  absl::Status fault_;
  // SampleRows' scratch (the tokens, then the kernels' workspace) and its
  // penalised ids when too many to stage. Grown between steps, never
  // referenced by a recorded graph.
  DeviceBuffer sample_scratch_, sample_seen_, sample_masks_;
  size_t sample_scratch_bytes_ = 0, sample_seen_bytes_ = 0,
         sample_masks_bytes_ = 0;
  // The penalty table (SampleRowsParams::table): the engine's samplers'
  // lists, kept from launch to launch and patched in stream order.
  DeviceBuffer penalty_table_;
  int32_t penalty_table_ints_ = 0;
  // The ids (or table writes) of a SampleRows call on the device: staged,
  // or in sample_seen_ when too many; null on failure (error_ set).
  const int32_t* UploadSampleIds(const int32_t* host, size_t count);
  // Grows the penalty table to `size` ints, keeping what it holds, and
  // enqueues the update's writes.
  absl::Status UpdatePenaltyTable(const PenaltyTableUpdate& update);
};

}  // namespace seqboat::cuda

#endif  // SEQBOAT_KERNELS_CUDA_BACKEND_IMPL_H_
