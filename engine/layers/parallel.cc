#include "engine/layers/parallel.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/layers/pre_norm.h"

namespace seqboat {
namespace {

class ParallelMamba2Attention final : public Layer {
 public:
  ParallelMamba2Attention(int d_model, std::unique_ptr<Mixer> mamba,
                          std::unique_ptr<Mixer> attention)
      : d_model_(d_model),
        mamba_(std::move(mamba)),
        attention_(std::move(attention)) {}

  PreNorm& norm() { return norm_; }

  std::string kind() const override { return "parallel_mamba2_attention"; }

  int64_t StateBytesPerSlot() const override {
    return MambaRegion() + attention_->StateBytesPerSlot();
  }

  int64_t ScratchFloatsPerRow() const override {
    return d_model_ + std::max(mamba_->ScratchFloatsPerRow(),
                               attention_->ScratchFloatsPerRow());
  }

  void BindState(void* base, int64_t slot_stride) override {
    mamba_->BindState(base, slot_stride);
    attention_->BindState(static_cast<char*>(base) + MambaRegion(),
                          slot_stride);
  }

  absl::Status Forward(const StepContext& ctx, float* residual) override {
    const int n = ctx.n();
    float* u = ctx.scratch;
    StepContext inner = ctx;
    inner.scratch = u + static_cast<int64_t>(n) * d_model_;
    // Both read u, never the residual they add to, so the order of the two
    // adds is the only difference from summing the outputs first. The norm
    // folds into the Mamba-2 mixer's in_proj, which reads the residual
    // before its out_proj adds to it and leaves the normed rows in u.
    GemmNorm fold;
    if (norm_.Folded(u, &fold)) {
      RETURN_IF_ERROR(mamba_->MixNormed(inner, residual, fold, residual));
    } else {
      norm_.Apply(*ctx.backend, residual, n, u);
      RETURN_IF_ERROR(mamba_->Mix(inner, u, residual));
    }
    return attention_->Mix(inner, u, residual);
  }

 private:
  // The attention state starts at the alignment the arena gives a holder
  // (SlotArena's 256 bytes), as it would as a block of its own.
  int64_t MambaRegion() const {
    constexpr int64_t a = 256;
    return (mamba_->StateBytesPerSlot() + a - 1) / a * a;
  }

  const int d_model_;
  PreNorm norm_;
  std::unique_ptr<Mixer> mamba_, attention_;
};

// parent.key must be an object; its fields are parsed by `kind`'s parse.
absl::Status ParseOperator(ObjectReader& parent, const char* key,
                           const BlockKind& kind,
                           std::vector<std::string>* warnings,
                           std::any* params) {
  const nlohmann::json* v = parent.Get(key);
  if (v == nullptr) {
    return parent.Missing(
        key, absl::StrCat("an object of ", AbslView(kind.name), " fields"));
  }
  if (!v->is_object()) {
    return parent.Invalid(
        key, absl::StrCat("an object of ", AbslView(kind.name), " fields"), *v);
  }
  for (const char* own : {"kind", "norm"}) {
    if (v->contains(own)) {
      return parent.Error(
          key, absl::StrCat("must not have a \"", own,
                            "\" (the block's one pre-norm serves both)"));
    }
  }
  ObjectReader r(*v, parent.source(),
                 absl::StrCat(parent.context(), ": ", key));
  RETURN_IF_ERROR(kind.parse(r, warnings, params));
  r.ReportUnknown(warnings);
  return absl::OkStatus();
}

absl::Status ParseParallel(ObjectReader& r, std::vector<std::string>* warnings,
                           std::any* params) {
  std::any mamba, attention;
  RETURN_IF_ERROR(ParseOperator(r, "mamba2", kMamba2Block, warnings, &mamba));
  RETURN_IF_ERROR(
      ParseOperator(r, "attention", kAttentionBlock, warnings, &attention));
  ParallelConfig c;
  c.mamba2 = std::any_cast<Mamba2Config>(mamba);
  c.attention = std::any_cast<AttentionConfig>(attention);
  *params = c;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Layer>> BuildParallel(const BlockConfig& block,
                                                     const BlockSite& site) {
  const ParallelConfig& c = *block.As<ParallelConfig>();
  BlockSite mamba_site = site;
  mamba_site.prefix = site.prefix + "mamba.";
  ASSIGN_OR_RETURN(std::unique_ptr<Mixer> mamba,
                   MakeMamba2Mixer(c.mamba2, mamba_site));
  ASSIGN_OR_RETURN(std::unique_ptr<Mixer> attention,
                   MakeAttentionMixer(c.attention, site));
  auto layer = std::make_unique<ParallelMamba2Attention>(
      site.d_model, std::move(mamba), std::move(attention));
  RETURN_IF_ERROR(layer->norm().Bind(block.norm, site.prefix, site.d_model,
                                     *site.weights, *site.backend));
  return layer;
}

}  // namespace

const BlockKind kParallelMamba2AttentionBlock = {"parallel_mamba2_attention",
                                                 ParseParallel, BuildParallel};

}  // namespace seqboat
