#include "weights/safetensors_writer.h"

#include <fstream>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace seqboat {

absl::Status WriteF32Safetensors(
    const std::string& path, const std::map<std::string, F32Tensor>& tensors,
    const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    const uint64_t bytes = t.data.size() * sizeof(float);
    header[name] = {{"dtype", "F32"},
                    {"shape", t.shape},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  // The data section starts 8-byte aligned, as the format recommends.
  text.append((8 - text.size() % 8) % 8, ' ');
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  char len[8];
  for (int i = 0; i < 8; ++i) {
    len[i] = static_cast<char>(static_cast<uint64_t>(text.size()) >> (8 * i));
  }
  f.write(len, 8);
  f.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const auto& [name, t] : tensors) {
    f.write(reinterpret_cast<const char*>(t.data.data()),
            static_cast<std::streamsize>(t.data.size() * sizeof(float)));
  }
  f.close();
  if (!f) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

}  // namespace seqboat
