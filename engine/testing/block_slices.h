// Test helper: tiny_hybrid's blocks one at a time. A model of block `index`
// alone (its tensors renamed to blocks.0.*, with the same embedding, final
// norm and tokenizer), so an engine property is checked for each kind on its
// own as well as in the stack.
#ifndef SEQBOAT_ENGINE_TESTING_BLOCK_SLICES_H_
#define SEQBOAT_ENGINE_TESTING_BLOCK_SLICES_H_

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "weights/safetensors.h"
#include "weights/safetensors_writer.h"

namespace seqboat {

inline constexpr char kTinyHybrid[] = "tests/data/tiny_hybrid";

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline constexpr char kTinyGdn[] = "tests/data/tiny_gdn";

// The directory of a model of block `index` of `src` (tiny_hybrid unless
// named) alone, written under the test's temporary directory.
inline std::string SliceBlock(int index, const std::string& src = kTinyHybrid) {
  nlohmann::json config = nlohmann::json::parse(ReadFile(src + "/config.json"));
  const std::string dir =
      absl::StrCat(testing::TempDir(), "/slice_",
                   src.substr(src.find_last_of('/') + 1), "_", index);
  std::filesystem::create_directories(dir);
  config["blocks"] = nlohmann::json::array({config["blocks"][index]});
  std::ofstream(dir + "/config.json") << config.dump();
  std::ofstream(dir + "/tokenizer.json") << ReadFile(src + "/tokenizer.json");
  auto file = SafetensorsFile::Open(src + "/model.safetensors");
  EXPECT_TRUE(file.ok()) << file.status();
  std::map<std::string, F32Tensor> out;
  const std::string prefix = absl::StrCat("blocks.", index, ".");
  for (const TensorView& t : (*file)->tensors()) {
    std::string name = t.name;
    if (name.rfind("blocks.", 0) == 0) {
      if (name.rfind(prefix, 0) != 0) continue;
      name = "blocks.0." + name.substr(prefix.size());
    }
    F32Tensor f;
    f.shape = t.shape;
    f.data.resize(t.nbytes / sizeof(float));
    std::memcpy(f.data.data(), t.data, t.nbytes);
    out[name] = std::move(f);
  }
  EXPECT_TRUE(WriteF32Safetensors(dir + "/model.safetensors", out).ok());
  return dir;
}

// Each block of `srcs`' stacks once per distinct config (kind and fields):
// (a name, its sliced model's directory).
inline std::vector<std::pair<std::string, std::string>> EachBlockKind(
    const std::vector<std::string>& srcs = {kTinyHybrid}) {
  std::set<std::string> seen;
  std::vector<std::pair<std::string, std::string>> kinds;
  for (const std::string& src : srcs) {
    nlohmann::json config =
        nlohmann::json::parse(ReadFile(src + "/config.json"));
    for (int i = 0; i < static_cast<int>(config["blocks"].size()); ++i) {
      const nlohmann::json& block = config["blocks"][i];
      if (seen.insert(block.dump()).second) {
        kinds.emplace_back(absl::StrCat(block["kind"].get<std::string>(), " (",
                                        src, " block ", i, ")"),
                           SliceBlock(i, src));
      }
    }
  }
  return kinds;
}

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_TESTING_BLOCK_SLICES_H_
