// config.json's moe block: its fields into a MoeConfig, the routing rules
// every MoeConfig must keep, and the block kind that builds the layer
// (moe.cc).
#include <any>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/backend/moe_params.h"
#include "engine/layers/moe.h"

namespace seqboat {
namespace {

// config.json's optional "shared" (see MoeConfig).
absl::Status ParseShared(ObjectReader& parent, MoeConfig* c) {
  const nlohmann::json* v = parent.Get("shared");
  if (v == nullptr || v->is_null()) return absl::OkStatus();
  if (!v->is_object()) {
    return parent.Invalid("shared", "null or a shared-expert object", *v);
  }
  ObjectReader r(*v, parent.source(),
                 absl::StrCat(parent.context(), ": shared"));
  RETURN_IF_ERROR(r.PositiveInt("d_ff", &c->shared_d_ff));
  const nlohmann::json* gate = r.Get("gate");
  if (gate != nullptr && !gate->is_null()) {
    if (!gate->is_string() || gate->get<std::string>() != "sigmoid") {
      return r.Invalid("gate", "\"sigmoid\" or null", *gate);
    }
    c->shared_gate = true;
  }
  for (const auto& item : v->items()) {
    if (item.key() != "d_ff" && item.key() != "gate") {
      return r.Error(item.key().c_str(), "is not a field of a shared expert");
    }
  }
  return absl::OkStatus();
}

// The field of a sigmoid_group_topk config that breaks MoeConfig's rules
// (nullptr: none) and, in *problem, how.
const char* MoeRoutingFault(const MoeConfig& c, std::string* problem) {
  if (c.routing != MoeRouting::kSigmoidGroupTopK) return nullptr;
  if (c.n_group < 1 || c.n_group > 64 || c.n_experts % c.n_group != 0) {
    *problem = absl::StrCat(c.n_group, " must divide n_experts ", c.n_experts,
                            " and be at most 64");
    return "n_group";
  }
  if (c.topk_group < 1 || c.topk_group > c.n_group) {
    *problem = absl::StrCat(c.topk_group,
                            " must be in [1, n_group = ", c.n_group, "]");
    return "topk_group";
  }
  const int64_t reachable = c.topk_group * (c.n_experts / c.n_group);
  if (c.top_k > reachable) {
    *problem = absl::StrCat(c.top_k, " exceeds the ", reachable,
                            " experts of topk_group ", c.topk_group, " groups");
    return "top_k";
  }
  return nullptr;
}

// sigmoid_group_topk's n_group and topk_group; routed_scale and latent of
// any routing.
absl::Status ParseGrouping(ObjectReader& r, MoeConfig* c) {
  const bool group = c->routing == MoeRouting::kSigmoidGroupTopK;
  for (const char* key : {"n_group", "topk_group"}) {
    if (r.Get(key) == nullptr) continue;
    if (!group) {
      return r.Error(key, "applies only to routing \"sigmoid_group_topk\"");
    }
    RETURN_IF_ERROR(
        r.PositiveInt(key, key[0] == 'n' ? &c->n_group : &c->topk_group));
  }
  RETURN_IF_ERROR(
      r.OptionalPositiveNumber("routed_scale", 1.0, &c->routed_scale));
  if (const nlohmann::json* l = r.Get("latent");
      l != nullptr && !l->is_null()) {
    RETURN_IF_ERROR(r.PositiveInt("latent", &c->latent));
  }
  std::string problem;
  if (const char* key = MoeRoutingFault(*c, &problem); key != nullptr) {
    return r.Error(key, problem);
  }
  return absl::OkStatus();
}

absl::Status ParseMoe(ObjectReader& r, std::vector<std::string>* /*warnings*/,
                      std::any* params) {
  MoeConfig c;
  int routing = 0;
  RETURN_IF_ERROR(ParseChoice(
      r, "routing", {"top1_softmax", "relu_dynamic", "sigmoid_group_topk"},
      &routing));
  c.routing = routing == 0   ? MoeRouting::kSoftmaxTopK
              : routing == 1 ? MoeRouting::kReluDynamic
                             : MoeRouting::kSigmoidGroupTopK;
  RETURN_IF_ERROR(r.PositiveInt("n_experts", &c.n_experts));
  if (c.n_experts > kMoeMaxExperts) {
    return r.Invalid("n_experts", absl::StrCat("at most ", kMoeMaxExperts),
                     *r.Get("n_experts"));
  }
  RETURN_IF_ERROR(r.PositiveInt("d_ff", &c.d_ff));
  RETURN_IF_ERROR(ParseActivation(r, &c.act));
  RETURN_IF_ERROR(r.Bool("gated", &c.gated));
  RETURN_IF_ERROR(r.Bool("router_bias", &c.router_bias));
  RETURN_IF_ERROR(r.Bool("expert_bias", &c.expert_bias));
  // Capacity is a training-time device; running dropless under a config that
  // names a capacity would silently change results on long prefills.
  if (const nlohmann::json* cap = r.Get("capacity");
      cap != nullptr && !cap->is_null()) {
    return r.Invalid("capacity", "null (the engine is dropless)", *cap);
  }
  const bool softmax = c.routing != MoeRouting::kReluDynamic;
  constexpr const char* kTopKRoutings =
      "applies only to routing \"top1_softmax\" or \"sigmoid_group_topk\"";
  if (r.Get("top_k") != nullptr) {
    if (!softmax) return r.Error("top_k", kTopKRoutings);
    RETURN_IF_ERROR(r.PositiveInt("top_k", &c.top_k));
    if (c.top_k > c.n_experts) {
      return r.Invalid("top_k",
                       absl::StrCat("at most n_experts = ", c.n_experts),
                       *r.Get("top_k"));
    }
  }
  if (r.Get("renormalize") != nullptr) {
    if (!softmax) return r.Error("renormalize", kTopKRoutings);
    RETURN_IF_ERROR(r.Bool("renormalize", &c.renormalize));
  }
  RETURN_IF_ERROR(ParseGrouping(r, &c));
  RETURN_IF_ERROR(ParseShared(r, &c));
  if (softmax) {
    if (r.Get("router_hidden") != nullptr) {
      return r.Error("router_hidden",
                     "applies only to routing \"relu_dynamic\"");
    }
  } else {
    RETURN_IF_ERROR(r.PositiveInt("router_hidden", &c.router_hidden));
  }
  *params = c;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Layer>> BuildMoe(const BlockConfig& block,
                                                const BlockSite& site) {
  ASSIGN_OR_RETURN(
      std::unique_ptr<MoeLayer> layer,
      MakeMoe(*block.As<MoeConfig>(), block.norm, site.d_model, site.prefix,
              *site.weights, *site.backend, site.residual_scale));
  return std::unique_ptr<Layer>(std::move(layer));
}

}  // namespace

const BlockKind kMoeBlock = {"moe", ParseMoe, BuildMoe,
                             /*residual_scale=*/true};

absl::Status CheckMoeRouting(const MoeConfig& c) {
  std::string problem;
  if (const char* key = MoeRoutingFault(c, &problem); key != nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("moe: ", key, " ", problem));
  }
  return absl::OkStatus();
}

}  // namespace seqboat
