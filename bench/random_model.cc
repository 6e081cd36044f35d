#include "bench/random_model.h"

#include <sys/stat.h>

#include <cmath>
#include <fstream>
#include <map>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "weights/safetensors_writer.h"

namespace seqboat {

absl::Status WriteRandomMamba(const RandomMambaShape& s,
                              const std::string& dir) {
  ::mkdir(dir.c_str(), 0755);
  std::mt19937_64 rng(s.seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  const int64_t d = s.d_model, e = s.expand * d, n = s.d_state, k = s.d_conv,
                r = (d + 15) / 16, v = s.vocab;
  auto gaussian = [&](std::vector<int64_t> shape, float stddev) {
    F32Tensor t{shape, {}};
    int64_t size = 1;
    for (int64_t dim : shape) size *= dim;
    t.data.resize(size);
    for (float& x : t.data) x = stddev * normal(rng);
    return t;
  };
  auto filled = [&](std::vector<int64_t> shape, float value) {
    F32Tensor t = gaussian(shape, 0.0f);
    for (float& x : t.data) x = value;
    return t;
  };
  std::map<std::string, F32Tensor> ts;
  auto add = [&](std::string name, F32Tensor t) {
    ts[std::move(name)] = std::move(t);
  };
  add("embed.weight", gaussian({v, d}, 0.02f));
  add("final_norm.weight", filled({d}, 1.0f));
  for (int i = 0; i < s.n_layers; ++i) {
    const std::string p = absl::StrCat("blocks.", i, ".");
    add(p + "norm.weight", filled({d}, 1.0f));
    add(p + "in_proj.weight", gaussian({2 * e, d}, 1.0f / std::sqrt(float(d))));
    add(p + "conv.weight", gaussian({e, k}, 0.5f));
    add(p + "conv.bias", gaussian({e}, 0.1f));
    add(p + "x_proj.weight",
        gaussian({r + 2 * n, e}, 1.0f / std::sqrt(float(e))));
    add(p + "dt_proj.weight", gaussian({e, r}, 1.0f / std::sqrt(float(r))));
    F32Tensor dt_bias = filled({e}, 0.0f);
    for (float& x : dt_bias.data) {
      // softplus⁻¹ of a dt drawn log-uniformly in [1e-3, 1e-1], as mamba
      // initialises.
      const float dt = std::exp(
          std::log(1e-3f) + uniform(rng) * (std::log(1e-1f) - std::log(1e-3f)));
      x = dt + std::log(-std::expm1(-dt));
    }
    add(p + "dt_proj.bias", dt_bias);
    F32Tensor a = filled({e, n}, 0.0f);
    for (int64_t c = 0; c < e; ++c) {
      for (int64_t j = 0; j < n; ++j)
        a.data[c * n + j] = -static_cast<float>(j + 1);
    }
    add(p + "A", a);
    add(p + "D", filled({e}, 1.0f));
    add(p + "out_proj.weight",
        gaussian({d, e}, 1.0f / std::sqrt(float(e)) / s.n_layers));
  }
  nlohmann::json block = {
      {"kind", "mamba1"},      {"norm", {{"type", "rmsnorm"}, {"eps", 1e-5}}},
      {"d_inner", e},          {"d_state", n},
      {"d_conv", k},           {"dt_rank", r},
      {"in_proj_bias", false}, {"out_proj_bias", false},
      {"conv_bias", true}};
  nlohmann::json config = {
      {"format", "seqboat-canonical"},
      {"version", 1},
      {"name", "random-mamba"},
      {"vocab_size", v},
      {"d_model", d},
      {"embed", {{"scale", 1.0}, {"padding_idx", nullptr}}},
      {"tie_embeddings", true},
      {"logit_scale", 1.0},
      {"final_norm", {{"type", "rmsnorm"}, {"eps", 1e-5}, {"affine", true}}},
      {"residual_dtype", "float32"},
      {"eos_token_id", 256},
      {"bos_token_id", nullptr},
      {"blocks", nlohmann::json::array()}};
  for (int i = 0; i < s.n_layers; ++i) config["blocks"].push_back(block);
  std::ofstream(dir + "/config.json") << config.dump(2);
  std::ofstream(dir + "/tokenizer.json")
      << R"({"version": "1.0", "model": {"type": "Bytes"}, "added_tokens": [{"id": 256, "content": "<|endoftext|>", "special": true}]})";
  return WriteF32Safetensors(dir + "/model.safetensors", ts,
                             {{"format", "seqboat-canonical"},
                              {"version", "1"},
                              {"source", "random"},
                              {"converter", "bench-random@1"}});
}

}  // namespace seqboat
