"""Regenerates this directory: the tiny Qwen3.5 golden checkpoint
(tests/data/hf_golden/qwen3_5) with a random multi-token-prediction head added
under its Hugging Face names (mtp.*, MODELS.md 13.5), converted by
weights/convert.py: the canonical model plus mtp.safetensors, kept verbatim,
for the MTP drafter's tests, and mtp_reference.json: the float64 reference's
MTP logits over a context and its greedy drafts after it
(weights/reference/mtp.py), which engine/speculative/mtp_drafter_test.cc
checks the engine against.

    .venv/bin/python tests/data/tiny_qwen3_5_mtp/make.py
"""

import json
import pathlib
import shutil
import sys
import tempfile

import torch

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(ROOT))

from weights import convert, safetensors_io  # noqa: E402
from weights.reference.model import ReferenceModel  # noqa: E402
from weights.reference.mtp import ReferenceMtp, load_mtp  # noqa: E402

# A context with repeats, so that drafts have something to find.
CONTEXT = list(b"the cat sat on the mat; the cat sat on the")
DRAFTS = 4
GOLDEN = ROOT / "tests" / "data" / "hf_golden" / "qwen3_5" / "hf"


def mtp_tensors(text, gen):
    D, F = text["hidden_size"], text["intermediate_size"]
    H, Hkv, dh = (text["num_attention_heads"], text["num_key_value_heads"],
                  text["head_dim"])

    def mat(rows, cols):
        return torch.randn(rows, cols, generator=gen) / cols ** 0.5

    def norm(n):
        # Stored w, used as 1 + w.
        return 0.1 * torch.randn(n, generator=gen)

    s = "mtp.layers.0."
    return {
        "mtp.fc.weight": mat(D, 2 * D),
        "mtp.pre_fc_norm_embedding.weight": norm(D),
        "mtp.pre_fc_norm_hidden.weight": norm(D),
        "mtp.norm.weight": norm(D),
        s + "input_layernorm.weight": norm(D),
        s + "post_attention_layernorm.weight": norm(D),
        s + "self_attn.q_proj.weight": mat(2 * H * dh, D),
        s + "self_attn.k_proj.weight": mat(Hkv * dh, D),
        s + "self_attn.v_proj.weight": mat(Hkv * dh, D),
        s + "self_attn.o_proj.weight": mat(D, H * dh),
        s + "self_attn.q_norm.weight": norm(dh),
        s + "self_attn.k_norm.weight": norm(dh),
        s + "mlp.gate_proj.weight": mat(F, D),
        s + "mlp.up_proj.weight": mat(F, D),
        s + "mlp.down_proj.weight": mat(D, F),
    }


def main():
    with tempfile.TemporaryDirectory() as tmp:
        src = pathlib.Path(shutil.copytree(GOLDEN, pathlib.Path(tmp) / "hf"))
        cfg = json.loads((src / "config.json").read_text())
        tensors, meta = safetensors_io.load_file(src / "model.safetensors")
        tensors.update(mtp_tensors(cfg["text_config"], torch.Generator().manual_seed(35)))
        safetensors_io.save_file(tensors, src / "model.safetensors", meta)
        out = pathlib.Path(tmp) / "out"
        code = convert.main(["--source", "hf-qwen3_5", str(src), str(out), "--byte-tokenizer",
                             "--sinks", "4", "--window", "252", "--name", "tiny-qwen3_5-mtp"])
        if code:
            sys.exit(code)
        for name in ("config.json", "model.safetensors", "mtp.safetensors", "tokenizer.json"):
            shutil.copyfile(out / name, HERE / name)
    write_reference()



def reference(model_dir):
    """{"context", "logits" (the MTP's over the context, [n-1][V]), "drafts"}."""
    mtp = ReferenceMtp(ReferenceModel.load(model_dir, torch.float64), load_mtp(model_dir))
    logits = mtp.context_logits(CONTEXT)
    return {"context": CONTEXT,
            "logits": [[round(float(x), 7) for x in row] for row in logits],
            "drafts": mtp.drafts(CONTEXT, DRAFTS, vocab_limit=257)}


def write_reference():
    (HERE / "mtp_reference.json").write_text(json.dumps(reference(HERE)) + "\n")


if __name__ == "__main__":
    main()
