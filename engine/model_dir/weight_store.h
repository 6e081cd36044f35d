// What layers use to fetch their tensors at load time: a safetensors file
// plus shape and dtype checks, fp32 conversion, and bookkeeping of which
// tensors were fetched so that none is silently ignored (MODELS.md §6:
// unknown tensors are an error).
//
// Every fetch names the exact shape the caller expects; a mismatch is an
// InvalidArgument naming the tensor with expected and actual shape, a missing
// tensor is NotFound naming it. Pointers stay valid for the store's lifetime.
// Not thread-safe: loading happens on one thread.
#ifndef SEQBOAT_ENGINE_MODEL_DIR_WEIGHT_STORE_H_
#define SEQBOAT_ENGINE_MODEL_DIR_WEIGHT_STORE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "weights/safetensors.h"

namespace seqboat {

class WeightStore {
 public:
  static absl::StatusOr<std::unique_ptr<WeightStore>> Open(
      const std::string& safetensors_path);

  bool Has(std::string_view name) const;

  // The tensor as fp32 host memory with exactly this shape. F32 tensors
  // point into the mapping when 4-byte aligned, else are copied; BF16/F16 are
  // converted once and owned by the store (a second fetch returns the same
  // pointer). Other dtypes are an error. May be null for a zero-element
  // tensor. Marks the tensor used.
  absl::StatusOr<const float*> F32(std::string_view name,
                                   const std::vector<int64_t>& shape);

  // The raw view, for backends that keep bf16/f16 on the device. Checks the
  // shape only. Marks the tensor used.
  absl::StatusOr<const TensorView*> Raw(std::string_view name,
                                        const std::vector<int64_t>& shape);

  // FailedPrecondition listing every tensor never fetched
  // ("unknown tensors: a, b"), OK when all were.
  absl::Status CheckAllUsed() const;

  // For the file's __metadata__ and its tensor list.
  const SafetensorsFile& file() const { return *file_; }

 private:
  explicit WeightStore(std::unique_ptr<SafetensorsFile> file);

  // Finds `name`, checks its shape, marks it used.
  absl::StatusOr<const TensorView*> Fetch(std::string_view name,
                                          const std::vector<int64_t>& shape);

  std::unique_ptr<SafetensorsFile> file_;
  std::vector<bool> used_;  // parallel to file_->tensors()
  // fp32 copies, keyed by tensor name; vectors are never resized after
  // insertion, so their data pointers are stable.
  std::map<std::string, std::vector<float>, std::less<>> converted_;
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_MODEL_DIR_WEIGHT_STORE_H_
