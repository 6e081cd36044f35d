// The CUDA backend's dense ops on the emulation: kernels/cuda/dense_ops.cc's
// launches and cuda_backend.cc's matrix storage and GEMV dispatch, on host
// memory (the device-grouped experts' too), and Mamba-1's scan as mamba_ops.cc
// runs it (a folded dt_proj included, whose matrix is stored here); every other
// op on the CPU backend. Matrices are stored as the CUDA backend stores them
// (rounded to the storage type, or quantised to fp8 with row scales, unless
// uploaded as fp32). GEMMs past the GEMV's rows run cuda_backend.cc's cuBLAS
// branch with a host loop standing in for cuBLAS (fp32 sums of the 16-bit input
// and weights): its launches (the folded norm, ConvertRows, the fp8 widening,
// the bias) are the backend's, its sums not cuBLAS's. The dense emulation test
// and the whole-model tests (engine/model) share it.
#ifndef SEQBOAT_KERNELS_CUDA_EMU_DENSE_EMULATION_H_
#define SEQBOAT_KERNELS_CUDA_EMU_DENSE_EMULATION_H_

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "base/dtype_convert.h"
#include "kernels/cuda/dense_kernels.h"
#include "kernels/cuda/dense_params.h"
#include "kernels/cuda/emu/emu_test_util.h"
#include "kernels/cuda/fp8_weights.h"
#include "kernels/cuda/gemv_kernels.h"
#include "kernels/cuda/mamba_kernels.h"
#include "kernels/cuda/moe_kernels.h"
#include "kernels/cuda/testing/stored_values.h"

namespace seqboat::emu_test {

inline uint16_t Bits16(cuda::Storage s, float v) {
  uint16_t u = 0;
  if (s == cuda::Storage::kBf16) {
    const __nv_bfloat16 b = __float2bfloat16_rn(v);
    std::memcpy(&u, &b, 2);
  } else {
    const __half h = __float2half_rn(v);
    std::memcpy(&u, &h, 2);
  }
  return u;
}

// What a [rows, cols] matrix becomes in `s` (testing/stored_values.h).
using parity::StoredValues;

class DenseEmulation : public EmulatedBackend {
 public:
  // half_inputs: GemmInputFormat answers as the CUDA backend's does, so
  // layers ask the ops before a GEMM for its 16-bit input (half_rows.h), and
  // a folded norm writes the GEMM's 16-bit rows itself. Only where every op
  // they ask runs emulated (the CPU backend's ops write no copy). Off, every
  // GEMM past the GEMV converts its input (ConvertRows): the path before
  // these copies, which tests compare with bit for bit.
  explicit DenseEmulation(cuda::Storage storage, bool half_inputs = false)
      : storage_(storage), half_inputs_(half_inputs) {}

  HalfFormat GemmInputFormat(const Matrix& w, int n) const override {
    return half_inputs_ ? cuda::GemmInputFormatFor(StorageOf(w), n)
                        : HalfFormat::kNone;
  }
  // ConvertRows launches of the cuBLAS branch so far.
  int64_t converts() const { return converts_; }

  // Kernels launched early, as CudaBackendOptions::early_launch (on by
  // default).
  void set_early_launch(bool early) { early_ = early; }
  cuda::LaunchQueue queue() const { return cuda::LaunchQueue(nullptr, early_); }

  absl::StatusOr<Matrix> UploadMatrix(const float* host, int64_t rows,
                                      int64_t cols) override {
    return UploadAt(host, rows, cols, storage_, 0);
  }
  absl::StatusOr<Matrix> UploadMatrixFp32(const float* host, int64_t rows,
                                          int64_t cols) override {
    return UploadAt(host, rows, cols, cuda::Storage::kF32, 0);
  }
  // The matrix starts `offset` elements into a 64-byte aligned buffer, so an
  // odd offset misaligns it for the GEMV's 16-byte loads.
  Matrix UploadAt(const float* host, int64_t rows, int64_t cols,
                  cuda::Storage storage, int offset) {
    const size_t elem = storage == cuda::Storage::kF32       ? 4
                        : storage == cuda::Storage::kFp8E4m3 ? 1
                                                             : 2;
    const int64_t count = rows * cols;
    auto buf =
        Alloc(offset * elem + cuda::StoredMatrixBytes(storage, rows, cols));
    EXPECT_TRUE(buf.ok()) << buf.status();
    owned_.push_back(*buf);
    uint8_t* at = static_cast<uint8_t*>(buf->get()) + offset * elem;
    if (storage == cuda::Storage::kFp8E4m3) {
      std::vector<uint8_t> image;
      EXPECT_TRUE(cuda::QuantizeFp8Matrix(host, rows, cols, &image).ok());
      std::memcpy(at, image.data(), image.size());
    }
    for (int64_t i = 0; i < count; ++i) {
      if (storage == cuda::Storage::kF32) {
        std::memcpy(at + i * 4, &host[i], 4);
      } else if (storage != cuda::Storage::kFp8E4m3) {
        const uint16_t u = Bits16(storage, host[i]);
        std::memcpy(at + i * 2, &u, 2);
      }
    }
    return Matrix{at, rows, cols, storage == cuda::Storage::kF32};
  }

  // Host memory is device memory here: the ids and row lists need no
  // staging.
  void Embed(const EmbedParams& p) override {
    std::vector<int32_t> map;
    cuda::FedMapFor(p, &map);
    cuda::LaunchEmbed(p, StorageOf(p.table), map.data(), queue());
  }
  void RmsNorm(const NormParams& p) override {
    cuda::LaunchRmsNorm(p, queue());
  }
  void LayerNorm(const NormParams& p) override {
    cuda::LaunchLayerNorm(p, queue());
  }
  // CudaBackend::Gemm's branches: the GEMV, or cuBLAS's stand-in. A folded
  // conv the GEMV does not apply is the GEMM, then this backend's MambaConv
  // (the CPU's unless overridden).
  void Gemm(const GemmParams& p) override {
    if (p.conv.e > 0 && !cuda::GemvAppliesConv(p)) {
      GemmParams plain = p;
      plain.conv = GemmConv();
      Gemm(plain);
      MambaConv(ConvOfGemm(p));
      return;
    }
    if (p.n > cuda::kGemvMaxRows) {
      if (p.accumulate && p.residual_scale != 1.0f) {
        ScaledBranch(p);
      } else {
        CublasBranch(p);
      }
      return;
    }
    cuda::GemvParams g = cuda::GemvParamsFor(p, StorageOf(p.w));
    g.early = early_;
    partials_.assign(static_cast<size_t>(cuda::GemvPartialFloats(g)), 0.0f);
    g.partials = partials_.empty() ? nullptr : partials_.data();
    cuda::LaunchGemv(g, nullptr);
  }
  // CudaBackend::ScaledGemm: the GEMM's rows, then ScatterAddScaled.
  void ScaledBranch(const GemmParams& p) {
    const int rows = static_cast<int>(p.w.rows);
    std::vector<float> f(static_cast<size_t>(p.n) * rows);
    GemmParams plain = p;
    plain.y = f.data();
    plain.ldy = rows;
    plain.accumulate = false;
    CublasBranch(plain);
    std::vector<int32_t> at(p.n);
    std::iota(at.begin(), at.end(), 0);
    const std::vector<float> scales(p.n, p.residual_scale);
    ScatterAddParams add;
    add.src = f.data();
    add.d = rows;
    add.rows = at.data();
    add.scales = scales.data();
    add.m = p.n;
    add.dst = p.y;
    add.lddst = p.ldy;
    cuda::LaunchScatterAddScaled(add, queue());
  }
  // The folded norm writing the 16-bit rows, or ConvertRows, as
  // cuda_backend.cc launches them; then y (+)= x wᵀ summed in k order.
  void CublasBranch(const GemmParams& p) {
    const cuda::Storage s = StorageOf(p.w);
    const int n = p.n, rows = static_cast<int>(p.w.rows),
              cols = static_cast<int>(p.w.cols);
    const HalfFormat f = cuda::GemmInputFormatFor(s, n);
    if (p.norm.kind != NormKind::kNone) {
      GemmParams plain = p;
      plain.x = p.norm.out;
      plain.ldx = p.norm.ldo;
      plain.norm = GemmNorm();
      plain.x16 = HalfRows();
      std::vector<uint16_t> normed(static_cast<size_t>(n) * cols);
      if (half_inputs_ && f != HalfFormat::kNone) {
        plain.x16 = HalfRows{normed.data(), cols, f};
      }
      const NormParams norm = NormOfGemm(p);
      if (p.norm.kind == NormKind::kLayer) {
        cuda::LaunchLayerNorm(norm, queue(), plain.x16);
      } else {
        cuda::LaunchRmsNorm(norm, queue(), plain.x16);
      }
      CublasBranch(plain);
      return;
    }
    std::vector<float> x(static_cast<size_t>(n) * cols);
    if (f == HalfFormat::kNone) {
      for (int i = 0; i < n; ++i) {
        std::memcpy(&x[static_cast<size_t>(i) * cols],
                    p.x + static_cast<int64_t>(i) * p.ldx, cols * 4);
      }
    } else {
      const cuda::Storage as =
          f == HalfFormat::kBf16 ? cuda::Storage::kBf16 : cuda::Storage::kF16;
      std::vector<uint16_t> converted;
      const uint16_t* in = static_cast<const uint16_t*>(p.x16.data);
      int ld = p.x16.ld;
      if (!cuda::GemmReadsX16(p, s)) {
        converted.resize(static_cast<size_t>(n) * cols);
        cuda::LaunchConvertRows(p.x, p.ldx, n, cols, converted.data(), as,
                                queue());
        ++converts_;
        in = converted.data();
        ld = cols;
      }
      for (int i = 0; i < n; ++i) {
        for (int k = 0; k < cols; ++k) {
          x[static_cast<size_t>(i) * cols + k] =
              Float16(as, in[static_cast<int64_t>(i) * ld + k]);
        }
      }
    }
    std::vector<float> w(static_cast<size_t>(rows) * cols);
    const size_t count = w.size();
    if (s == cuda::Storage::kF32) {
      std::memcpy(w.data(), p.w.data, count * 4);
    } else {
      std::vector<uint16_t> wide;
      const uint16_t* stored = static_cast<const uint16_t*>(p.w.data);
      if (s == cuda::Storage::kFp8E4m3) {
        wide.resize(count);
        cuda::LaunchDequantizeFp8(p.w.data, rows, cols, wide.data(), queue());
        stored = wide.data();
      }
      const cuda::Storage ws =
          s == cuda::Storage::kF16 ? cuda::Storage::kF16 : cuda::Storage::kBf16;
      for (size_t i = 0; i < count; ++i) w[i] = Float16(ws, stored[i]);
    }
    for (int i = 0; i < n; ++i) {
      float* y = p.y + static_cast<int64_t>(i) * p.ldy;
      const float* xi = &x[static_cast<size_t>(i) * cols];
      for (int r = 0; r < rows; ++r) {
        const float* wr = &w[static_cast<size_t>(r) * cols];
        float sum = 0.0f;
        for (int k = 0; k < cols; ++k) sum += xi[k] * wr[k];
        y[r] = p.accumulate ? y[r] + sum : sum;
      }
    }
    if (p.bias != nullptr) {
      AddBiasParams add;
      add.y = p.y;
      add.ldy = p.ldy;
      add.n = n;
      add.d = rows;
      add.v = p.bias;
      cuda::LaunchAddBias(add, queue());
    }
  }

  void GatherRows(const GatherRowsParams& p) override {
    cuda::LaunchGatherRows(p, queue());
  }
  void ActivateMul(const ActivateMulParams& p) override {
    cuda::LaunchActivateMul(p, queue());
  }
  void AddBias(const AddBiasParams& p) override {
    cuda::LaunchAddBias(p, queue());
  }
  void MoeRoute(const MoeRouteParams& p) override {
    cuda::LaunchMoeRoute(p, queue());
  }
  void ScatterAddScaled(const ScatterAddParams& p) override {
    cuda::LaunchScatterAddScaled(p, queue());
  }
  void MoeGroup(const MoeGroupParams& p) override {
    cuda::LaunchMoeGroup(p, queue());
  }
  void MoeGemm(const MoeGemmParams& p) override {
    cuda::LaunchMoeGemm(p, StorageOf(p.shape), queue());
  }
  void MoeCombine(const MoeCombineParams& p) override {
    cuda::LaunchMoeCombine(p, queue());
  }
  // CudaBackend::MambaScan: a folded dt_proj inside the decode kernel, or
  // its GEMV into p.dt_proj.dt and then the plain scan.
  void MambaScan(const MambaScanParams& p) override {
    const bool decode = AllDecodeRows(p.segs, p.nsegs);
    MambaScanParams scan = p;
    if (FoldsDtProj(p) && !(decode && cuda::MambaScanDecodeFoldsDtProj(p))) {
      Gemm(GemmOfDtProj(p));
      scan = ScanAfterDtProj(p);
    }
    if (decode) {
      cuda::LaunchMambaScanDecode(scan, StorageOf(p.dt_proj.w), queue());
    } else {
      cuda::LaunchMambaScan(scan, queue());
    }
  }

 private:
  cuda::Storage StorageOf(const Matrix& w) const {
    return w.fp32 ? cuda::Storage::kF32 : storage_;
  }

  static float Float16(cuda::Storage s, uint16_t u) {
    if (s == cuda::Storage::kBf16) {
      __nv_bfloat16_raw b;
      b.x = u;
      return __bfloat162float(__nv_bfloat16(b));
    }
    __half_raw h;
    h.x = u;
    return __half2float(__half(h));
  }

  cuda::Storage storage_;
  bool early_ = true;
  bool half_inputs_ = false;
  int64_t converts_ = 0;
  std::vector<DeviceBuffer> owned_;
  std::vector<float> partials_;
};

}  // namespace seqboat::emu_test

#endif  // SEQBOAT_KERNELS_CUDA_EMU_DENSE_EMULATION_H_
