#include "engine/layers/rope.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "engine/backend/attention_math.h"

namespace seqboat {
namespace {

constexpr double kPi = 3.14159265358979323846;

bool PositiveFinite(double x) { return x > 0.0 && std::isfinite(x); }

// transformers' _compute_llama3_parameters on plain RoPE's inv_freq.
void Llama3(const RopeScaling& s, std::vector<float>* inv_freq) {
  const float factor = static_cast<float>(s.factor);
  const float low = static_cast<float>(s.low_freq_factor);
  const auto old_len = static_cast<double>(s.original_max_position_embeddings);
  const float low_freq_wavelen =
      static_cast<float>(old_len / s.low_freq_factor);
  const float high_freq_wavelen =
      static_cast<float>(old_len / s.high_freq_factor);
  const float span = static_cast<float>(s.high_freq_factor - s.low_freq_factor);
  for (float& f : *inv_freq) {
    // torch evaluates scalar / tensor as reciprocal(tensor) * scalar.
    const float wavelen = (1.0f / f) * static_cast<float>(2.0 * kPi);
    const float scaled = wavelen > low_freq_wavelen ? f / factor : f;
    const bool medium =
        !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
    if (medium) {
      const float smooth =
          ((1.0f / wavelen) * static_cast<float>(old_len) - low) / span;
      f = (1.0f - smooth) * scaled / factor + smooth * scaled;
    } else {
      f = scaled;
    }
  }
}

// transformers' _compute_yarn_parameters: pair i keeps its frequency below
// the correction range, is interpolated by 1/factor above it, and ramps
// linearly in between.
void Yarn(const RopeScaling& s, int head_dim, double theta,
          std::vector<float>* inv_freq) {
  const double d = head_dim;
  const auto len = static_cast<double>(s.original_max_position_embeddings);
  auto correction_dim = [&](double rotations) {
    return d * std::log(len / (rotations * 2.0 * kPi)) /
           (2.0 * std::log(theta));
  };
  const double low = std::max(std::floor(correction_dim(s.beta_fast)), 0.0);
  double high = std::min(std::ceil(correction_dim(s.beta_slow)), d - 1.0);
  if (low == high) high += 0.001;
  const float factor = static_cast<float>(s.factor);
  const float span = static_cast<float>(high - low);
  const float theta_f = static_cast<float>(theta);
  for (size_t i = 0; i < inv_freq->size(); ++i) {
    const float pos_freq =
        attention_math::RopePosFreq(static_cast<int>(i), head_dim, theta_f);
    const float extrapolation = 1.0f / pos_freq;
    const float interpolation = 1.0f / (factor * pos_freq);
    const float ramp = std::clamp(
        (static_cast<float>(i) - static_cast<float>(low)) / span, 0.0f, 1.0f);
    const float keep = 1.0f - ramp;
    (*inv_freq)[i] = interpolation * (1.0f - keep) + extrapolation * keep;
  }
}

}  // namespace

const char* RopeScalingTypeName(RopeScalingType type) {
  switch (type) {
    case RopeScalingType::kLinear:
      return "linear";
    case RopeScalingType::kDynamic:
      return "dynamic";
    case RopeScalingType::kLlama3:
      return "llama3";
    case RopeScalingType::kYarn:
      return "yarn";
    case RopeScalingType::kNone:
      break;
  }
  return "?";
}

absl::Status CheckRopeScaling(const RopeScaling& s, double rope_theta) {
  auto bad = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(
        "attention: rope_scaling (", RopeScalingTypeName(s.type), "): ", what));
  };
  if (s.type == RopeScalingType::kNone) return absl::OkStatus();
  if (!(s.factor >= 1.0 && std::isfinite(s.factor))) {
    return bad("factor must be a finite number >= 1");
  }
  switch (s.type) {
    case RopeScalingType::kLinear:
    case RopeScalingType::kNone:
      break;
    case RopeScalingType::kDynamic:
      if (s.max_position_embeddings <= 0) {
        return bad("max_position_embeddings must be positive");
      }
      break;
    case RopeScalingType::kLlama3:
      if (s.original_max_position_embeddings <= 0) {
        return bad("original_max_position_embeddings must be positive");
      }
      if (!PositiveFinite(s.low_freq_factor) ||
          !PositiveFinite(s.high_freq_factor) ||
          !(s.high_freq_factor > s.low_freq_factor)) {
        return bad(
            "low_freq_factor and high_freq_factor must be finite with "
            "0 < low_freq_factor < high_freq_factor");
      }
      break;
    case RopeScalingType::kYarn:
      if (s.original_max_position_embeddings <= 0) {
        return bad("original_max_position_embeddings must be positive");
      }
      if (!PositiveFinite(s.beta_fast) || !PositiveFinite(s.beta_slow) ||
          s.beta_slow > s.beta_fast) {
        return bad(
            "beta_fast and beta_slow must be finite with "
            "0 < beta_slow <= beta_fast");
      }
      if (!PositiveFinite(s.attention_factor)) {
        return bad("attention_factor must be a positive finite number");
      }
      if (!(rope_theta > 1.0)) return bad("needs rope_theta > 1");
      break;
  }
  return absl::OkStatus();
}

std::vector<float> RopeInvFreqs(const RopeScaling& s, int rotary_dim,
                                double rope_theta) {
  const int half = rotary_dim / 2;
  std::vector<float> inv_freq(half);
  const float theta = static_cast<float>(rope_theta);
  for (int i = 0; i < half; ++i) {
    inv_freq[i] = attention_math::RopeInvFreq(i, rotary_dim, theta);
  }
  switch (s.type) {
    case RopeScalingType::kLinear:
      for (float& f : inv_freq) f /= static_cast<float>(s.factor);
      break;
    case RopeScalingType::kLlama3:
      Llama3(s, &inv_freq);
      break;
    case RopeScalingType::kYarn:
      Yarn(s, rotary_dim, rope_theta, &inv_freq);
      break;
    case RopeScalingType::kDynamic:
    case RopeScalingType::kNone:
      break;
  }
  return inv_freq;
}

float RopeAttentionScaling(const RopeScaling& s) {
  return s.type == RopeScalingType::kYarn
             ? static_cast<float>(s.attention_factor)
             : 1.0f;
}

RopeTable MakeRopeTable(const RopeScaling& s, int head_dim, int rotary_dim,
                        double rope_theta, int64_t positions) {
  const int half = head_dim / 2;
  const std::vector<float> inv_freq = RopeInvFreqs(s, rotary_dim, rope_theta);
  const int rotated = static_cast<int>(inv_freq.size());
  const float scale = RopeAttentionScaling(s);
  RopeTable table;
  // Passed pairs: x·1 - y·0 is x exactly.
  table.cos.assign(positions * half, 1.0f);
  table.sin.assign(positions * half, 0.0f);
  for (int64_t p = 0; p < positions; ++p) {
    for (int i = 0; i < rotated; ++i) {
      const float angle = static_cast<float>(p) * inv_freq[i];
      table.cos[p * half + i] = std::cos(angle) * scale;
      table.sin[p * half + i] = std::sin(angle) * scale;
    }
  }
  return table;
}

int RopeSourceChannel(int e, int head_dim, int rotary_dim) {
  const int half = head_dim / 2, rotated = rotary_dim / 2;
  const int passed = (head_dim - rotary_dim) / 2;  // passed pairs
  const bool second = e >= half;
  const int i = second ? e - half : e;
  if (i < rotated) return second ? rotated + i : i;
  return rotary_dim + (second ? passed : 0) + (i - rotated);
}

}  // namespace seqboat
