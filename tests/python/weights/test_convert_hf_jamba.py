"""`--source hf-jamba`: HF Jamba checkpoints -> canonical mamba1 / attention + mlp / moe blocks.

The converted directory, run by the float64 reference with a cache that never
evicts, must give transformers' own float64 forward; every bad input is an
error that names its culprit, exits 1 and leaves no output behind.
"""

import json
import types

import pytest
import torch

from weights import canonical, safetensors_io
from weights.reference.model import ReferenceModel

import hf_layouts
from convert_cli import assert_clean_failure, edit_config, edit_tensors, run, run_process

transformers = pytest.importorskip("transformers", reason="installed by deploy/setup.sh")
from transformers import JambaConfig, JambaForCausalLM  # noqa: E402

if not hasattr(torch, "_dynamo"):
    torch._dynamo = types.SimpleNamespace(mark_static_address=lambda tensor: None)

TOKENS = [256, 84, 104, 101, 32, 113, 117, 105, 99, 107, 10, 0, 255, 200, 7, 256, 65, 66, 67,
          68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78]
# Layers 0..5: mamba+mlp, attention+moe, mamba+mlp, mamba+moe, attention+mlp, mamba+moe.
KINDS = ["mamba1", "mlp", "attention", "moe", "mamba1", "mlp",
         "mamba1", "moe", "attention", "mlp", "mamba1", "moe"]


def make_model(seed=0, tied=False, proj_bias=False, **over):
    torch.manual_seed(seed)
    kw = dict(vocab_size=257, hidden_size=32, intermediate_size=40, num_hidden_layers=6,
              num_attention_heads=4, num_key_value_heads=2, num_experts=4,
              num_experts_per_tok=2, expert_layer_period=2, expert_layer_offset=1,
              attn_layer_period=3, attn_layer_offset=1, mamba_d_state=8, mamba_d_conv=4,
              mamba_expand=2, mamba_dt_rank="auto", mamba_conv_bias=True,
              mamba_proj_bias=proj_bias, rms_norm_eps=1e-5, tie_word_embeddings=tied,
              use_mamba_kernels=False, initializer_range=0.15, pad_token_id=None,
              bos_token_id=None, eos_token_id=256)
    kw.update(over)
    model = JambaForCausalLM(JambaConfig(**kw)).eval()
    model.config._attn_implementation = "eager"
    with torch.no_grad():
        for name, p in model.named_parameters():
            # Norms start at 1, D at 1, biases at 0: move them so that a converter
            # that dropped or swapped one would show.
            if name.endswith(("norm.weight", "mamba.D", ".bias")):
                p.add_(0.2 * torch.randn_like(p))
            if name.endswith("router.weight"):
                p.mul_(10.0)   # decisive routing: no near-ties between expert choices
    return model


def hf_float64_logits(model, tokens):
    """transformers' forward in float64. Its Mamba mixer still rounds A, B and the
    scan input to fp32 and its router softmax runs in fp32 (~1e-6 on the
    logits); hence the 1e-5 tolerance below."""
    with torch.no_grad():
        return model.double()(torch.tensor([tokens])).logits[0]


@pytest.mark.parametrize("tied,proj_bias", [(False, False), (True, True)])
def test_converted_model_matches_transformers(tmp_path, capsys, tied, proj_bias):
    model = make_model(seed=1, tied=tied, proj_bias=proj_bias)
    src = hf_layouts.save(model, tmp_path / "hf")
    out = tmp_path / "out"
    code, err = run(["--source", "hf-jamba", str(src), str(out), "--byte-tokenizer",
                     "--sinks", "2", "--window", "40"], capsys)
    assert code == 0, err
    ref = ReferenceModel.load(out, torch.float64).forward(TOKENS)
    want = hf_float64_logits(model, TOKENS)
    assert ref.std() > 0.5
    assert torch.allclose(ref, want, rtol=0, atol=1e-5), (ref - want).abs().max()

    conf = json.loads((out / "config.json").read_text())
    assert [b["kind"] for b in conf["blocks"]] == KINDS
    norm = {"type": "rmsnorm", "eps": 1e-5}
    m, a, e = conf["blocks"][0], conf["blocks"][2], conf["blocks"][3]
    assert m["norm"] == m["dt_bc_norm"] == a["norm"] == e["norm"] == norm
    assert (m["d_inner"], m["d_state"], m["d_conv"], m["dt_rank"]) == (64, 8, 4, 2)
    assert m["in_proj_bias"] == m["out_proj_bias"] == proj_bias and m["conv_bias"]
    assert (a["n_heads"], a["n_kv_heads"], a["head_dim"], a["pos"]) == (4, 2, 8, "none")
    assert (a["sinks"], a["window"]) == (2, 40)
    assert (e["routing"], e["n_experts"], e["top_k"], e["renormalize"]) == \
        ("top1_softmax", 4, 2, False)
    assert e["gated"] and e["act"] == "silu" and e["d_ff"] == 40
    assert conf["tie_embeddings"] == tied and conf["eos_token_id"] == 256
    assert conf["final_norm"] == dict(norm, affine=True)

    t, meta = safetensors_io.load_file(out / "model.safetensors")
    assert ("lm_head.weight" in t) == (not tied)
    assert meta["converter"].endswith("/hf-jamba")
    sd = model.state_dict()
    assert torch.equal(t["blocks.7.moe.gate.weight"][3].double(),
                       sd["model.layers.3.feed_forward.experts.3.gate_proj.weight"])
    assert torch.equal(t["blocks.6.c_norm.weight"].double(),
                       sd["model.layers.3.mamba.c_layernorm.weight"])
    assert torch.equal(t["blocks.9.norm.weight"].double(),
                       sd["model.layers.4.pre_ff_layernorm.weight"])


def test_default_cache_size_and_tokenizer_copy(tmp_path, capsys):
    src = hf_layouts.save(make_model(), tmp_path / "hf")
    tok = {"version": "1.0", "model": {"type": "Bytes"}, "added_tokens": []}
    (src / "tokenizer.json").write_text(json.dumps(tok))
    out = tmp_path / "out"
    code, err = run(["--source", "hf-jamba", str(src), str(out)], capsys)
    assert code == 0, err
    conf = json.loads((out / "config.json").read_text())
    assert (conf["blocks"][2]["sinks"], conf["blocks"][2]["window"]) == (4, 4092)
    assert json.loads((out / "tokenizer.json").read_text()) == tok

    # A shorter trained context shortens the default window: S + W + 1 keys <= 256.
    small = hf_layouts.save(make_model(max_position_embeddings=256), tmp_path / "hf_small")
    out2 = tmp_path / "out2"
    assert run(["--source", "hf-jamba", str(small), str(out2), "--byte-tokenizer"],
               capsys)[0] == 0
    b = json.loads((out2 / "config.json").read_text())["blocks"][2]
    assert (b["sinks"], b["window"]) == (4, 251)


def test_one_expert_means_mlp_blocks_only(tmp_path, capsys):
    model = make_model(seed=3, num_experts=1, attn_layer_period=2, attn_layer_offset=0,
                       num_hidden_layers=2)
    src = hf_layouts.save(model, tmp_path / "hf")
    out = tmp_path / "out"
    code, err = run(["--source", "hf-jamba", str(src), str(out), "--byte-tokenizer"], capsys)
    assert code == 0, err
    conf = json.loads((out / "config.json").read_text())
    assert [b["kind"] for b in conf["blocks"]] == ["attention", "mlp", "mamba1", "mlp"]
    ref = ReferenceModel.load(out, torch.float64).forward(TOKENS)
    assert torch.allclose(ref, hf_float64_logits(model, TOKENS), rtol=0, atol=1e-5)


@pytest.mark.parametrize("layout", sorted(hf_layouts.LAYOUTS))
def test_every_save_pretrained_layout_converts_alike(tmp_path, layout):
    hf_layouts.assert_layout_converts_alike(make_model(seed=4), tmp_path, "hf-jamba", layout)


def test_truncated_pytorch_bin(tmp_path):
    hf_layouts.assert_truncated_bin_fails(make_model(), tmp_path, "hf-jamba")


def test_dtype_option_and_cli_exit_status(tmp_path):
    src = hf_layouts.save(make_model(seed=5), tmp_path / "hf")
    out = tmp_path / "bf16"
    proc = run_process(["--source", "hf-jamba", str(src), str(out), "--byte-tokenizer",
                        "--dtype", "bf16"])
    assert proc.returncode == 0, proc.stderr
    assert "4 mamba1, 3 mlp, 2 attention, 3 moe blocks" in proc.stdout
    t, _ = safetensors_io.load_file(out / "model.safetensors")
    for name in ("blocks.0.in_proj.weight", "blocks.0.dt_norm.weight", "blocks.2.attn.q.weight",
                 "blocks.3.moe.up.weight", "embed.weight"):
        assert t[name].dtype == torch.bfloat16, name
    for name in ("blocks.0.A", "blocks.0.D", "blocks.0.dt_proj.bias", "blocks.3.moe.router.weight"):
        assert t[name].dtype == torch.float32, name
    canonical.load_model_dir(out)

    bad = tmp_path / "bad"
    edit_config(src, lambda c: c.update(hidden_act="gelu"))
    proc = run_process(["--source", "hf-jamba", str(src), str(bad), "--byte-tokenizer"])
    assert proc.returncode == 1 and "hidden_act" in proc.stderr and not bad.exists()


CORRUPT = {
    "missing_tensor": (lambda s: edit_tensors(s, lambda t: t.pop(
        "model.layers.3.mamba.b_layernorm.weight")),
        ["missing tensor", "model.layers.3.mamba.b_layernorm.weight"]),
    "missing_expert": (lambda s: edit_tensors(s, lambda t: t.pop(
        "model.layers.5.feed_forward.experts.2.down_proj.weight")),
        ["missing tensor", "model.layers.5.feed_forward.experts.2.down_proj.weight"]),
    "wrong_shape": (lambda s: edit_tensors(s, lambda t: t.update(
        {"model.layers.0.mamba.x_proj.weight": torch.zeros(17, 64)})),
        ["model.layers.0.mamba.x_proj.weight", "[17, 64]", "[18, 64]"]),
    "unknown_tensor": (lambda s: edit_tensors(s, lambda t: t.update(
        {"model.layers.0.mamba.z_layernorm.weight": torch.zeros(8)})),
        ["unknown tensor", "model.layers.0.mamba.z_layernorm.weight"]),
    "lm_head_missing": (lambda s: edit_tensors(s, lambda t: t.pop("lm_head.weight")),
                        ["missing tensor 'lm_head.weight'"]),
    "integer_tensor": (lambda s: edit_tensors(s, lambda t: t.update(
        {"model.layers.1.feed_forward.router.weight": torch.zeros(4, 32, dtype=torch.int32)})),
        ["model.layers.1.feed_forward.router.weight", "not floating point"]),
    "unknown_architecture": (lambda s: edit_config(s, lambda c: c.update(
        model_type="mixtral", architectures=["MixtralForCausalLM"])),
        ["unknown architecture", "mixtral"]),
    "proj_bias_missing": (lambda s: edit_config(s, lambda c: c.update(mamba_proj_bias=True)),
                          ["missing tensor", "model.layers.0.mamba.in_proj.bias"]),
    "activation": (lambda s: edit_config(s, lambda c: c.update(hidden_act="gelu")),
                   ["hidden_act", "gelu"]),
    "sliding_window": (lambda s: edit_config(s, lambda c: c.update(sliding_window=64)),
                       ["sliding_window"]),
    "attn_offset": (lambda s: edit_config(s, lambda c: c.update(attn_layer_offset=3)),
                    ["attn_layer_offset", "attn_layer_period 3"]),
    "expert_offset": (lambda s: edit_config(s, lambda c: c.update(expert_layer_offset=-1)),
                      ["expert_layer_offset", "non-negative integer"]),
    "top_k": (lambda s: edit_config(s, lambda c: c.update(num_experts_per_tok=5)),
              ["num_experts_per_tok", "num_experts 4"]),
    "head_grouping": (lambda s: edit_config(s, lambda c: c.update(num_key_value_heads=3)),
                      ["num_key_value_heads"]),
    "head_split": (lambda s: edit_config(s, lambda c: c.update(num_attention_heads=5)),
                   ["hidden_size", "num_attention_heads 5"]),
    "dt_rank": (lambda s: edit_config(s, lambda c: c.update(mamba_dt_rank="big")),
                ["mamba_dt_rank"]),
    **hf_layouts.BROKEN_FILES,
}


@pytest.mark.parametrize("case", sorted(CORRUPT))
def test_bad_checkpoint_is_a_clean_error(tmp_path, capsys, case):
    src = hf_layouts.save(make_model(), tmp_path / "hf")
    corrupt, needles = CORRUPT[case]
    corrupt(src)
    out = tmp_path / "out"
    code, err = run(["--source", "hf-jamba", str(src), str(out), "--byte-tokenizer"], capsys)
    assert_clean_failure(out, code, err, *needles)


@pytest.mark.parametrize("argv,needle", [
    (["--sinks", "-1"], "--sinks"),
    (["--window", "-3"], "--window"),
    (["--sinks", "0", "--window", "0"], "at least 1"),
])
def test_bad_cache_size(tmp_path, capsys, argv, needle):
    src = hf_layouts.save(make_model(), tmp_path / "hf")
    out = tmp_path / "out"
    code, err = run(["--source", "hf-jamba", str(src), str(out), "--byte-tokenizer", *argv],
                    capsys)
    assert_clean_failure(out, code, err, needle)
