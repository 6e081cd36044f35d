// Read-only, memory-mapped reader for the safetensors format
// (https://github.com/huggingface/safetensors): an 8-byte little-endian header
// length, a JSON header, then the raw tensor bytes.
//
// Open() validates the whole header before anything is exposed: every dtype,
// shape and byte range is checked against the file, so a TensorView handed out
// always describes bytes that exist. Errors name the file and, where relevant,
// the tensor. Duplicate keys in the header are rejected (a JSON parser would
// silently keep the last one). Holes between tensors are allowed.
//
// Tensor data pointers point into the mapping and are only as aligned as the
// file makes them; read through memcpy or check alignment. The mapping lives
// as long as the SafetensorsFile. Not copyable; safe to read from many threads.
#ifndef SEQBOAT_WEIGHTS_SAFETENSORS_H_
#define SEQBOAT_WEIGHTS_SAFETENSORS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace seqboat {

enum class DType { kF32, kF16, kBF16, kF64, kI64, kI32, kI16, kI8, kU8, kBool };

// Bytes per element.
size_t DTypeSize(DType dtype);
// The safetensors spelling: "F32", "BF16", "BOOL", ...
std::string_view DTypeName(DType dtype);
// Inverse of DTypeName; false for anything else (including F8 variants).
bool ParseDType(std::string_view name, DType* dtype);

struct TensorView {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;  // empty for a scalar
  const void* data;            // into the mapping; no alignment guarantee
  size_t nbytes;               // = numel * DTypeSize(dtype)
};

// Product of the dims (1 for a scalar). The shapes of an opened file are
// validated, so this cannot overflow for them.
int64_t NumElements(const std::vector<int64_t>& shape);
// "[2, 3]" — for error messages.
std::string ShapeString(const std::vector<int64_t>& shape);

class SafetensorsFile {
 public:
  // Maps and validates the file. NotFound if it does not exist,
  // InvalidArgument if it is malformed in any way.
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Open(
      const std::string& path);

  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  // nullptr if absent.
  const TensorView* Find(std::string_view name) const;
  // Sorted by data offset (ties, i.e. empty tensors, by name).
  const std::vector<TensorView>& tensors() const { return tensors_; }
  // The header's "__metadata__" (empty if none).
  const std::map<std::string, std::string>& metadata() const {
    return metadata_;
  }
  const std::string& path() const { return path_; }

 private:
  SafetensorsFile(std::string path, void* base, size_t size)
      : path_(std::move(path)), base_(base), size_(size) {}

  std::string path_;
  void* base_;   // the mapping, munmap'ed in the destructor
  size_t size_;  // bytes mapped (the whole file)
  std::vector<TensorView> tensors_;
  std::map<std::string, size_t, std::less<>> index_;  // name -> tensors_ index
  std::map<std::string, std::string> metadata_;
};

}  // namespace seqboat

#endif  // SEQBOAT_WEIGHTS_SAFETENSORS_H_
