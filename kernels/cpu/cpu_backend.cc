// Memory and the dense ops of the CPU backend.
#include "kernels/cpu/cpu_backend.h"

#include <omp.h>

#include <cstdlib>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/backend/op_math.h"
#include "kernels/cpu/cpu_backend_impl.h"
#include "kernels/cpu/packed_gemm.h"
#include "kernels/cpu/parallel.h"

namespace seqboat {
namespace cpu {
namespace {
constexpr size_t kAlign = 64;
}  // namespace

CpuBackend::CpuBackend(int threads, WeightType weights, Isa isa)
    : weights_(weights), isa_(isa) {
  if (threads > 0) omp_set_num_threads(threads);
}

std::string CpuBackend::DeviceName() const {
  return absl::StrCat("cpu (", IsaName(isa_), ", ", WeightTypeName(weights_),
                      " weights)");
}

absl::StatusOr<DeviceBuffer> CpuBackend::Alloc(size_t bytes) {
  const size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, rounded == 0 ? kAlign : rounded);
  if (p == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cpu: cannot allocate ", bytes, " bytes"));
  }
  std::memset(p, 0, rounded);
  return DeviceBuffer(p, std::free);
}

void CpuBackend::Zero(void* dst, size_t bytes) { std::memset(dst, 0, bytes); }

void CpuBackend::CopyToDevice(void* dst, const void* src, size_t bytes) {
  std::memcpy(dst, src, bytes);
}

void CpuBackend::CopyToHost(void* dst, const void* src, size_t bytes) {
  std::memcpy(dst, src, bytes);
}

absl::StatusOr<const float*> CpuBackend::UploadVector(const float* host,
                                                      int64_t n) {
  auto buf = Alloc(n * sizeof(float));
  if (!buf.ok()) return buf.status();
  std::memcpy(buf->get(), host, n * sizeof(float));
  owned_.push_back(*buf);
  weight_bytes_ += n * static_cast<int64_t>(sizeof(float));
  return static_cast<const float*>(buf->get());
}

absl::StatusOr<Matrix> CpuBackend::UploadMatrix(const float* host, int64_t rows,
                                                int64_t cols) {
  return UploadAs(host, rows, cols, weights_);
}

absl::StatusOr<Matrix> CpuBackend::UploadMatrixFp32(const float* host,
                                                    int64_t rows,
                                                    int64_t cols) {
  return UploadAs(host, rows, cols, WeightType::kF32);
}

absl::StatusOr<Matrix> CpuBackend::UploadAs(const float* host, int64_t rows,
                                            int64_t cols, WeightType type) {
  auto packed = PackedMatrix::Pack(host, rows, cols, type);
  if (!packed.ok()) return packed.status();
  weight_bytes_ += static_cast<int64_t>((*packed)->bytes());
  matrices_.push_back(*std::move(packed));
  return Matrix{matrices_.back().get(), rows, cols, type == WeightType::kF32};
}

void CpuBackend::Embed(const EmbedParams& p) {
  const PackedMatrix& table = Packed(p.table);
  for (int i = 0; i < p.n; ++i) {
    table.ReadRow(p.ids[i], p.scale,
                  p.out + static_cast<int64_t>(i) * p.table.cols);
  }
  // Memory is the host's: the fed tokens are read where they lie.
  for (int k = 0; k < p.nfed; ++k) {
    table.ReadRow(p.fed_tokens[p.fed_from[k]], p.scale,
                  p.out + static_cast<int64_t>(p.fed_rows[k]) * p.table.cols);
  }
}

void CpuBackend::RmsNorm(const NormParams& p) {
  // p's fields as locals, so the loops compile as they did when these were
  // the op's arguments.
  const float* x = p.x;
  const float* w = p.w;
  const int ldx = p.ldx, n = p.n, d = p.d, ldo = p.ldo;
  const float eps = p.eps;
  float* out = p.out;
#pragma omp parallel for schedule(static) if (WorthThreads(int64_t{n} * d))
  for (int i = 0; i < n; ++i) {
    const float* xi = x + static_cast<int64_t>(i) * ldx;
    float* oi = out + static_cast<int64_t>(i) * ldo;
    float sum_sq = 0.0f;
    for (int j = 0; j < d; ++j) sum_sq += xi[j] * xi[j];
    const float s = op_math::RmsScale(sum_sq, d, eps);
    if (w != nullptr) {
      for (int j = 0; j < d; ++j) oi[j] = xi[j] * s * w[j];
    } else {
      for (int j = 0; j < d; ++j) oi[j] = xi[j] * s;
    }
  }
}

void CpuBackend::LayerNorm(const NormParams& p) {
  // p's fields as locals, so the loops compile as they did when these were
  // the op's arguments.
  const float *x = p.x, *w = p.w, *b = p.b;
  const int ldx = p.ldx, n = p.n, d = p.d, ldo = p.ldo;
  const float eps = p.eps;
  float* out = p.out;
#pragma omp parallel for schedule(static) if (WorthThreads(int64_t{n} * d))
  for (int i = 0; i < n; ++i) {
    const float* xi = x + static_cast<int64_t>(i) * ldx;
    float* oi = out + static_cast<int64_t>(i) * ldo;
    float sum = 0.0f;
    for (int j = 0; j < d; ++j) sum += xi[j];
    const float mean = sum / static_cast<float>(d);
    float sum_sq = 0.0f;
    for (int j = 0; j < d; ++j) sum_sq += (xi[j] - mean) * (xi[j] - mean);
    const float s = op_math::RmsScale(sum_sq, d, eps);
    for (int j = 0; j < d; ++j) {
      float v = (xi[j] - mean) * s;
      if (w != nullptr) v *= w[j];
      if (b != nullptr) v += b[j];
      oi[j] = v;
    }
  }
}

void CpuBackend::Gemm(const GemmParams& p) {
  // A folded pre-norm is the two ops in turn: the same results as a block
  // that calls them itself.
  const float* x = p.x;
  int ldx = p.ldx;
  if (p.norm.kind != NormKind::kNone) {
    const NormParams norm = NormOfGemm(p);
    if (p.norm.kind == NormKind::kLayer) {
      LayerNorm(norm);
    } else {
      RmsNorm(norm);
    }
    x = p.norm.out;
    ldx = p.norm.ldo;
  }
  if (!p.accumulate || p.residual_scale == 1.0f) {
    PackedGemm(isa_, x, ldx, p.n, Packed(p.w), p.bias, p.y, p.ldy,
               p.accumulate);
    // So is a folded conv: the conv op on the GEMM's output.
    if (p.conv.e > 0) MambaConv(ConvOfGemm(p));
    return;
  }
  // A scaled residual add: the GEMM's rows, then ScatterAddScaled's
  // arithmetic on them (one fma an element), the same bits as the two ops.
  const int rows = static_cast<int>(p.w.rows);
  scaled_rows_.resize(static_cast<size_t>(p.n) * rows);
  PackedGemm(isa_, x, ldx, p.n, Packed(p.w), p.bias, scaled_rows_.data(), rows,
             false);
  const float s = p.residual_scale;
  for (int i = 0; i < p.n; ++i) {
    const float* f = scaled_rows_.data() + static_cast<int64_t>(i) * rows;
    float* y = p.y + static_cast<int64_t>(i) * p.ldy;
    for (int k = 0; k < rows; ++k) y[k] = ScaledResidualAdd(y[k], s, f[k]);
  }
}

void CpuBackend::GatherRows(const GatherRowsParams& p) {
  for (int j = 0; j < p.m; ++j) {
    std::memcpy(p.out + static_cast<int64_t>(j) * p.d,
                p.x + static_cast<int64_t>(p.rows[j]) * p.d,
                p.d * sizeof(float));
  }
}

}  // namespace cpu

absl::StatusOr<std::unique_ptr<Backend>> MakeCpuBackend(
    const CpuBackendOptions& options) {
  auto weights = cpu::ParseWeightType(options.weights);
  if (!weights.ok()) return weights.status();
  const cpu::CpuFeatures features = cpu::DetectCpu();
  auto isa = cpu::ChooseIsa(options.isa, features);
  if (!isa.ok()) return isa.status();
  return std::make_unique<cpu::CpuBackend>(options.threads, *weights, *isa);
}

std::unique_ptr<Backend> MakeCpuBackend(int threads) {
  return std::make_unique<cpu::CpuBackend>(threads, cpu::WeightType::kF32,
                                           cpu::DetectCpu().Best());
}

}  // namespace seqboat
