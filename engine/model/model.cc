#include "engine/model/model.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/backend/decode_buckets.h"

namespace seqboat {
namespace {

absl::StatusOr<std::unique_ptr<Layer>> MakeBlock(const ModelConfig& cfg, int i,
                                                 WeightStore& weights,
                                                 Backend& backend) {
  const BlockConfig& block = cfg.blocks[i];
  BlockSite site;
  site.where =
      absl::StrCat("blocks[", i, "] (", std::string(block.kind->name), ")");
  site.prefix = absl::StrCat("blocks.", i, ".");
  site.d_model = static_cast<int>(cfg.d_model);
  site.weights = &weights;
  site.backend = &backend;
  site.residual_scale = static_cast<float>(block.residual_scale);
  return block.kind->build(block, site);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> Model::Load(const std::string& dir,
                                                   Backend& backend,
                                                   const ModelLimits& limits) {
  ASSIGN_OR_RETURN(std::unique_ptr<ModelDir> opened, ModelDir::Open(dir));
  return Load(*opened, backend, limits);
}

absl::StatusOr<std::unique_ptr<Model>> Model::Load(ModelDir& dir,
                                                   Backend& backend,
                                                   const ModelLimits& limits) {
  if (limits.max_slots <= 0 || limits.max_rows_per_step <= 0) {
    return absl::InvalidArgumentError("model limits must be positive");
  }
  auto config =
      ParseModelConfig(dir.config_json(), dir.FilePath("config.json"));
  if (!config.ok()) return config.status();
  ASSIGN_OR_RETURN(WeightStore * store, dir.weights());

  std::unique_ptr<Model> model(new Model());
  model->config_ = *std::move(config);
  model->limits_ = limits;
  if (model->limits_.max_logit_rows <= 0)
    model->limits_.max_logit_rows = limits.max_slots;
  const int64_t logit_rows = model->limits_.max_logit_rows;
  model->backend_ = &backend;
  const ModelConfig& cfg = model->config_;
  WeightStore& ws = *store;
  const int64_t d = cfg.d_model, v = cfg.vocab_size;

  auto embed = ws.F32("embed.weight", {v, d});
  if (!embed.ok()) return embed.status();
  auto embed_dev = backend.UploadMatrix(*embed, v, d);
  if (!embed_dev.ok()) return embed_dev.status();
  model->embed_ = *embed_dev;
  // The final norm binds as a block's pre-norm does: rmsnorm, layernorm with
  // or without affine (SeqBoat's enwik8 LM), scalenorm (SeqBoat pre-norm
  // stacks) or none (post-norm stacks).
  RETURN_IF_ERROR(model->final_norm_.Bind(cfg.final_norm, "final_",
                                          static_cast<int>(d), ws, backend));
  if (cfg.tie_embeddings) {
    model->head_ = model->embed_;
  } else {
    auto head_host = ws.F32("lm_head.weight", {v, d});
    if (!head_host.ok()) return head_host.status();
    auto head = backend.UploadMatrix(*head_host, v, d);
    if (!head.ok()) return head.status();
    model->head_ = *head;
  }

  for (int i = 0; i < static_cast<int>(cfg.blocks.size()); ++i) {
    auto layer = MakeBlock(cfg, i, ws, backend);
    if (!layer.ok()) return layer.status();
    model->layers_.push_back(*std::move(layer));
  }
  RETURN_IF_ERROR(ws.CheckAllUsed());
  // Backends copy what they upload: the file's mapping and its fp32
  // conversions go now.
  dir.CloseWeights();

  std::vector<SlotState*> raw;
  int64_t scratch_per_row = 0;
  for (auto& l : model->layers_) {
    raw.push_back(l.get());
    scratch_per_row = std::max(scratch_per_row, l->ScratchFloatsPerRow());
  }
  auto arena = SlotArena::Create(backend, limits.max_slots, raw);
  if (!arena.ok()) return arena.status();
  model->arena_ = *std::move(arena);

  const int64_t rows = limits.max_rows_per_step;
  auto alloc = [&](int64_t floats, DeviceBuffer* out) -> absl::Status {
    auto buf = backend.Alloc(static_cast<size_t>(floats) * sizeof(float));
    if (!buf.ok()) return buf.status();
    *out = *buf;
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(alloc(rows * d, &model->residual_));
  RETURN_IF_ERROR(alloc(rows * scratch_per_row, &model->scratch_));
  RETURN_IF_ERROR(alloc(logit_rows * d, &model->gathered_));
  RETURN_IF_ERROR(alloc(logit_rows * d, &model->normed_));
  RETURN_IF_ERROR(alloc(logit_rows * v, &model->logits_));

  // Every block's decode call stays on the device (no read-back mid-step),
  // so any stack's decode steps can be recorded and replayed.
  model->capture_base_ = backend.NewCaptureScope();
  model->buckets_ = limits.decode_buckets.has_value()
                        ? *limits.decode_buckets
                        : backend.CaptureBuckets(limits.max_slots);
  for (size_t i = 0; i < model->buckets_.size(); ++i) {
    const int b = model->buckets_[i];
    if (b <= 0 || b > limits.max_slots || b > limits.max_rows_per_step ||
        (i > 0 && b <= model->buckets_[i - 1])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "decode buckets must ascend within [1, max_slots]; got ", b));
    }
  }
  if (!model->buckets_.empty()) {
    model->split_rows_ = limits.mixed_step_graph_rows.has_value()
                             ? *limits.mixed_step_graph_rows
                             : backend.MixedStepGraphRows();
    if (model->split_rows_ < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "mixed_step_graph_rows must be >= 0; got ", model->split_rows_));
    }
  }
  if (model->split_rows_ > 0) {
    RETURN_IF_ERROR(
        alloc((model->buckets_.back() + rows) * d, &model->split_residual_));
  }
  return model;
}

absl::Status Model::Run(const StepRows& rows, float* head_out) {
  const int n = rows.n(), m = rows.m();
  if (n > limits_.max_rows_per_step || m > limits_.max_logit_rows || n <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("step of ", n, " rows and ", m,
                     " logit rows exceeds the model's limits"));
  }
  const int bucket = DecodeBucket(rows);
  if (bucket == 0) {
    if (split_rows_ > 0 && PlanStepSplit(rows, buckets_, split_rows_, split_)) {
      return RunSplit(rows, head_out);
    }
    return Step(rows, head_out);
  }
  // Padded rows are zero-length segments on slot 0: every recurrent op
  // skips them, so they read and write no state.
  padded_.ids.assign(rows.ids.begin(), rows.ids.end());
  padded_.ids.resize(bucket, 0);
  padded_.segs.assign(rows.segs.begin(), rows.segs.end());
  padded_.logit_rows.assign(rows.logit_rows.begin(), rows.logit_rows.end());
  padded_.fed_rows.assign(rows.fed_rows.begin(), rows.fed_rows.end());
  padded_.fed_from.assign(rows.fed_from.begin(), rows.fed_from.end());
  for (int i = n; i < bucket; ++i) {
    padded_.segs.push_back({0, i, 0});
    padded_.logit_rows.push_back(i);
  }
  return backend_->RunCaptured(capture_base_ + bucket,
                               [&] { return Step(padded_); });
}

absl::Status Model::Forward(const StepRows& rows, float* logits) {
  const int m = rows.m();
  // Host memory backends write the head's rows where the caller wants them:
  // at batch 128 with a 50k vocabulary that saves a 26 MB copy a step. (A
  // padded step writes more rows than the caller has: it never goes there.)
  float* direct =
      backend_->MemoryIsHost() && buckets_.empty() ? logits : nullptr;
  absl::Status s = Run(rows, direct);
  if (s.ok() && m > 0 && direct == nullptr) {
    backend_->CopyToHost(
        logits, logits_.get(),
        static_cast<size_t>(m) * config_.vocab_size * sizeof(float));
  }
  if (absl::Status e = backend_->TakeError(); s.ok() && !e.ok()) s = e;
  if (!s.ok() || m == 0) return s;
  const int64_t v = config_.vocab_size;
  if (config_.logit_scale != 1.0) {
    const float scale = static_cast<float>(config_.logit_scale);
    for (int64_t i = 0; i < static_cast<int64_t>(m) * v; ++i)
      logits[i] *= scale;
  }
  return absl::OkStatus();
}

absl::Status Model::ForwardSample(const StepRows& rows,
                                  const SampleRow* sample_rows,
                                  const int32_t* seen_ids, int32_t* tokens,
                                  const SampleMasks& masks,
                                  const PenaltyTableUpdate& table) {
  absl::Status s = Run(rows);
  if (masks.fill) masks.fill();  // even after a failure: the filler joins
  if (s.ok() && rows.m() > 0) {
    // Forward scales the host copy by logit_scale; here the op does.
    SampleRowsParams p;
    p.logits = static_cast<const float*>(logits_.get());
    p.m = rows.m();
    p.vocab = static_cast<int>(config_.vocab_size);
    p.logit_scale = static_cast<float>(config_.logit_scale);
    p.rows = sample_rows;
    p.seen_ids = seen_ids;
    p.table = table;
    p.tokens = tokens;
    p.masks = masks.words;
    p.mask_words = masks.words_per_row;
    s = backend_->SampleRows(p);
  }
  if (absl::Status e = backend_->TakeError(); s.ok() && !e.ok()) s = e;
  return s;
}

absl::Status Model::LaunchStep(const StepRows& rows,
                               const SampleRow* sample_rows,
                               const int32_t* seen_ids, int32_t* tokens,
                               const PenaltyTableUpdate& table) {
  absl::Status s = Run(rows);
  if (s.ok()) {
    SampleRowsParams p;
    p.logits = static_cast<const float*>(logits_.get());
    p.m = rows.m();
    p.vocab = static_cast<int>(config_.vocab_size);
    p.logit_scale = static_cast<float>(config_.logit_scale);
    p.rows = sample_rows;
    p.seen_ids = seen_ids;
    p.table = table;
    p.pending_tokens = backend_->SampledTokens();
    p.tokens = tokens;
    s = backend_->LaunchSampleRows(p);
  }
  if (absl::Status e = backend_->TakeError(); s.ok() && !e.ok()) s = e;
  return s;
}

absl::Status Model::WaitStep() {
  absl::Status s = backend_->WaitSampledTokens();
  if (absl::Status e = backend_->TakeError(); s.ok() && !e.ok()) s = e;
  return s;
}

int Model::DecodeBucket(const StepRows& rows) const {
  const int n = rows.n();
  if (buckets_.empty() || rows.nsegs() != n || rows.m() != n) return 0;
  for (int i = 0; i < n; ++i) {
    if (rows.segs[i].len != 1 || rows.segs[i].start != i ||
        rows.logit_rows[i] != i) {
      return 0;
    }
  }
  return PickDecodeBucket(buckets_, n);
}

absl::Status Model::RunSplit(const StepRows& rows, float* head_out) {
  // Both passes read the weights, where one pass would read them once; in
  // exchange the one-row segments keep their recording (no launches of
  // their own, the decode kernels) and the host enqueues the eager pass
  // while the device replays it.
  const int64_t d = config_.d_model;
  auto* base = static_cast<float*>(split_residual_.get());
  RETURN_IF_ERROR(
      backend_->RunCaptured(capture_base_ + SplitPassKey(split_.bucket),
                            [&] { return Blocks(split_.decode, base); }));
  if (split_.rest.n() > 0) {
    RETURN_IF_ERROR(Blocks(split_.rest, base + split_.bucket * d));
  }
  // residual_ in step order, as a one-pass step leaves it (step_residual).
  GatherRowsParams gather;
  gather.x = base;
  gather.d = static_cast<int>(d);
  gather.rows = split_.order.data();
  gather.m = rows.n();
  gather.out = static_cast<float*>(residual_.get());
  backend_->GatherRows(gather);
  return Head(rows, head_out);
}

absl::Status Model::Step(const StepRows& rows, float* head_out) {
  RETURN_IF_ERROR(Blocks(rows, static_cast<float*>(residual_.get())));
  return Head(rows, head_out);
}

absl::Status Model::Blocks(const StepRows& rows, float* r) {
  Backend& be = *backend_;
  const int n = rows.n();
  EmbedParams embed;
  embed.ids = rows.ids.data();
  embed.n = n;
  embed.table = embed_;
  embed.scale = static_cast<float>(config_.embed.scale);
  embed.out = r;
  embed.fed_tokens = backend_->SampledTokens();
  embed.fed_rows = rows.fed_rows.data();
  embed.fed_from = rows.fed_from.data();
  embed.nfed = static_cast<int>(rows.fed_rows.size());
  be.Embed(embed);
  const StepContext ctx{&be, &rows, static_cast<float*>(scratch_.get())};
  for (auto& layer : layers_) {
    RETURN_IF_ERROR(layer->Forward(ctx, r));
  }
  return absl::OkStatus();
}

absl::Status Model::Head(const StepRows& rows, float* head_out) {
  Backend& be = *backend_;
  const int m = rows.m();
  if (m == 0) return absl::OkStatus();
  const int d = static_cast<int>(config_.d_model);
  auto* r = static_cast<float*>(residual_.get());
  auto* g = static_cast<float*>(gathered_.get());
  auto* u = static_cast<float*>(normed_.get());
  GatherRowsParams gather;
  gather.x = r;
  gather.d = d;
  gather.rows = rows.logit_rows.data();
  gather.m = m;
  gather.out = g;
  be.GatherRows(gather);
  const float* h = g;
  if (config_.final_norm.has_value()) {
    final_norm_.Apply(be, g, m, u);
    h = u;
  }
  be.Gemm(Projection(
      h, m, head_, nullptr,
      head_out != nullptr ? head_out : static_cast<float*>(logits_.get())));
  return absl::OkStatus();
}

}  // namespace seqboat
