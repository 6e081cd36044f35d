#include "engine/layers/weight_fetch.h"

#include <algorithm>

#include "base/status_macros.h"

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

namespace {

// The parts, each [rows, cols] (cols 0: a vector [rows]), one after another.
absl::Status ReadStacked(WeightStore& ws, const std::vector<StackPart>& parts,
                         int64_t cols, std::vector<float>* out) {
  out->clear();
  for (const StackPart& part : parts) {
    std::vector<int64_t> shape = {part.rows};
    if (cols > 0) shape.push_back(cols);
    auto host = ws.F32(part.name, shape);
    if (!host.ok()) return host.status();
    out->insert(out->end(), *host,
                *host + part.rows * std::max<int64_t>(cols, 1));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status FetchStackedMatrix(WeightStore& ws, Backend& be,
                                const std::vector<StackPart>& parts,
                                int64_t cols, Matrix* out) {
  std::vector<float> host;
  RETURN_IF_ERROR(ReadStacked(ws, parts, cols, &host));
  auto dev = be.UploadMatrix(host.data(),
                             static_cast<int64_t>(host.size()) / cols, cols);
  if (!dev.ok()) return dev.status();
  *out = *dev;
  return absl::OkStatus();
}

absl::Status FetchStackedVector(WeightStore& ws, Backend& be,
                                const std::vector<StackPart>& parts,
                                const float** out) {
  std::vector<float> host;
  RETURN_IF_ERROR(ReadStacked(ws, parts, 0, &host));
  auto dev = be.UploadVector(host.data(), static_cast<int64_t>(host.size()));
  if (!dev.ok()) return dev.status();
  *out = *dev;
  return absl::OkStatus();
}

absl::Status FetchMatrixStacks(WeightStore& ws, Backend& be,
                               const std::vector<std::string>& names,
                               int64_t count, int64_t rows, int64_t cols,
                               std::vector<Matrix>* out) {
  std::vector<const float*> stacks;
  for (const std::string& name : names) {
    auto host = ws.F32(name, {count, rows, cols});
    if (!host.ok()) return host.status();
    stacks.push_back(*host);
  }
  const int64_t size = rows * cols;
  // One stack uploads from the store's copy; several are stacked per matrix.
  std::vector<float> one(
      stacks.size() > 1 ? static_cast<size_t>(size * stacks.size()) : 0);
  out->clear();
  for (int64_t e = 0; e < count; ++e) {
    const float* host = stacks[0] + e * size;
    if (stacks.size() > 1) {
      for (size_t k = 0; k < stacks.size(); ++k) {
        std::copy(stacks[k] + e * size, stacks[k] + (e + 1) * size,
                  one.data() + k * size);
      }
      host = one.data();
    }
    auto dev =
        be.UploadMatrix(host, rows * static_cast<int64_t>(stacks.size()), cols);
    if (!dev.ok()) return dev.status();
    out->push_back(*dev);
  }
  return absl::OkStatus();
}

absl::Status FetchMatrixStack(WeightStore& ws, Backend& be,
                              const std::string& name, int64_t count,
                              int64_t rows, int64_t cols,
                              std::vector<Matrix>* out) {
  return FetchMatrixStacks(ws, be, {name}, count, rows, cols, out);
}

}  // namespace seqboat
