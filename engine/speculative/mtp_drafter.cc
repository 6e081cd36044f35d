#include "engine/speculative/mtp_drafter.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/layers/attention.h"
#include "engine/layers/mlp.h"
#include "engine/model_dir/weight_store.h"
#include "weights/safetensors_writer.h"

namespace seqboat {
namespace {

using json = nlohmann::json;

constexpr char kLayer[] = "mtp.layers.0.";

// The "mtp" object of `dir`'s config.json, or null.
absl::StatusOr<json> MtpField(const ModelDir& dir) {
  json config = json::parse(dir.config_json(), nullptr, false);
  if (config.is_discarded() || !config.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir.FilePath("config.json"), ": not a JSON object"));
  }
  auto it = config.find("mtp");
  if (it == config.end()) return json();
  if (!it->is_object() || !it->contains("file") ||
      !it->at("file").is_string() || !it->contains("layers") ||
      it->at("layers") != json(1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        dir.FilePath("config.json"),
        ": \"mtp\" must be {\"layers\": 1, \"run\": false, \"file\": ...}, "
        "got ",
        it->dump()));
  }
  return *it;
}

// The verbatim tensors (Hugging Face names, stored w of each 1 + w norm) as
// the canonical ones the engine's blocks and this head fetch.
class CanonicalMtp {
 public:
  CanonicalMtp(WeightStore& src, int64_t d) : src_(src), d_(d) {}

  absl::Status Copy(const std::string& from, const std::string& to,
                    std::vector<int64_t> shape, bool one_plus = false) {
    ASSIGN_OR_RETURN(const float* w, src_.F32(from, shape));
    F32Tensor t{shape, std::vector<float>(w, w + NumElements(shape))};
    if (one_plus) {
      for (float& v : t.data) v += 1.0f;
    }
    out_[to] = std::move(t);
    return absl::OkStatus();
  }

  // q_proj [2 H dh, D] holds per head [query (dh) ; gate (dh)] rows.
  absl::Status SplitQuery(const std::string& from, int64_t h, int64_t dh) {
    ASSIGN_OR_RETURN(const float* w, src_.F32(from, {2 * h * dh, d_}));
    F32Tensor q{{h * dh, d_}, {}}, gate{{h * dh, d_}, {}};
    for (int64_t head = 0; head < h; ++head) {
      const float* base = w + head * 2 * dh * d_;
      q.data.insert(q.data.end(), base, base + dh * d_);
      gate.data.insert(gate.data.end(), base + dh * d_, base + 2 * dh * d_);
    }
    out_["blocks.0.attn.q.weight"] = std::move(q);
    out_["blocks.0.attn.gate.weight"] = std::move(gate);
    return absl::OkStatus();
  }

  // fc [D, 2D] acts on [embedding ; hidden]: its column halves.
  absl::Status SplitFc() {
    ASSIGN_OR_RETURN(const float* w, src_.F32("mtp.fc.weight", {d_, 2 * d_}));
    F32Tensor e{{d_, d_}, {}}, h{{d_, d_}, {}};
    for (int64_t r = 0; r < d_; ++r) {
      e.data.insert(e.data.end(), w + r * 2 * d_, w + r * 2 * d_ + d_);
      h.data.insert(h.data.end(), w + r * 2 * d_ + d_, w + (r + 1) * 2 * d_);
    }
    out_["fc_embedding.weight"] = std::move(e);
    out_["fc_hidden.weight"] = std::move(h);
    return absl::OkStatus();
  }

  // The canonical tensors as a store, through an anonymous in-memory file
  // (the blocks fetch from a WeightStore).
  absl::StatusOr<std::unique_ptr<WeightStore>> Store() {
    const int fd = memfd_create("mtp", MFD_CLOEXEC);
    if (fd < 0) return absl::InternalError("memfd_create failed");
    const std::string path = absl::StrCat("/proc/self/fd/", fd);
    absl::Status s = WriteF32Safetensors(path, out_);
    absl::StatusOr<std::unique_ptr<WeightStore>> store =
        s.ok() ? WeightStore::Open(path)
               : absl::StatusOr<std::unique_ptr<WeightStore>>(s);
    close(fd);  // the mapping keeps the memory
    return store;
  }

 private:
  WeightStore& src_;
  int64_t d_;
  std::map<std::string, F32Tensor> out_;
};

// The first block of `kind` in the target's stack.
const BlockConfig* FirstBlock(const ModelConfig& cfg, std::string_view kind) {
  for (const BlockConfig& b : cfg.blocks) {
    if (b.kind->name == kind) return &b;
  }
  return nullptr;
}

}  // namespace

absl::StatusOr<bool> MtpDrafter::HasHead(const ModelDir& dir) {
  ASSIGN_OR_RETURN(json mtp, MtpField(dir));
  return !mtp.is_null();
}

absl::StatusOr<std::unique_ptr<MtpDrafter>> MtpDrafter::Load(
    const ModelDir& dir, Model& target, const MtpDrafterOptions& options) {
  if (options.max_sequences < 1 || options.max_draft_tokens < 1) {
    return absl::InvalidArgumentError(
        "an MTP head needs max_sequences and max_draft_tokens >= 1");
  }
  ASSIGN_OR_RETURN(json mtp, MtpField(dir));
  if (mtp.is_null()) {
    return absl::FailedPreconditionError(absl::StrCat(
        dir.FilePath("config.json"),
        " has no \"mtp\": the model has no multi-token-prediction head"));
  }
  const std::string file = dir.FilePath(mtp.at("file").get<std::string>());
  const ModelConfig& cfg = target.config();
  const BlockConfig* attn_block = FirstBlock(cfg, "attention");
  const BlockConfig* mlp_block = FirstBlock(cfg, "mlp");
  const AttentionConfig* attn =
      attn_block != nullptr ? attn_block->As<AttentionConfig>() : nullptr;
  if (attn == nullptr || mlp_block == nullptr || !attn->out_gate ||
      !attn->qk_norm || attn->qkv_bias || attn->o_bias ||
      !cfg.final_norm.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        file,
        ": an MTP head runs as the model's gated attention block (no "
        "biases) and mlp block after its final norm; ",
        dir.FilePath("config.json"), " has no such blocks"));
  }
  const MlpConfig& mlp_cfg = *mlp_block->As<MlpConfig>();
  ASSIGN_OR_RETURN(std::unique_ptr<WeightStore> src, WeightStore::Open(file));
  const int64_t d = cfg.d_model, h = attn->n_heads, hkv = attn->n_kv_heads,
                dh = attn->head_dim, f = mlp_cfg.d_ff;
  if (src->Has(absl::StrCat(kLayer, "mlp.gate.weight"))) {
    return absl::InvalidArgumentError(absl::StrCat(
        file,
        ": the MTP layer's feed-forward has experts; only a dense MLP "
        "head is supported"));
  }
  CanonicalMtp c(*src, d);
  const std::string l = kLayer;
  RETURN_IF_ERROR(c.SplitFc());
  RETURN_IF_ERROR(c.Copy("mtp.pre_fc_norm_embedding.weight",
                         "embedding_norm.weight", {d}, true));
  RETURN_IF_ERROR(
      c.Copy("mtp.pre_fc_norm_hidden.weight", "hidden_norm.weight", {d}, true));
  RETURN_IF_ERROR(c.Copy("mtp.norm.weight", "out_norm.weight", {d}, true));
  RETURN_IF_ERROR(
      c.Copy(l + "input_layernorm.weight", "blocks.0.norm.weight", {d}, true));
  RETURN_IF_ERROR(c.SplitQuery(l + "self_attn.q_proj.weight", h, dh));
  RETURN_IF_ERROR(c.Copy(l + "self_attn.k_proj.weight",
                         "blocks.0.attn.k.weight", {hkv * dh, d}));
  RETURN_IF_ERROR(c.Copy(l + "self_attn.v_proj.weight",
                         "blocks.0.attn.v.weight", {hkv * dh, d}));
  RETURN_IF_ERROR(c.Copy(l + "self_attn.o_proj.weight",
                         "blocks.0.attn.o.weight", {d, h * dh}));
  RETURN_IF_ERROR(c.Copy(l + "self_attn.q_norm.weight",
                         "blocks.0.attn.q_norm.weight", {dh}, true));
  RETURN_IF_ERROR(c.Copy(l + "self_attn.k_norm.weight",
                         "blocks.0.attn.k_norm.weight", {dh}, true));
  RETURN_IF_ERROR(c.Copy(l + "post_attention_layernorm.weight",
                         "blocks.1.norm.weight", {d}, true));
  for (const char* n : {"gate", "up", "down"}) {
    const std::vector<int64_t> shape = std::string(n) == "down"
                                           ? std::vector<int64_t>{d, f}
                                           : std::vector<int64_t>{f, d};
    RETURN_IF_ERROR(c.Copy(absl::StrCat(l, "mlp.", n, "_proj.weight"),
                           absl::StrCat("blocks.1.mlp.", n, ".weight"), shape));
  }
  if (absl::Status used = src->CheckAllUsed(); !used.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": ", used.message()));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<WeightStore> ws, c.Store());

  Backend& be = target.backend();
  std::unique_ptr<MtpDrafter> m(new MtpDrafter(target, options));
  m->d_ = static_cast<int>(d);
  BlockSite site;
  site.d_model = static_cast<int>(d);
  site.weights = ws.get();
  site.backend = &be;
  site.where = absl::StrCat(file, " (attention)");
  site.prefix = "blocks.0.";
  ASSIGN_OR_RETURN(m->attention_, attn_block->kind->build(*attn_block, site));
  site.where = absl::StrCat(file, " (mlp)");
  site.prefix = "blocks.1.";
  ASSIGN_OR_RETURN(m->mlp_, mlp_block->kind->build(*mlp_block, site));
  const std::optional<NormConfig>& norm = cfg.final_norm;
  RETURN_IF_ERROR(m->embed_norm_.Bind(norm, "embedding_", m->d_, *ws, be));
  RETURN_IF_ERROR(m->hidden_norm_.Bind(norm, "hidden_", m->d_, *ws, be));
  RETURN_IF_ERROR(m->out_norm_.Bind(norm, "out_", m->d_, *ws, be));
  for (const char* half : {"embedding", "hidden"}) {
    const std::string name = absl::StrCat("fc_", half, ".weight");
    ASSIGN_OR_RETURN(const float* w, ws->F32(name, {d, d}));
    ASSIGN_OR_RETURN(Matrix up, be.UploadMatrix(w, d, d));
    (std::string(half) == "embedding" ? m->fc_embed_ : m->fc_hidden_) = up;
  }
  RETURN_IF_ERROR(ws->CheckAllUsed());

  ASSIGN_OR_RETURN(m->arena_,
                   SlotArena::Create(be, 2 * options.max_sequences,
                                     {m->attention_.get(), m->mlp_.get()}));
  // Observe reads at most a target step's rows; Propose one per sequence.
  m->max_rows_ =
      std::max(target.limits().max_rows_per_step, options.max_sequences);
  const int64_t rows = m->max_rows_, seqs = options.max_sequences;
  const int64_t scratch = std::max(m->attention_->ScratchFloatsPerRow(),
                                   m->mlp_->ScratchFloatsPerRow());
  const int64_t v = target.vocab_size();
  for (auto [buf, floats] :
       std::initializer_list<std::pair<DeviceBuffer*, int64_t>>{
           {&m->hidden_, rows * d},
           {&m->normed_e_, rows * d},
           {&m->normed_h_, rows * d},
           {&m->x_, rows * d},
           {&m->scratch_, rows * scratch},
           {&m->gathered_, rows * d},
           {&m->out_, rows * d},
           {&m->kept_, seqs * d},
           {&m->logits_dev_, rows * v}}) {
    ASSIGN_OR_RETURN(*buf, be.Alloc(static_cast<size_t>(floats) * 4));
  }
  for (int i = options.max_sequences - 1; i >= 0; --i)
    m->free_index_.push_back(i);
  return m;
}

MtpDrafter::MtpDrafter(Model& target, MtpDrafterOptions options)
    : target_(target), options_(options) {
  if (options_.vocab_limit <= 0 || options_.vocab_limit > target.vocab_size())
    options_.vocab_limit = target.vocab_size();
}

MtpDrafter::Entry* MtpDrafter::EntryFor(const void* key) {
  auto it = seqs_.find(key);
  if (it != seqs_.end()) return &it->second;
  if (arena_->free_slots() < 2 || free_index_.empty()) return nullptr;
  Entry e;
  e.slot = *arena_->Acquire();
  e.spare = *arena_->Acquire();
  e.index = free_index_.back();
  free_index_.pop_back();
  return &seqs_.emplace(key, e).first->second;
}

void MtpDrafter::Forget(const void* key) {
  auto it = seqs_.find(key);
  if (it == seqs_.end()) return;
  arena_->Release(it->second.slot);
  arena_->Release(it->second.spare);
  free_index_.push_back(it->second.index);
  seqs_.erase(it);
}

int32_t MtpDrafter::ArgMax(int row) const {
  const float* l = logits_.data() + int64_t{row} * target_.vocab_size();
  return static_cast<int32_t>(std::max_element(l, l + options_.vocab_limit) -
                              l);
}

const float* MtpDrafter::observed_logits(int j) const {
  if (j < 0 || j >= observed_) return nullptr;
  return logits_.data() + int64_t{j} * target_.vocab_size();
}

void MtpDrafter::CopyRow(const float* src, int src_row, float* dst,
                         int dst_row) {
  GatherRowsParams g;
  g.x = src;
  g.d = d_;
  g.rows = &src_row;
  g.m = 1;
  g.out = dst + int64_t{dst_row} * d_;
  target_.backend().GatherRows(g);
}

absl::Status MtpDrafter::Run() {
  Backend& be = target_.backend();
  const int n = rows_.n(), m = rows_.m();
  auto f = [](DeviceBuffer& b) { return static_cast<float*>(b.get()); };
  EmbedParams embed;
  embed.ids = rows_.ids.data();
  embed.n = n;
  embed.table = target_.embed();
  embed.scale = static_cast<float>(target_.config().embed.scale);
  embed.out = f(x_);
  be.Embed(embed);
  embed_norm_.Apply(be, f(x_), n, f(normed_e_));
  hidden_norm_.Apply(be, f(hidden_), n, f(normed_h_));
  be.Gemm(Projection(f(normed_e_), n, fc_embed_, nullptr, f(x_)));
  GemmParams second = Projection(f(normed_h_), n, fc_hidden_, nullptr, f(x_));
  second.accumulate = true;
  be.Gemm(second);
  const StepContext ctx{&be, &rows_, f(scratch_)};
  RETURN_IF_ERROR(attention_->Forward(ctx, f(x_)));
  RETURN_IF_ERROR(mlp_->Forward(ctx, f(x_)));
  GatherRowsParams gather;
  gather.x = f(x_);
  gather.d = d_;
  gather.rows = rows_.logit_rows.data();
  gather.m = m;
  gather.out = f(gathered_);
  be.GatherRows(gather);
  out_norm_.Apply(be, f(gathered_), m, f(out_));
  be.Gemm(Projection(f(out_), m, target_.head(), nullptr, f(logits_dev_)));
  const int64_t v = target_.vocab_size();
  logits_.resize(static_cast<size_t>(m) * v);
  be.CopyToHost(logits_.data(), logits_dev_.get(),
                logits_.size() * sizeof(float));
  RETURN_IF_ERROR(be.TakeError());
  const float scale = static_cast<float>(target_.config().logit_scale);
  if (scale != 1.0f) {
    for (float& l : logits_) l *= scale;
  }
  return absl::OkStatus();
}

absl::Status MtpDrafter::Observe(std::vector<Feed>& feeds) {
  rows_.clear();
  observed_ = 0;
  std::vector<int32_t> target_rows;
  std::vector<Entry*> fed;
  for (Feed& feed : feeds) {
    Entry* e = EntryFor(feed.key);
    if (e == nullptr) continue;
    // Rows the slot has read already (a round's accepted tokens fed again).
    const int64_t skip = std::clamp<int64_t>(e->fed - feed.pos, 0, feed.len);
    const int32_t len = feed.len - static_cast<int32_t>(skip);
    if (len <= 0 || rows_.n() + len > max_rows_) continue;
    rows_.segs.push_back({e->slot, rows_.n(), len});
    for (int32_t j = static_cast<int32_t>(skip); j < feed.len; ++j) {
      target_rows.push_back(feed.row + j);
      rows_.ids.push_back(feed.next[j]);
    }
    rows_.logit_rows.push_back(rows_.n() - 1);
    e->fed = feed.pos + feed.len;
    e->first = -1;
    fed.push_back(e);
  }
  if (rows_.n() == 0) return absl::OkStatus();
  Backend& be = target_.backend();
  GatherRowsParams gather;
  gather.x = target_.step_residual();
  gather.d = d_;
  gather.rows = target_rows.data();
  gather.m = rows_.n();
  gather.out = static_cast<float*>(gathered_.get());
  be.GatherRows(gather);
  target_.final_norm().Apply(be, static_cast<float*>(gathered_.get()),
                             rows_.n(), static_cast<float*>(hidden_.get()));
  if (absl::Status s = Run(); !s.ok()) {
    for (const Feed& feed : feeds) Forget(feed.key);
    return s;
  }
  observed_ = static_cast<int>(fed.size());
  for (size_t j = 0; j < fed.size(); ++j) {
    fed[j]->first = ArgMax(static_cast<int>(j));
    CopyRow(static_cast<float*>(out_.get()), static_cast<int>(j),
            static_cast<float*>(kept_.get()), fed[j]->index);
  }
  return absl::OkStatus();
}

absl::Status MtpDrafter::Propose(std::vector<Ask>& asks) {
  struct Live {
    Ask* ask;
    Entry* e;
  };
  std::vector<Live> live;
  for (Ask& ask : asks) {
    ask.draft.clear();
    auto it = seqs_.find(ask.key);
    if (it == seqs_.end() || ask.max_tokens < 1) continue;
    Entry& e = it->second;
    if (e.first < 0 || e.fed != ask.context - 1) continue;
    ask.draft.push_back(e.first);
    if (ask.max_tokens > 1) live.push_back({&ask, &e});
  }
  float* hidden = static_cast<float*>(hidden_.get());
  // The first step's hidden rows are the kept ones; later, the last step's.
  for (size_t j = 0; j < live.size(); ++j) {
    arena_->CopySlot(live[j].e->spare, live[j].e->slot);
    CopyRow(static_cast<float*>(kept_.get()), live[j].e->index, hidden,
            static_cast<int>(j));
  }
  absl::Status s;
  while (s.ok() && !live.empty()) {
    rows_.clear();
    for (const Live& l : live) {
      rows_.segs.push_back({l.e->spare, rows_.n(), 1});
      rows_.logit_rows.push_back(rows_.n());
      rows_.ids.push_back(l.ask->draft.back());
    }
    s = Run();
    if (!s.ok()) break;
    std::vector<Live> going;
    for (size_t j = 0; j < live.size(); ++j) {
      Ask& ask = *live[j].ask;
      ask.draft.push_back(ArgMax(static_cast<int>(j)));
      if (static_cast<int32_t>(ask.draft.size()) >= ask.max_tokens) continue;
      CopyRow(static_cast<float*>(out_.get()), static_cast<int>(j), hidden,
              static_cast<int>(going.size()));
      going.push_back(live[j]);
    }
    live = std::move(going);
  }
  if (!s.ok()) {
    for (Ask& ask : asks) {
      ask.draft.clear();
      Forget(ask.key);
    }
  }
  return s;
}

}  // namespace seqboat
