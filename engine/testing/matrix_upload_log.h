// A backend that notes the shape of every matrix uploaded through it, kept
// apart by whether the layer asked for fp32 (UploadMatrixFp32): tests check
// which weights a layer keeps in full precision on 16-bit backends.
#ifndef SEQBOAT_ENGINE_TESTING_MATRIX_UPLOAD_LOG_H_
#define SEQBOAT_ENGINE_TESTING_MATRIX_UPLOAD_LOG_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "engine/backend/testing/forwarding_backend.h"

namespace seqboat {

class MatrixUploadLog final : public ForwardingBackend {
 public:
  using Shapes = std::vector<std::pair<int64_t, int64_t>>;  // (rows, cols)

  // The logs must outlive the backend.
  MatrixUploadLog(std::unique_ptr<Backend> inner, Shapes* fp32, Shapes* other)
      : ForwardingBackend(std::move(inner)), fp32_(fp32), other_(other) {}

  absl::StatusOr<Matrix> UploadMatrix(const float* host, int64_t rows,
                                      int64_t cols) override {
    other_->emplace_back(rows, cols);
    return ForwardingBackend::UploadMatrix(host, rows, cols);
  }
  absl::StatusOr<Matrix> UploadMatrixFp32(const float* host, int64_t rows,
                                          int64_t cols) override {
    fp32_->emplace_back(rows, cols);
    return ForwardingBackend::UploadMatrixFp32(host, rows, cols);
  }

 private:
  Shapes* fp32_;
  Shapes* other_;
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_TESTING_MATRIX_UPLOAD_LOG_H_
