// Memory, descriptor staging, GEMMs through cuBLAS and step capture as CUDA
// graphs; the ops themselves live in the per-family files.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "engine/backend/decode_buckets.h"
#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/dense_params.h"
#include "kernels/cuda/fp8_weights.h"
#include "kernels/cuda/gemv_kernels.h"
#include "spdlog/spdlog.h"

namespace seqboat {
namespace cuda {
namespace {

// Descriptors of one step are a few KiB (segments, ids, row lists); a half
// of the buffer only wraps (after a stream sync) outside capture.
constexpr size_t kStagingBytes = size_t{8} << 20;
constexpr size_t kStagingHalf = kStagingBytes / 2;
// Recording attempts per bucket before it runs uncaptured for good.
constexpr int kMaxCaptureFailures = 3;
// cuBLAS gets a fixed workspace so captured GEMMs never allocate.
constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;

std::string Mib(size_t bytes) { return absl::StrCat(bytes >> 20, " MiB"); }

}  // namespace

CudaBackend::CudaBackend(const CudaBackendOptions& options)
    : options_(options) {
  switch (options.weights) {
    case CudaWeights::kBf16:
      storage_ = Storage::kBf16;
      break;
    case CudaWeights::kF16:
      storage_ = Storage::kF16;
      break;
    case CudaWeights::kF32:
      storage_ = Storage::kF32;
      break;
    case CudaWeights::kFp8:
      storage_ = Storage::kFp8E4m3;
      break;
  }
}

absl::StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create(
    const CudaBackendOptions& options) {
  std::unique_ptr<CudaBackend> be(new CudaBackend(options));
  RETURN_IF_ERROR(be->Init());
  return be;
}

absl::Status CudaBackend::Init() {
  std::string why;
  const int count = CudaDeviceCount(&why);
  if (options_.device < 0 || options_.device >= count) {
    return absl::FailedPreconditionError(
        count == 0 ? absl::StrCat("no CUDA device: ", why)
                   : absl::StrCat("CUDA device ", options_.device,
                                  " does not exist (", count, " found)"));
  }
  RETURN_IF_ERROR(CudaStatus(cudaSetDevice(options_.device), "cudaSetDevice"));
  if (options_.weights == CudaWeights::kFp8) {
    // e4m3 is the format of Ada's and Hopper's fp8 units: on older devices
    // its byte a weight would be decoded by the same kernels, but nothing
    // of theirs is tuned or tested there.
    cudaDeviceProp prop{};
    RETURN_IF_ERROR(CudaStatus(cudaGetDeviceProperties(&prop, options_.device),
                               "cudaGetDeviceProperties"));
    if (prop.major * 10 + prop.minor < 89) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--cuda_weights=fp8 needs compute capability 8.9 or newer (Ada, "
          "Hopper); ",
          DeviceName(), " is ", prop.major, ".", prop.minor));
    }
  }
  RETURN_IF_ERROR(
      CudaStatus(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
                 "cudaStreamCreate"));
  RETURN_IF_ERROR(CublasStatus(cublasCreate(&cublas_), "cublasCreate"));
  RETURN_IF_ERROR(
      CublasStatus(cublasSetStream(cublas_, stream_), "cublasSetStream"));
  RETURN_IF_ERROR(
      CudaStatus(cudaMalloc(&cublas_workspace_, kCublasWorkspaceBytes),
                 "cudaMalloc (cuBLAS workspace)"));
  RETURN_IF_ERROR(CublasStatus(
      cublasSetWorkspace(cublas_, cublas_workspace_, kCublasWorkspaceBytes),
      "cublasSetWorkspace"));
  // fp32 weights must stay fp32 math (the 1e-4 parity mode): no TF32.
  RETURN_IF_ERROR(CublasStatus(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH),
                               "cublasSetMathMode"));
  RETURN_IF_ERROR(CudaStatus(
      cudaMallocHost(reinterpret_cast<void**>(&staging_host_), kStagingBytes),
      "cudaMallocHost (descriptor staging)"));
  RETURN_IF_ERROR(CudaStatus(
      cudaMalloc(reinterpret_cast<void**>(&staging_dev_), kStagingBytes),
      "cudaMalloc (descriptor staging)"));
  for (int h = 0; h < 2; ++h) {
    staging_[h] =
        DescriptorStaging(staging_host_ + h * kStagingHalf, kStagingHalf);
    RETURN_IF_ERROR(CudaStatus(
        cudaEventCreateWithFlags(&half_done_[h], cudaEventDisableTiming),
        "cudaEventCreate"));
    RETURN_IF_ERROR(CudaStatus(
        cudaEventCreateWithFlags(&sampled_done_[h], cudaEventDisableTiming),
        "cudaEventCreate"));
    RETURN_IF_ERROR(
        CudaStatus(cudaMallocHost(reinterpret_cast<void**>(&sampled_host_[h]),
                                  kMaxSampledRows * sizeof(int32_t)),
                   "cudaMallocHost (sampled tokens)"));
  }
  RETURN_IF_ERROR(CudaStatus(cudaMalloc(reinterpret_cast<void**>(&sampled_),
                                        kMaxSampledRows * sizeof(int32_t)),
                             "cudaMalloc (sampled tokens)"));
  RETURN_IF_ERROR(
      CudaStatus(cudaMemset(sampled_, 0, kMaxSampledRows * sizeof(int32_t)),
                 "cudaMemset (sampled tokens)"));
  return absl::OkStatus();
}

CudaBackend::~CudaBackend() {
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  DestroyCopyQueue();
  DropGraphs();
  owned_.clear();
  if (staging_dev_ != nullptr) cudaFree(staging_dev_);
  if (staging_host_ != nullptr) cudaFreeHost(staging_host_);
  for (int h = 0; h < 2; ++h) {
    if (half_done_[h] != nullptr) cudaEventDestroy(half_done_[h]);
    if (sampled_done_[h] != nullptr) cudaEventDestroy(sampled_done_[h]);
    if (sampled_host_[h] != nullptr) cudaFreeHost(sampled_host_[h]);
  }
  if (sampled_ != nullptr) cudaFree(sampled_);
  if (cublas_ != nullptr) cublasDestroy(cublas_);
  if (cublas_workspace_ != nullptr) cudaFree(cublas_workspace_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

void CudaBackend::Check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  if (error_.ok()) error_ = CudaStatus(e, what);
  if (IsStickyCudaError(e) && fault_.ok()) {
    fault_ = absl::UnavailableError(
        absl::StrCat(DeviceName(),
                     " failed and cannot run further work in "
                     "this process: ",
                     CudaStatus(e, what).message()));
  }
}

absl::Status CudaBackend::TakeError() {
  Check(cudaGetLastError(), "kernel launch");
  absl::Status s = error_;
  error_ = absl::OkStatus();
  return s;
}

// --- memory ------------------------------------------------------------------

std::string CudaBackend::DeviceName() const {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, options_.device) != cudaSuccess) {
    cudaGetLastError();
    return absl::StrCat("CUDA device ", options_.device);
  }
  return absl::StrCat("CUDA device ", options_.device, " (", prop.name, ")");
}

int64_t CudaBackend::FreeBytes() const {
  // cudaMemGetInfo reports the calling thread's current device.
  if (cudaSetDevice(options_.device) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return static_cast<int64_t>(free_bytes);
}

void CudaBackend::UseDevice() {
  Check(cudaSetDevice(options_.device), "cudaSetDevice");
}

absl::StatusOr<DeviceBuffer> CudaBackend::Alloc(size_t bytes) {
  UseDevice();
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, std::max<size_t>(bytes, 1));
  if (e != cudaSuccess) {
    cudaGetLastError();  // an allocation failure is not sticky
    size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", Mib(bytes), " on CUDA device ",
                     options_.device, ": ", Mib(free_bytes), " free of ",
                     Mib(total_bytes), " (", cudaGetErrorString(e), ")"));
  }
  Check(cudaMemsetAsync(p, 0, bytes, stream_), "cudaMemsetAsync");
  Check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  return DeviceBuffer(p, [](void* q) { cudaFree(q); });
}

void CudaBackend::Zero(void* dst, size_t bytes) {
  if (!launching() || bytes == 0) return;
  UseDevice();
  Check(cudaMemsetAsync(dst, 0, bytes, stream_), "cudaMemsetAsync");
}

void CudaBackend::CopyToDevice(void* dst, const void* host_src, size_t bytes) {
  if (bytes == 0) return;
  UseDevice();
  // Pageable source: the call returns once the source may be reused.
  Check(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream_),
        "cudaMemcpyAsync H2D");
  Check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

void CudaBackend::CopyOnDevice(void* dst, const void* src, size_t bytes) {
  if (!launching() || bytes == 0) return;
  UseDevice();
  Check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_),
        "cudaMemcpyAsync D2D");
}

void CudaBackend::CopyToHost(void* host_dst, const void* src, size_t bytes) {
  UseDevice();
  Check(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream_),
        "cudaMemcpyAsync D2H");
  Check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  // Everything staged so far has been consumed.
  if (!capturing_) RewindStaging();
}

absl::StatusOr<const float*> CudaBackend::UploadVector(const float* host,
                                                       int64_t n) {
  auto buf = Alloc(static_cast<size_t>(n) * sizeof(float));
  if (!buf.ok()) return buf.status();
  CopyToDevice(buf->get(), host, static_cast<size_t>(n) * sizeof(float));
  owned_.push_back(*buf);
  weight_bytes_ += n * static_cast<int64_t>(sizeof(float));
  RETURN_IF_ERROR(TakeError());
  return static_cast<const float*>(buf->get());
}

absl::StatusOr<Matrix> CudaBackend::UploadMatrix(const float* host,
                                                 int64_t rows, int64_t cols) {
  return UploadAs(host, rows, cols, storage_);
}

absl::StatusOr<Matrix> CudaBackend::UploadMatrixFp32(const float* host,
                                                     int64_t rows,
                                                     int64_t cols) {
  return UploadAs(host, rows, cols, Storage::kF32);
}

absl::StatusOr<Matrix> CudaBackend::UploadAs(const float* host, int64_t rows,
                                             int64_t cols, Storage storage) {
  const int64_t count = rows * cols;
  const int64_t bytes = StoredMatrixBytes(storage, rows, cols);
  std::vector<uint8_t> fp8;
  if (storage == Storage::kFp8E4m3) {
    RETURN_IF_ERROR(QuantizeFp8Matrix(host, rows, cols, &fp8));
  }
  auto buf = Alloc(static_cast<size_t>(bytes));
  if (!buf.ok()) return buf.status();
  if (storage == Storage::kFp8E4m3) {
    CopyToDevice(buf->get(), fp8.data(), fp8.size());
  } else if (storage == Storage::kF32) {
    CopyToDevice(buf->get(), host, static_cast<size_t>(count) * 4);
  } else {
    // Round on the host in chunks (round to nearest even, as torch's .to()).
    constexpr int64_t kChunk = int64_t{1} << 20;
    std::vector<uint16_t> tmp(static_cast<size_t>(std::min(count, kChunk)));
    for (int64_t off = 0; off < count; off += kChunk) {
      const int64_t len = std::min(kChunk, count - off);
      for (int64_t i = 0; i < len; ++i) {
        if (storage == Storage::kBf16) {
          const __nv_bfloat16 b = __float2bfloat16_rn(host[off + i]);
          std::memcpy(&tmp[i], &b, 2);
        } else {
          const __half h = __float2half_rn(host[off + i]);
          std::memcpy(&tmp[i], &h, 2);
        }
      }
      CopyToDevice(static_cast<uint8_t*>(buf->get()) + off * 2, tmp.data(),
                   static_cast<size_t>(len) * 2);
    }
  }
  owned_.push_back(*buf);
  weight_bytes_ += bytes;
  RETURN_IF_ERROR(TakeError());
  return Matrix{buf->get(), rows, cols, storage == Storage::kF32};
}

// --- descriptor staging
// --------------------------------------------------------

const void* CudaBackend::StageBytes(const void* host, size_t bytes) {
  if (bytes == 0) return nullptr;
  OpenEpoch();
  absl::StatusOr<DescriptorStaging::Placement> placed =
      staging().Place(host, bytes);
  if (absl::IsUnavailable(placed.status())) {
    if (capturing_ || replaying_) {
      // A recorded step must fit in one pass; mark the step failed.
      placed = absl::InternalError(
          "descriptor staging overflow inside a captured step");
    } else {
      SyncAndRewindStaging();
      placed = staging().Place(host, bytes);
    }
  }
  if (!placed.ok()) {
    if (error_.ok()) error_ = placed.status();
    return nullptr;
  }
  const size_t at = half_ * kStagingHalf + placed->offset;
  // A replay's uploads are the recorded graph's copy nodes.
  if (placed->fresh && !replaying_) {
    Check(cudaMemcpyAsync(staging_dev_ + at, staging_host_ + at, bytes,
                          cudaMemcpyHostToDevice, stream_),
          "cudaMemcpyAsync (descriptors)");
  }
  return staging_dev_ + at;
}

void CudaBackend::OpenEpoch() {
  if (epoch_open_) return;
  half_ ^= 1;
  // The step that last staged into this half has read it.
  if (half_pending_[half_]) {
    Check(cudaEventSynchronize(half_done_[half_]), "cudaEventSynchronize");
    half_pending_[half_] = false;
  }
  staging_[half_].Rewind();
  epoch_open_ = true;
}

void CudaBackend::CloseEpoch() {
  if (!epoch_open_) return;
  Check(cudaEventRecord(half_done_[half_], stream_), "cudaEventRecord");
  half_pending_[half_] = true;
  epoch_open_ = false;
}

void CudaBackend::SyncAndRewindStaging() {
  Check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  RewindStaging();
}

void CudaBackend::RewindStaging() { staging().Rewind(); }

void* CudaBackend::Scratch(ScratchId id, size_t bytes, const char* what) {
  ScratchBuffer& sb = scratch_[id];
  if (sb.buffer != nullptr && sb.bytes >= bytes) return sb.buffer.get();
  const size_t want = std::max(bytes, 2 * sb.bytes);
  // cudaMalloc is a "potentially unsafe" call inside stream capture; relaxed
  // mode permits it, and it enqueues nothing on the stream.
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  if (capturing_) cudaThreadExchangeStreamCaptureMode(&mode);
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, want);
  if (capturing_) cudaThreadExchangeStreamCaptureMode(&mode);
  if (e != cudaSuccess) {
    cudaGetLastError();
    if (error_.ok()) {
      error_ = absl::ResourceExhaustedError(
          absl::StrCat("cannot allocate ", Mib(want), " of ", what,
                       " scratch: ", cudaGetErrorString(e)));
    }
    return nullptr;
  }
  if (sb.buffer != nullptr) retired_scratch_.push_back(std::move(sb.buffer));
  sb.buffer = DeviceBuffer(p, [](void* q) { cudaFree(q); });
  sb.bytes = want;
  return p;
}

// --- GEMM
// ----------------------------------------------------------------------

HalfFormat CudaBackend::GemmInputFormat(const Matrix& w, int n) const {
  return GemmInputFormatFor(StorageOf(w), n);
}

void CudaBackend::Gemm(const GemmParams& p) {
  if (p.conv.e > 0 && !GemvAppliesConv(p)) {
    // Prefill, mixed and larger calls: the GEMM, then the conv kernel.
    GemmParams plain = p;
    plain.conv = GemmConv();
    Gemm(plain);
    MambaConv(ConvOfGemm(p));
    return;
  }
  // The folded conv's segments, staged before the launching() check (a
  // replay must re-read them).
  const Segment* conv_segs =
      p.conv.e > 0 ? Stage(p.conv.segs, p.conv.nsegs) : nullptr;
  const int n = p.n;
  if (n > kGemvMaxRows && p.accumulate && p.residual_scale != 1.0f) {
    ScaledGemm(p);  // stages its add's rows, replaying or not
    return;
  }
  if (!launching() || n <= 0) return;
  if (p.conv.e > 0 && p.conv.nsegs > 0 && conv_segs == nullptr) return;
  const Matrix& w = p.w;
  const Storage storage = StorageOf(w);
  if (n <= kGemvMaxRows) {
    // Small decode batches: read the weights once in their storage type,
    // no conversion pass and no cuBLAS heuristics for a skinny shape.
    GemvParams g = GemvParamsFor(p, storage);
    g.early = options_.early_launch;
    g.conv.segs = conv_segs;
    if (const int64_t floats = GemvPartialFloats(g); floats > 0) {
      g.partials = static_cast<float*>(
          Scratch(kGemvPartials, static_cast<size_t>(floats) * 4, "GEMV"));
      if (g.partials == nullptr) return;
    }
    LaunchGemv(g, stream_);
    CheckLaunch("Gemv");
    return;
  }
  if (p.norm.kind != NormKind::kNone) {
    // Larger batches are not bound by reading the weights: the norm runs
    // as its own launch and writes cuBLAS's 16-bit input beside norm.out.
    GemmParams plain = p;
    plain.x = p.norm.out;
    plain.ldx = p.norm.ldo;
    plain.norm = GemmNorm();
    plain.x16 = HalfRows();
    const int cols = static_cast<int>(w.cols);
    if (const HalfFormat f = GemmInputFormatFor(storage, n);
        f != HalfFormat::kNone) {
      plain.x16.data =
          Scratch(kGemmInput, static_cast<size_t>(n) * cols * 2, "GEMM input");
      if (plain.x16.data == nullptr) return;
      plain.x16.ld = cols;
      plain.x16.format = f;
    }
    const NormParams norm = NormOfGemm(p);
    if (p.norm.kind == NormKind::kLayer) {
      LaunchLayerNorm(norm, queue(), plain.x16);
    } else {
      LaunchRmsNorm(norm, queue(), plain.x16);
    }
    Gemm(plain);
    return;
  }
  // Row-major y[n, rows] = x[n, cols] · Wᵀ is, in cuBLAS's column-major
  // terms, y (rows x n) = op(W) (rows x cols) · x (cols x n) with W read
  // transposed from its row-major [rows, cols] storage.
  const int rows = static_cast<int>(w.rows), cols = static_cast<int>(w.cols);
  const void* a = w.data;
  Storage as = storage;
  if (storage == Storage::kFp8E4m3) {
    // cuBLASLt's fp8 GEMM would take the activations in fp8 too, adding
    // their rounding error (3 mantissa bits) to the weights'; instead the
    // matrix is widened to bf16 (code x row scale) and the bf16 GEMM runs.
    // At these batch sizes the GEMM is far less bound by reading the
    // weights, and the result is plainly the bf16 GEMM of the fp8 matrix.
    void* wide = Scratch(kGemmWeights, static_cast<size_t>(rows) * cols * 2,
                         "fp8 GEMM weights");
    if (wide == nullptr) return;
    LaunchDequantizeFp8(w.data, rows, cols, wide, queue());
    a = wide;
    as = Storage::kBf16;
  }
  const void* b = p.x;
  int ldb = p.ldx;
  cudaDataType type = CUDA_R_32F;
  if (as != Storage::kF32) {
    type = as == Storage::kBf16 ? CUDA_R_16BF : CUDA_R_16F;
    if (GemmReadsX16(p, storage)) {
      // The producer of x wrote it in 16 bits too (half_rows.h).
      b = p.x16.data;
      ldb = p.x16.ld;
    } else {
      void* ws =
          Scratch(kGemmInput, static_cast<size_t>(n) * cols * 2, "GEMM input");
      if (ws == nullptr) return;
      LaunchConvertRows(p.x, p.ldx, n, cols, ws, as, queue());
      b = ws;
      ldb = cols;
    }
  }
  const float alpha = 1.0f, beta = p.accumulate ? 1.0f : 0.0f;
  const cublasStatus_t st =
      cublasGemmEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, rows, n, cols, &alpha, a,
                   type, cols, b, type, ldb, &beta, p.y, CUDA_R_32F, p.ldy,
                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (st != CUBLAS_STATUS_SUCCESS && error_.ok()) {
    error_ = CublasStatus(st, "cublasGemmEx");
  }
  if (p.bias != nullptr) {
    AddBiasParams add;
    add.y = p.y;
    add.ldy = p.ldy;
    add.n = n;
    add.d = rows;
    add.v = p.bias;
    LaunchAddBias(add, queue());
  }
  CheckLaunch("Gemm");
}

void CudaBackend::ScaledGemm(const GemmParams& p) {
  // cuBLAS's alpha would scale the sum before the bias and round
  // differently from the GEMV's epilogue: the GEMM writes its rows into
  // scratch and ScatterAddScaled adds them, as two ops would.
  const int n = p.n, rows = static_cast<int>(p.w.rows);
  float* spare = nullptr;
  if (launching()) {
    spare = static_cast<float*>(
        Scratch(kScaledRows, static_cast<size_t>(n) * rows * 4, "scaled add"));
    if (spare == nullptr) return;
  }
  if (static_cast<int>(scaled_rows_.size()) < n) {
    scaled_rows_.resize(n);
    for (int i = 0; i < n; ++i) scaled_rows_[i] = i;
  }
  scaled_by_.assign(n, p.residual_scale);
  GemmParams plain = p;
  plain.y = spare;
  plain.ldy = rows;
  plain.accumulate = false;
  plain.residual_scale = 1.0f;
  Gemm(plain);
  ScatterAddParams add;
  add.src = spare;
  add.d = rows;
  add.rows = scaled_rows_.data();
  add.scales = scaled_by_.data();
  add.m = n;
  add.dst = p.y;
  add.lddst = p.ldy;
  ScatterAddScaled(add);
}

// --- step capture
// ----------------------------------------------------------------

std::vector<int> CudaBackend::CaptureBuckets(int max_slots) const {
  if (!options_.graphs) return {};
  return DefaultDecodeBuckets(max_slots);
}

int CudaBackend::MixedStepGraphRows() const {
  // A mixed step's one-row pass costs at least a recorded decode step's
  // floor, which is launches and occupancy rather than rows (the 130M Mamba
  // on an H100: 0.88 ms at batch 1, 1.01 at 16, 1.16 at 64), and a second
  // read of the weights. Fewer one-row segments than this ride in the eager
  // pass's GEMMs for little more than their share of the arithmetic; from
  // here on their own kernels (the decode scans, Mamba-2's fused step)
  // outweigh that floor, while the host enqueues the eager pass during the
  // replay. An estimate until tests/gpu/model_gpu_test prints both on a GPU.
  return options_.graphs ? 64 : 0;
}

void CudaBackend::DropGraphs() {
  for (auto& [key, rec] : graphs_) cudaGraphExecDestroy(rec.exec);
  graphs_.clear();
}

absl::Status CudaBackend::RunCaptured(
    int64_t key, const std::function<absl::Status()>& step) {
  UseDevice();
  if (!options_.graphs) return step();
  // Capture and replay both stage from offset 0 of a half, so the recorded
  // copies read the addresses a replay writes: a recording per half.
  CloseEpoch();
  OpenEpoch();
  // The model's own key (Backend::NewCaptureScope), for messages.
  int64_t bucket = key % kCaptureScopeKeys;
  if (bucket > kCaptureScopeKeys / 2) bucket -= kCaptureScopeKeys;
  if (bucket < -kCaptureScopeKeys / 2) bucket += kCaptureScopeKeys;
  key = 2 * key + half_;
  if (auto f = capture_failures_.find(key);
      f != capture_failures_.end() && f->second >= kMaxCaptureFailures) {
    return step();
  }
  if (auto it = graphs_.find(key); it != graphs_.end()) {
    replaying_ = true;
    absl::Status s = step();
    replaying_ = false;
    if (!s.ok()) return s;
    RETURN_IF_ERROR(TakeError());
    if (staging().log() == it->second.staged) {
      Check(cudaGraphLaunch(it->second.exec, stream_), "cudaGraphLaunch");
      return TakeError();
    }
    // The step staged differently from its recording (descriptors that
    // depend on data): forget the recording and run it eagerly; a bucket
    // that keeps doing this stops being recorded.
    cudaGraphExecDestroy(it->second.exec);
    graphs_.erase(it);
    RewindStaging();
    ++capture_failures_[key];
    return step();
  }
  // An earlier failure is reported, not lost when a failed recording clears
  // what it recorded.
  RETURN_IF_ERROR(TakeError());
  RETURN_IF_ERROR(CudaStatus(
      cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal),
      "cudaStreamBeginCapture"));
  capturing_ = true;
  absl::Status s = step();
  capturing_ = false;
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(stream_, &graph);
  if (s.ok()) s = TakeError();
  if (s.ok()) s = CudaStatus(end, "cudaStreamEndCapture");
  cudaGraphExec_t exec = nullptr;
  if (s.ok()) {
    s = CudaStatus(cudaGraphInstantiate(&exec, graph, 0),
                   "cudaGraphInstantiate");
  }
  if (graph != nullptr) cudaGraphDestroy(graph);
  if (!s.ok()) {
    // Nothing of the step ran. A recording can fail where running cannot
    // (a workspace that must grow on first use at this size), so run it
    // eagerly; the next step of this bucket records again, up to a point.
    cudaGetLastError();
    error_ = absl::OkStatus();
    SyncAndRewindStaging();
    if (++capture_failures_[key] >= kMaxCaptureFailures) {
      // A negative key is a mixed step's one-row pass (Model::SplitPassKey).
      fprintf(stderr,
              "CUDA graph capture of decode bucket %lld%s failed %d "
              "times (%s); running it uncaptured from now on\n",
              static_cast<long long>(bucket < 0 ? -bucket : bucket),
              bucket < 0 ? " (a mixed step's one-row pass)" : "",
              kMaxCaptureFailures, std::string(s.message()).c_str());
    }
    return step();
  }
  graphs_[key] = Recording{exec, staging().log()};
  Check(cudaGraphLaunch(exec, stream_), "cudaGraphLaunch");
  return TakeError();
}

}  // namespace cuda

// --- factory
// -----------------------------------------------------------------------

int CudaDeviceCount(std::string* why) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();
    if (why != nullptr) {
      *why = absl::StrCat(cudaGetErrorName(e), ": ", cudaGetErrorString(e));
    }
    return 0;
  }
  if (count == 0 && why != nullptr) *why = "the driver reports no devices";
  return count;
}

absl::StatusOr<CudaWeights> ParseCudaWeights(const std::string& name) {
  if (name == "bf16") return CudaWeights::kBf16;
  if (name == "fp16" || name == "f16") return CudaWeights::kF16;
  if (name == "fp32" || name == "f32") return CudaWeights::kF32;
  if (name == "fp8") return CudaWeights::kFp8;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown CUDA weight dtype '", name, "' (bf16, fp16, fp32 or fp8)"));
}

absl::StatusOr<std::unique_ptr<Backend>> MakeCudaBackend(
    const CudaBackendOptions& options) {
  auto be = cuda::CudaBackend::Create(options);
  if (!be.ok()) return be.status();
  return std::unique_ptr<Backend>(*std::move(be));
}

}  // namespace seqboat
