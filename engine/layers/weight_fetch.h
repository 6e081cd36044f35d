// Load-time helpers every block uses: fetch a canonical tensor with its exact
// shape from the weight store (errors name the tensor) and hand it to the
// backend.
#ifndef SEQBOAT_ENGINE_LAYERS_WEIGHT_FETCH_H_
#define SEQBOAT_ENGINE_LAYERS_WEIGHT_FETCH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/backend/backend.h"
#include "engine/model_dir/weight_store.h"

namespace seqboat {
// A device copy of the whole tensor (any rank), flattened.
absl::Status FetchVector(WeightStore& ws, Backend& be, const std::string& name,
                         const std::vector<int64_t>& shape, const float** out);

// A [rows, cols] Linear weight.
absl::Status FetchMatrix(WeightStore& ws, Backend& be, const std::string& name,
                         int64_t rows, int64_t cols, Matrix* out);

// The same, kept in fp32 on every backend (Backend::UploadMatrixFp32).
absl::Status FetchMatrixFp32(WeightStore& ws, Backend& be,
                             const std::string& name, int64_t rows,
                             int64_t cols, Matrix* out);

// Linear weights that read the same input, stacked as one matrix so that
// one GEMM computes them all: parts are (name, rows) in output order, each
// [rows, cols]. FetchStackedVector stacks their biases ([rows] each) alike.
struct StackPart {
  std::string name;
  int64_t rows = 0;
};
absl::Status FetchStackedMatrix(WeightStore& ws, Backend& be,
                                const std::vector<StackPart>& parts,
                                int64_t cols, Matrix* out);
absl::Status FetchStackedVector(WeightStore& ws, Backend& be,
                                const std::vector<StackPart>& parts,
                                const float** out);

// count matrices, the e-th the e-th [rows, cols] matrix of each named stack
// [count, rows, cols] on top of one another (an expert's up and gate as one
// [up; gate]).
absl::Status FetchMatrixStacks(WeightStore& ws, Backend& be,
                               const std::vector<std::string>& names,
                               int64_t count, int64_t rows, int64_t cols,
                               std::vector<Matrix>* out);

// A stack [count, rows, cols] of Linear weights (one per expert).
absl::Status FetchMatrixStack(WeightStore& ws, Backend& be,
                              const std::string& name, int64_t count,
                              int64_t rows, int64_t cols,
                              std::vector<Matrix>* out);

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_LAYERS_WEIGHT_FETCH_H_
