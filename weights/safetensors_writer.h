// Writes fp32 tensors built in memory as a safetensors file: the random
// models of the benchmarks and the weights of layer tests. (Converters write
// canonical files from Python; the engine only reads them.)
#ifndef SEQBOAT_WEIGHTS_SAFETENSORS_WRITER_H_
#define SEQBOAT_WEIGHTS_SAFETENSORS_WRITER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace seqboat {

struct F32Tensor {
  std::vector<int64_t> shape;
  std::vector<float> data;  // row-major, as many values as shape holds
};

// Tensors in name order; `metadata` becomes "__metadata__" when non-empty.
absl::Status WriteF32Safetensors(
    const std::string& path, const std::map<std::string, F32Tensor>& tensors,
    const std::map<std::string, std::string>& metadata = {});

}  // namespace seqboat

#endif  // SEQBOAT_WEIGHTS_SAFETENSORS_WRITER_H_
