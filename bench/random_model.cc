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
namespace {

// The draws both writers make.
class Random {
 public:
  explicit Random(uint64_t seed) : rng_(seed) {}
  F32Tensor Gaussian(std::vector<int64_t> shape, float stddev) {
    F32Tensor t{shape, {}};
    int64_t size = 1;
    for (int64_t dim : shape) size *= dim;
    t.data.resize(size);
    for (float& x : t.data) x = stddev * normal_(rng_);
    return t;
  }
  float Uniform() { return uniform_(rng_); }
  // softplus⁻¹ of a dt drawn log-uniformly in [1e-3, 1e-1], as mamba
  // initialises.
  float DtBias() {
    const float dt = std::exp(std::log(1e-3f) +
                              Uniform() * (std::log(1e-1f) - std::log(1e-3f)));
    return dt + std::log(-std::expm1(-dt));
  }
  F32Tensor DtBias(int64_t n) {
    F32Tensor t{{n}, std::vector<float>(n)};
    for (float& x : t.data) x = DtBias();
    return t;
  }

 private:
  std::mt19937_64 rng_;
  std::normal_distribution<float> normal_{0.0f, 1.0f};
  std::uniform_real_distribution<float> uniform_{0.0f, 1.0f};
};

F32Tensor Filled(std::vector<int64_t> shape, float value) {
  int64_t size = 1;
  for (int64_t dim : shape) size *= dim;
  return F32Tensor{shape, std::vector<float>(size, value)};
}

// config.json around n_layers copies of `block`, the byte tokenizer and the
// tensors.
absl::Status WriteModel(const std::string& dir, const std::string& name,
                        int64_t vocab, int64_t d_model, int n_layers,
                        const nlohmann::json& block,
                        const std::map<std::string, F32Tensor>& ts) {
  nlohmann::json config = {
      {"format", "seqboat-canonical"},
      {"version", 1},
      {"name", name},
      {"vocab_size", vocab},
      {"d_model", d_model},
      {"embed", {{"scale", 1.0}, {"padding_idx", nullptr}}},
      {"tie_embeddings", true},
      {"logit_scale", 1.0},
      {"final_norm", {{"type", "rmsnorm"}, {"eps", 1e-5}, {"affine", true}}},
      {"residual_dtype", "float32"},
      {"eos_token_id", 256},
      {"bos_token_id", nullptr},
      {"blocks", nlohmann::json::array()}};
  for (int i = 0; i < n_layers; ++i) config["blocks"].push_back(block);
  std::ofstream(dir + "/config.json") << config.dump(2);
  std::ofstream(dir + "/tokenizer.json")
      << R"({"version": "1.0", "model": {"type": "Bytes"}, "added_tokens": [{"id": 256, "content": "<|endoftext|>", "special": true}]})";
  return WriteF32Safetensors(dir + "/model.safetensors", ts,
                             {{"format", "seqboat-canonical"},
                              {"version", "1"},
                              {"source", "random"},
                              {"converter", "bench-random@1"}});
}

}  // namespace

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
  return WriteModel(dir, "random-mamba", v, d, s.n_layers, block, ts);
}

absl::Status WriteRandomMamba2(const RandomMamba2Shape& s,
                               const std::string& dir) {
  ::mkdir(dir.c_str(), 0755);
  Random rand(s.seed);
  const int64_t d = s.d_model, e = s.expand * d, p = s.head_dim, h = e / p,
                n = s.d_state, g = s.n_groups, k = s.d_conv, v = s.vocab,
                conv = e + 2 * g * n, rows = e + conv + h;
  if (h * p != e || h % g != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("mamba2 shape: head_dim ", p, " must divide d_inner ", e,
                     " and n_groups ", g, " the heads"));
  }
  std::map<std::string, F32Tensor> ts;
  ts["embed.weight"] = rand.Gaussian({v, d}, 0.02f);
  ts["final_norm.weight"] = Filled({d}, 1.0f);
  for (int i = 0; i < s.n_layers; ++i) {
    const std::string b = absl::StrCat("blocks.", i, ".");
    ts[b + "norm.weight"] = Filled({d}, 1.0f);
    ts[b + "in_proj.weight"] =
        rand.Gaussian({rows, d}, 1.0f / std::sqrt(float(d)));
    ts[b + "conv.weight"] = rand.Gaussian({conv, k}, 0.5f);
    ts[b + "conv.bias"] = rand.Gaussian({conv}, 0.1f);
    ts[b + "dt_bias"] = rand.DtBias(h);
    // mamba_ssm's A = -uniform(1, 16).
    F32Tensor a = Filled({h}, 0.0f);
    for (float& x : a.data) x = -1.0f - 15.0f * rand.Uniform();
    ts[b + "A"] = a;
    ts[b + "D"] = Filled({h}, 1.0f);
    ts[b + "gated_norm.weight"] = Filled({e}, 1.0f);
    ts[b + "out_proj.weight"] =
        rand.Gaussian({d, e}, 1.0f / std::sqrt(float(e)) / s.n_layers);
  }
  nlohmann::json block = {{"kind", "mamba2"},
                          {"norm", {{"type", "rmsnorm"}, {"eps", 1e-5}}},
                          {"n_heads", h},
                          {"head_dim", p},
                          {"d_state", n},
                          {"n_groups", g},
                          {"d_conv", k},
                          {"in_proj_bias", false},
                          {"out_proj_bias", false},
                          {"conv_bias", true},
                          {"dt_min", 0.0},
                          {"dt_max", nullptr},
                          {"gated_norm_eps", 1e-5}};
  return WriteModel(dir, "random-mamba2", v, d, s.n_layers, block, ts);
}

}  // namespace seqboat
