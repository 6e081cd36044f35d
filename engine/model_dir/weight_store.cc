#include "engine/model_dir/weight_store.h"

#include <cstdint>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/dtype_convert.h"

namespace seqboat {
namespace {

// Debian's Abseil is built without the std::string_view alias.
absl::string_view AbslView(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}

}  // namespace

WeightStore::WeightStore(std::unique_ptr<SafetensorsFile> file)
    : file_(std::move(file)), used_(file_->tensors().size(), false) {}

absl::StatusOr<std::unique_ptr<WeightStore>> WeightStore::Open(
    const std::string& safetensors_path) {
  auto file = SafetensorsFile::Open(safetensors_path);
  if (!file.ok()) return file.status();
  return std::unique_ptr<WeightStore>(new WeightStore(std::move(*file)));
}

bool WeightStore::Has(std::string_view name) const {
  return file_->Find(name) != nullptr;
}

absl::StatusOr<const TensorView*> WeightStore::Fetch(
    std::string_view name, const std::vector<int64_t>& shape) {
  const TensorView* view = file_->Find(name);
  if (view == nullptr) {
    return absl::NotFoundError(
        absl::StrCat(file_->path(), ": missing tensor \"", AbslView(name),
                     "\" (expected ", ShapeString(shape), ")"));
  }
  if (view->shape != shape) {
    return absl::InvalidArgumentError(absl::StrCat(
        file_->path(), ": tensor \"", AbslView(name), "\" has shape ",
        ShapeString(view->shape), ", expected ", ShapeString(shape)));
  }
  used_[static_cast<size_t>(view - file_->tensors().data())] = true;
  return view;
}

absl::StatusOr<const TensorView*> WeightStore::Raw(
    std::string_view name, const std::vector<int64_t>& shape) {
  return Fetch(name, shape);
}

absl::StatusOr<const float*> WeightStore::F32(
    std::string_view name, const std::vector<int64_t>& shape) {
  auto view_or = Fetch(name, shape);
  if (!view_or.ok()) return view_or.status();
  const TensorView& view = **view_or;
  if (view.dtype != DType::kF32 && view.dtype != DType::kBF16 &&
      view.dtype != DType::kF16) {
    return absl::InvalidArgumentError(absl::StrCat(
        file_->path(), ": tensor \"", AbslView(name), "\" has dtype ",
        AbslView(DTypeName(view.dtype)), ", expected F32, BF16 or F16"));
  }
  if (view.dtype == DType::kF32 &&
      reinterpret_cast<uintptr_t>(view.data) % alignof(float) == 0) {
    return static_cast<const float*>(view.data);
  }
  auto it = converted_.find(name);
  if (it != converted_.end()) return it->second.data();

  const size_t count = static_cast<size_t>(NumElements(view.shape));
  std::vector<float> values(count);
  switch (view.dtype) {
    case DType::kF32:  // unaligned in the file
      if (count > 0) std::memcpy(values.data(), view.data, view.nbytes);
      break;
    case DType::kBF16:
      Bf16ToF32(view.data, count, values.data());
      break;
    case DType::kF16:
      F16ToF32(view.data, count, values.data());
      break;
    default:
      break;  // rejected above
  }
  return converted_.emplace(view.name, std::move(values)).first->second.data();
}

absl::Status WeightStore::CheckAllUsed() const {
  std::vector<absl::string_view> unused;
  for (size_t i = 0; i < used_.size(); ++i) {
    if (!used_[i]) unused.push_back(file_->tensors()[i].name);
  }
  if (unused.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      file_->path(), ": unknown tensors: ", absl::StrJoin(unused, ", ")));
}

}  // namespace seqboat
