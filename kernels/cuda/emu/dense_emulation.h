// The CUDA backend's dense ops on the emulation: kernels/cuda/dense_ops.cc's
// launches and cuda_backend.cc's matrix storage and GEMV dispatch, on host
// memory, and Mamba-1's scan as mamba_ops.cc runs it (a folded dt_proj
// included, whose matrix is stored here); every other op on the CPU backend.
// Matrices are stored as the CUDA backend stores them (rounded to the storage
// type, or quantised to fp8 with row scales, unless uploaded as fp32). The
// dense emulation test and the fp8 logit test (engine/model) share it.
#ifndef SEQBOAT_KERNELS_CUDA_EMU_DENSE_EMULATION_H_
#define SEQBOAT_KERNELS_CUDA_EMU_DENSE_EMULATION_H_

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "base/dtype_convert.h"
#include "kernels/cuda/dense_kernels.h"
#include "kernels/cuda/dense_params.h"
#include "kernels/cuda/emu/emu_test_util.h"
#include "kernels/cuda/fp8_weights.h"
#include "kernels/cuda/gemv_kernels.h"
#include "kernels/cuda/mamba_kernels.h"

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

// What a [rows, cols] matrix becomes in `s`: the CUDA backend rounds on the
// host to nearest even (cuda_backend.cc UploadAs), or quantises to fp8
// (fp8_weights.h): code x row scale.
inline std::vector<float> StoredValues(cuda::Storage s, std::vector<float> v,
                                       int64_t rows, int64_t cols) {
  if (s == cuda::Storage::kFp8E4m3) {
    std::vector<uint8_t> image;
    EXPECT_TRUE(cuda::QuantizeFp8Matrix(v.data(), rows, cols, &image).ok());
    const float* scales = cuda::Fp8RowScales(image.data(), rows, cols);
    for (int64_t i = 0; i < rows * cols; ++i) {
      v[i] = E4m3ToF32(image[i]) * scales[i / cols];
    }
    return v;
  }
  for (float& x : v) {
    if (s == cuda::Storage::kBf16) {
      x = __bfloat162float(__float2bfloat16_rn(x));
    } else if (s == cuda::Storage::kF16) {
      x = __half2float(__float2half_rn(x));
    }
  }
  return v;
}

class DenseEmulation : public EmulatedBackend {
 public:
  explicit DenseEmulation(cuda::Storage storage) : storage_(storage) {}

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
    cuda::LaunchEmbed(p, StorageOf(p.table), map.data(), nullptr);
  }
  void RmsNorm(const NormParams& p) override {
    cuda::LaunchRmsNorm(p, nullptr);
  }
  void LayerNorm(const NormParams& p) override {
    cuda::LaunchLayerNorm(p, nullptr);
  }
  // The GEMV branch of CudaBackend::Gemm; larger batches go to cuBLAS there,
  // which has no emulation.
  void Gemm(const GemmParams& p) override {
    if (p.n > cuda::kGemvMaxRows) {
      ADD_FAILURE() << "n = " << p.n << " takes cuBLAS, not the GEMV";
      return;
    }
    cuda::GemvParams g = cuda::GemvParamsFor(p, StorageOf(p.w));
    partials_.assign(static_cast<size_t>(cuda::GemvPartialFloats(g)), 0.0f);
    g.partials = partials_.empty() ? nullptr : partials_.data();
    cuda::LaunchGemv(g, nullptr);
  }
  void GatherRows(const GatherRowsParams& p) override {
    cuda::LaunchGatherRows(p, nullptr);
  }
  void ActivateMul(const ActivateMulParams& p) override {
    cuda::LaunchActivateMul(p, nullptr);
  }
  void AddBias(const AddBiasParams& p) override {
    cuda::LaunchAddBias(p, nullptr);
  }
  void MoeRoute(const MoeRouteParams& p) override {
    cuda::LaunchMoeRoute(p, nullptr);
  }
  void ScatterAddScaled(const ScatterAddParams& p) override {
    cuda::LaunchScatterAddScaled(p, nullptr);
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
      cuda::LaunchMambaScanDecode(scan, StorageOf(p.dt_proj.w), nullptr);
    } else {
      cuda::LaunchMambaScan(scan, nullptr);
    }
  }

 private:
  cuda::Storage StorageOf(const Matrix& w) const {
    return w.fp32 ? cuda::Storage::kF32 : storage_;
  }

  cuda::Storage storage_;
  std::vector<DeviceBuffer> owned_;
  std::vector<float> partials_;
};

}  // namespace seqboat::emu_test

#endif  // SEQBOAT_KERNELS_CUDA_EMU_DENSE_EMULATION_H_
