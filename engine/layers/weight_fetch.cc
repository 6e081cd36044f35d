#include "engine/layers/weight_fetch.h"

namespace seqboat {

absl::Status FetchVector(WeightStore& ws, Backend& be, const std::string& name,
                         const std::vector<int64_t>& shape, const float** out) {
  auto host = ws.F32(name, shape);
  if (!host.ok()) return host.status();
  int64_t len = 1;
  for (int64_t dim : shape) len *= dim;
  auto dev = be.UploadVector(*host, len);
  if (!dev.ok()) return dev.status();
  *out = *dev;
  return absl::OkStatus();
}

absl::Status FetchMatrix(WeightStore& ws, Backend& be, const std::string& name,
                         int64_t rows, int64_t cols, Matrix* out) {
  auto host = ws.F32(name, {rows, cols});
  if (!host.ok()) return host.status();
  auto dev = be.UploadMatrix(*host, rows, cols);
  if (!dev.ok()) return dev.status();
  *out = *dev;
  return absl::OkStatus();
}

absl::Status FetchMatrixFp32(WeightStore& ws, Backend& be,
                             const std::string& name, int64_t rows,
                             int64_t cols, Matrix* out) {
  auto host = ws.F32(name, {rows, cols});
  if (!host.ok()) return host.status();
  auto dev = be.UploadMatrixFp32(*host, rows, cols);
  if (!dev.ok()) return dev.status();
  *out = *dev;
  return absl::OkStatus();
}

absl::Status FetchMatrixStack(WeightStore& ws, Backend& be,
                              const std::string& name, int64_t count,
                              int64_t rows, int64_t cols,
                              std::vector<Matrix>* out) {
  auto host = ws.F32(name, {count, rows, cols});
  if (!host.ok()) return host.status();
  out->clear();
  for (int64_t i = 0; i < count; ++i) {
    auto dev = be.UploadMatrix(*host + i * rows * cols, rows, cols);
    if (!dev.ok()) return dev.status();
    out->push_back(*dev);
  }
  return absl::OkStatus();
}

}  // namespace seqboat
