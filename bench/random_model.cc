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

// config.json around `blocks`, the byte tokenizer and the tensors.
absl::Status WriteModel(const std::string& dir, const std::string& name,
                        int64_t vocab, int64_t d_model,
                        const nlohmann::json& blocks,
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
      {"blocks", blocks}};
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
  return WriteModel(dir, "random-mamba", v, d,
                    nlohmann::json::array_t(s.n_layers, block), ts);
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
  return WriteModel(dir, "random-mamba2", v, d,
                    nlohmann::json::array_t(s.n_layers, block), ts);
}

absl::Status WriteRandomQwen35(const RandomQwen35Shape& s,
                               const std::string& dir) {
  ::mkdir(dir.c_str(), 0755);
  Random rand(s.seed);
  const int64_t d = s.d_model, kd = int64_t{s.n_k_heads} * s.head_k_dim,
                vd = int64_t{s.n_v_heads} * s.head_v_dim, conv = 2 * kd + vd,
                hv = s.n_v_heads, qd = int64_t{s.n_heads} * s.head_dim,
                kvd = int64_t{s.n_kv_heads} * s.head_dim, f = s.d_ff;
  const float in_std = 1.0f / std::sqrt(float(d));
  const nlohmann::json norm = {{"type", "rmsnorm"}, {"eps", 1e-6}};
  const nlohmann::json gdn = {{"kind", "gdn"},
                              {"norm", norm},
                              {"n_k_heads", s.n_k_heads},
                              {"n_v_heads", s.n_v_heads},
                              {"head_k_dim", s.head_k_dim},
                              {"head_v_dim", s.head_v_dim},
                              {"d_conv", 4},
                              {"gated_norm_eps", 1e-6}};
  const nlohmann::json attention = {{"kind", "attention"},
                                    {"norm", norm},
                                    {"n_heads", s.n_heads},
                                    {"n_kv_heads", s.n_kv_heads},
                                    {"head_dim", s.head_dim},
                                    {"qkv_bias", false},
                                    {"o_bias", false},
                                    {"pos", "rope_half"},
                                    {"rope_theta", 1e7},
                                    {"rope_scaling", nullptr},
                                    {"rotary_dim", s.rotary_dim},
                                    {"sinks", s.sinks},
                                    {"window", s.window},
                                    {"rel_bias", nullptr},
                                    {"qk_norm", norm},
                                    {"out_gate", "sigmoid"}};
  const nlohmann::json mlp = {{"kind", "mlp"}, {"norm", norm},
                              {"d_ff", f},     {"act", "silu"},
                              {"gated", true}, {"bias", false}};
  std::map<std::string, F32Tensor> ts;
  ts["embed.weight"] = rand.Gaussian({s.vocab, d}, 0.02f);
  ts["final_norm.weight"] = Filled({d}, 1.0f);
  nlohmann::json blocks = nlohmann::json::array();
  for (int i = 0; i < s.n_layers; ++i) {
    const std::string a = absl::StrCat("blocks.", 2 * i, ".");
    const std::string m = absl::StrCat("blocks.", 2 * i + 1, ".");
    ts[a + "norm.weight"] = Filled({d}, 1.0f);
    if ((i + 1) % s.full_attention_interval == 0) {
      blocks.push_back(attention);
      ts[a + "attn.q.weight"] = rand.Gaussian({qd, d}, in_std);
      ts[a + "attn.gate.weight"] = rand.Gaussian({qd, d}, in_std);
      ts[a + "attn.k.weight"] = rand.Gaussian({kvd, d}, in_std);
      ts[a + "attn.v.weight"] = rand.Gaussian({kvd, d}, in_std);
      ts[a + "attn.o.weight"] =
          rand.Gaussian({d, qd}, 1.0f / std::sqrt(float(qd)) / s.n_layers);
      ts[a + "attn.q_norm.weight"] = Filled({s.head_dim}, 1.0f);
      ts[a + "attn.k_norm.weight"] = Filled({s.head_dim}, 1.0f);
    } else {
      blocks.push_back(gdn);
      ts[a + "in_qkv.weight"] = rand.Gaussian({conv, d}, in_std);
      ts[a + "in_z.weight"] = rand.Gaussian({vd, d}, in_std);
      ts[a + "in_b.weight"] = rand.Gaussian({hv, d}, in_std);
      ts[a + "in_a.weight"] = rand.Gaussian({hv, d}, in_std);
      ts[a + "conv.weight"] = rand.Gaussian({conv, 4}, 0.5f);
      // transformers' A_log = log(uniform(0.01, 16)), so A = -uniform.
      F32Tensor decay = Filled({hv}, 0.0f);
      for (float& x : decay.data) x = -0.01f - 15.99f * rand.Uniform();
      ts[a + "A"] = decay;
      ts[a + "dt_bias"] = Filled({hv}, 1.0f);
      ts[a + "gated_norm.weight"] = Filled({s.head_v_dim}, 1.0f);
      ts[a + "out_proj.weight"] =
          rand.Gaussian({d, vd}, 1.0f / std::sqrt(float(vd)) / s.n_layers);
    }
    blocks.push_back(mlp);
    ts[m + "norm.weight"] = Filled({d}, 1.0f);
    ts[m + "mlp.gate.weight"] = rand.Gaussian({f, d}, in_std);
    ts[m + "mlp.up.weight"] = rand.Gaussian({f, d}, in_std);
    ts[m + "mlp.down.weight"] =
        rand.Gaussian({d, f}, 1.0f / std::sqrt(float(f)) / s.n_layers);
  }
  return WriteModel(dir, "random-qwen3.5-0.8b-shape", s.vocab, d, blocks, ts);
}

}  // namespace seqboat
