// Multi-token-prediction drafting: Qwen3.5's MTP head, shipped with the
// checkpoint (mtp.safetensors beside the model, config "mtp"), guesses each
// speculating sequence's next tokens from the target's own hidden state.
//
// The math, as vLLM's Qwen3-Next/Qwen3.5 MTP model and its EAGLE-style
// proposer run it (MODELS.md 13.5 names the tensors): for a context position
// i whose next token t_{i+1} is known,
//   x_i = fc([norm_e(embed(t_{i+1})) ; norm_h(h_i)])   (embedding half first)
//   x_i = one full-attention decoder layer (gated attention, then the gated
//         MLP, pre-norm residuals), its rotary position i, its own KV over the
//         MTP rows of positions 0..i
//   g_i = norm(x_i), logits_i = the target's head(g_i): a guess at t_{i+2}
// where h_i is the target's hidden state AFTER its final norm (what its head
// reads), every norm is the (1 + w) RMSNorm of the stored w with the final
// norm's eps, and the embedding and head are the target's. The k-th draft
// (k > 1) runs the same layer again one position on, fed g of the previous
// draft as its hidden and the previous draft as its token.
//
// The head runs on the target's backend with the engine's own attention and
// mlp blocks (built from the target's first attention and mlp block configs,
// the verbatim tensors mapped to theirs at load: q_proj's per-head
// [query; gate] rows split, norms 1 + w), in two slots of its own per
// sequence: one whose KV covers the context, and a spare the drafts past it
// run in (copied from the first before each), so rejected drafts never reach
// the first. The KV is kept current by Observe after every target step that
// read the sequence's context: the target's residual rows of that step are
// still in its buffer then, and each row whose next token is known becomes an
// MTP row (a prefill's rows, a decode's, a round's accepted ones). Drafts
// decide only how much a verification gains: the output is the target's own
// draws either way. A sequence whose context the target read before it had
// slots here (no slot free, or a prefix restored from a snapshot) drafts from
// the rows it saw. Engine thread only.
#ifndef SEQBOAT_ENGINE_SPECULATIVE_MTP_DRAFTER_H_
#define SEQBOAT_ENGINE_SPECULATIVE_MTP_DRAFTER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/node_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/backend/step_rows.h"
#include "engine/layers/layer.h"
#include "engine/layers/pre_norm.h"
#include "engine/model/model.h"
#include "engine/model_dir/model_dir.h"
#include "engine/state/slot_arena.h"

namespace seqboat {

struct MtpDrafterOptions {
  int32_t max_sequences = 8;     // sequences with slots at once
  int32_t max_draft_tokens = 8;  // the longest draft asked for
  int32_t vocab_limit = 0;       // ids a draft may hold (0: the model's)
};

class MtpDrafter {
 public:
  // Whether `dir`'s config.json declares an MTP head ("mtp").
  static absl::StatusOr<bool> HasHead(const ModelDir& dir);
  // The MTP head of `dir` (its config's "mtp" file) for `target`, loaded
  // from `dir`. FAILED_PRECONDITION when the config has no "mtp";
  // INVALID_ARGUMENT naming the tensor or field at fault otherwise.
  static absl::StatusOr<std::unique_ptr<MtpDrafter>> Load(
      const ModelDir& dir, Model& target, const MtpDrafterOptions& options);

  // The rows of the target's last step (Model::Forward) that read context
  // positions pos, pos+1, ... of a sequence, len of them from `row` on, and
  // next[j] the token after position pos + j (known: prompt, output).
  struct Feed {
    const void* key = nullptr;  // the sequence, until Forget(key)
    int32_t row = 0;
    int64_t pos = 0;
    int32_t len = 0;
    std::vector<int32_t> next;
  };
  // Runs the MTP rows of the feeds (positions it has already read are
  // skipped), after the target's step and before its next. Leaves each
  // sequence's first draft for the context it has now read: the guess after
  // position pos + len. A feed whose key has no slots takes two, or is
  // skipped when none are free. On error every feed's state is dropped.
  absl::Status Observe(std::vector<Feed>& feeds);
  // Logits (host, vocab) of the last Observe's j-th fed row group's last row
  // (feeds skipped or empty do not count); for tests.
  const float* observed_logits(int j) const;

  struct Ask {
    const void* key = nullptr;
    int64_t context = 0;         // tokens in the context (prompt + output)
    int32_t max_tokens = 0;      // in [1, max_draft_tokens]
    std::vector<int32_t> draft;  // out: empty when the head is behind
  };
  // Drafts up to max_tokens greedy tokens (ties to the lower id) after each
  // ask's context: the first from Observe, each further one a step of the
  // head in the sequence's spare. Nothing for a sequence whose MTP rows do
  // not reach its context's second-to-last position.
  absl::Status Propose(std::vector<Ask>& asks);
  // The sequence ended: its slots go back.
  void Forget(const void* key);

  int32_t sequences() const { return static_cast<int32_t>(seqs_.size()); }

 private:
  struct Entry {
    int slot = -1;
    int spare = -1;
    int index = -1;      // its row of kept_
    int64_t fed = 0;     // context positions its slot has read
    int32_t first = -1;  // the draft after position fed - 1
  };

  MtpDrafter(Model& target, MtpDrafterOptions options);
  Entry* EntryFor(const void* key);
  // Runs rows_ (n rows) with hidden states in hidden_ and ids rows_.ids:
  // each logit row's normed output into out_, its logits into logits_.
  absl::Status Run();
  int32_t ArgMax(int row) const;
  // dst row `dst_row` of a [*, d] buffer = src row `src_row`.
  void CopyRow(const float* src, int src_row, float* dst, int dst_row);

  Model& target_;
  MtpDrafterOptions options_;
  int d_ = 0;
  int max_rows_ = 0;
  std::unique_ptr<Layer> attention_, mlp_;
  std::unique_ptr<SlotArena> arena_;
  PreNorm embed_norm_, hidden_norm_, out_norm_;
  Matrix fc_embed_, fc_hidden_;  // fc's two [D, D] halves
  // Device: [max_rows_, d] each but kept_ ([max_sequences, d]) and logits.
  DeviceBuffer hidden_, normed_e_, normed_h_, x_, scratch_, gathered_, out_,
      kept_, logits_dev_;
  std::vector<int> free_index_;
  // Nodes: Observe holds entries while it adds others.
  absl::node_hash_map<const void*, Entry> seqs_;
  StepRows rows_;
  std::vector<float> logits_;  // host, [rows_.m(), vocab]
  int observed_ = 0;
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_SPECULATIVE_MTP_DRAFTER_H_
