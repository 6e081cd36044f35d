#include "engine/cpu/cpu_backend.h"

#include <cblas.h>
#include <omp.h>

#include <cstdlib>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/backend/op_math.h"

namespace seqboat {
namespace {

constexpr size_t kAlign = 64;

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int threads) {
    if (threads > 0) {
      omp_set_num_threads(threads);
      openblas_set_num_threads(threads);
    }
  }

  std::string name() const override { return "cpu"; }

  absl::StatusOr<DeviceBuffer> Alloc(size_t bytes) override {
    const size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
    void* p = std::aligned_alloc(kAlign, rounded == 0 ? kAlign : rounded);
    if (p == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cpu: cannot allocate ", bytes, " bytes"));
    }
    std::memset(p, 0, rounded);
    return DeviceBuffer(p, std::free);
  }

  void Zero(void* dst, size_t bytes) override { std::memset(dst, 0, bytes); }
  void CopyToDevice(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  void CopyToHost(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }

  absl::StatusOr<const float*> UploadVector(const float* host,
                                            int64_t n) override {
    auto buf = Alloc(n * sizeof(float));
    if (!buf.ok()) return buf.status();
    std::memcpy(buf->get(), host, n * sizeof(float));
    owned_.push_back(*buf);
    return static_cast<const float*>(buf->get());
  }

  absl::StatusOr<Matrix> UploadMatrix(const float* host, int64_t rows,
                                      int64_t cols) override {
    return Matrix{host, rows, cols};
  }

  void Embed(const int32_t* ids, int n, const float* table, int d, float scale,
             float* out) override {
    for (int i = 0; i < n; ++i) {
      const float* row = table + static_cast<int64_t>(ids[i]) * d;
      float* o = out + static_cast<int64_t>(i) * d;
      for (int j = 0; j < d; ++j) o[j] = scale * row[j];
    }
  }

  void RmsNorm(const float* x, int n, int d, const float* w, float eps,
               float* out) override {
#pragma omp parallel for schedule(static) if (n > 8)
    for (int i = 0; i < n; ++i) {
      const float* xi = x + static_cast<int64_t>(i) * d;
      float* oi = out + static_cast<int64_t>(i) * d;
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

  void Gemm(const float* x, int ldx, int n, const Matrix& w, const float* bias,
            float* y, int ldy, bool accumulate) override {
    if (n == 0) return;
    const int m = static_cast<int>(w.rows);
    const int k = static_cast<int>(w.cols);
    float beta = accumulate ? 1.0f : 0.0f;
    if (bias != nullptr) {
      for (int i = 0; i < n; ++i) {
        float* yi = y + static_cast<int64_t>(i) * ldy;
        if (accumulate) {
          for (int j = 0; j < m; ++j) yi[j] += bias[j];
        } else {
          std::memcpy(yi, bias, m * sizeof(float));
        }
      }
      beta = 1.0f;
    }
    // Always sgemm, never sgemv for n == 1: one accumulation order for every
    // batch size keeps a sequence's output independent of who it is batched
    // with.
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, m, k, 1.0f, x, ldx,
                static_cast<const float*>(w.data), k, beta, y, ldy);
  }

  void GatherRows(const float* x, int d, const int32_t* rows, int m,
                  float* out) override {
    for (int j = 0; j < m; ++j) {
      std::memcpy(out + static_cast<int64_t>(j) * d,
                  x + static_cast<int64_t>(rows[j]) * d, d * sizeof(float));
    }
  }

  void MambaConv(const Segment* segs, int nsegs, const float* x, int ldx,
                 float* state, int64_t per_slot, const float* w,
                 const float* bias, int e, int k, float* out) override {
#pragma omp parallel for collapse(2) schedule(static)
    for (int s = 0; s < nsegs; ++s) {
      for (int c = 0; c < e; ++c) {
        const Segment& seg = segs[s];
        float* window =
            state + seg.slot * per_slot + static_cast<int64_t>(c) * (k - 1);
        const float b = bias != nullptr ? bias[c] : 0.0f;
        for (int t = seg.start; t < seg.start + seg.len; ++t) {
          out[static_cast<int64_t>(t) * e + c] =
              op_math::ConvStep(window, w + static_cast<int64_t>(c) * k, b,
                                x[static_cast<int64_t>(t) * ldx + c], k);
        }
      }
    }
  }

  void MambaScan(const Segment* segs, int nsegs, const float* x,
                 const float* dt, const float* bc, int ldbc, const float* z,
                 int ldz, const float* a, const float* d, const float* dt_bias,
                 float* state, int64_t per_slot, int e, int n_state,
                 float* out) override {
#pragma omp parallel for collapse(2) schedule(static)
    for (int s = 0; s < nsegs; ++s) {
      for (int c = 0; c < e; ++c) {
        const Segment& seg = segs[s];
        float* h =
            state + seg.slot * per_slot + static_cast<int64_t>(c) * n_state;
        const float* ac = a + static_cast<int64_t>(c) * n_state;
        for (int t = seg.start; t < seg.start + seg.len; ++t) {
          const int64_t row = static_cast<int64_t>(t);
          const float* b_row = bc + row * ldbc;
          out[row * e + c] = op_math::ScanStep(
              h, ac, b_row, b_row + n_state, dt[row * e + c], dt_bias[c],
              x[row * e + c], d[c], z[row * ldz + c], n_state);
        }
      }
    }
  }

 private:
  std::vector<DeviceBuffer> owned_;
};

}  // namespace

std::unique_ptr<Backend> MakeCpuBackend(int threads) {
  return std::make_unique<CpuBackend>(threads);
}

}  // namespace seqboat
