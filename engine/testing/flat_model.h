// Test helper: a copy of a bundled tiny model whose config.json scales its
// logits down. The tiny models' logits are so peaked that seeded sampling
// is as good as greedy; in the flattened copy every draw matters, so tests
// of seeds and sampling paths mean something.
#ifndef SEQBOAT_ENGINE_TESTING_FLAT_MODEL_H_
#define SEQBOAT_ENGINE_TESTING_FLAT_MODEL_H_

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace seqboat {

// The model directory `src` copied under TEST_TMPDIR with "logit_scale":
// 1.0 in its config.json replaced by 0.1; returns the copy's directory.
inline std::string FlatModelCopy(const std::string& src) {
  namespace fs = std::filesystem;
  const char* tmp = std::getenv("TEST_TMPDIR");
  const fs::path dir = fs::path(tmp != nullptr ? tmp : "/tmp") /
                       (fs::path(src).filename().string() + "_flat");
  fs::create_directories(dir);
  for (const char* f : {"model.safetensors", "tokenizer.json"}) {
    fs::copy_file(fs::path(src) / f, dir / f,
                  fs::copy_options::overwrite_existing);
  }
  std::stringstream config;
  config << std::ifstream(fs::path(src) / "config.json").rdbuf();
  std::string text = config.str();
  const std::string from = "\"logit_scale\": 1.0";
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos);
  if (at != std::string::npos) {
    text.replace(at, from.size(), "\"logit_scale\": 0.1");
  }
  std::ofstream(dir / "config.json") << text;
  return dir.string();
}

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_TESTING_FLAT_MODEL_H_
