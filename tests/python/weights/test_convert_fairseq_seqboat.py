"""`--source fairseq-seqboat`: fairseq SeqBoat LM checkpoints -> canonical seqboat blocks.

Checkpoints are built by hand with the exact fairseq names and shapes
(MODELS.md 2.6) and saved as fairseq does (`{"model": state_dict, "args":
Namespace}`, `"cfg": {"model": ...}` or, as Hydra-era fairseq does, `"cfg"` an
omegaconf DictConfig). The converted model must give the
logits of a float64 forward written here directly from the fairseq
parameterisation (sigmoid(delta) * beta, 1 - sigmoid(delta) sigmoid(alpha),
gamma * sqrt(1/N) as MultiHeadEMA's convolution kernel; hx_proj rows as router
logits; exp(temp) as temperature; complex-pair rotary; the fairseq relative
bias table), and the C++ engine must give the reference's logits.
"""

import argparse
import json
import math
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from weights import safetensors_io
from weights.reference.model import ReferenceModel

from convert_cli import assert_clean_failure, run, run_process

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
ENGINE_LOGITS = os.path.join(ROOT, "bazel-bin", "tests", "parity", "engine_logits")
TOKENIZE_TOOL = os.path.join(ROOT, "bazel-bin", "tests", "tools", "tokenize_tool")
VOCAB = 260          # fairseq-style dictionary size; >= 257 so the byte tokenizer fits
T = 96


def make_args(**over):
    a = dict(arch="slag_lm_enwik8_base_v2", decoder_layers=2, decoder_embed_dim=24,
             decoder_hidden_dim=40, decoder_z_dim=16, decoder_n_dim=4,
             decoder_ffn_embed_dim=-1, decoder_chunk_size=12, decoder_input_dim=24,
             rel_pos_bias="rotary", attention_activation_fn="softmax", activation_fn="silu",
             normalization_type="layernorm", normalize_before=True, no_affine_final_norm=True,
             no_scale_embedding=False, share_decoder_input_output_embed=True,
             truncation_length=2048, max_target_positions=128, local_pos=False,
             adaptive_input=False, adaptive_softmax_cutoff=None, normalize_embedding=False,
             init_temp_scale=1.0, dropout=0.1)
    a.update(over)
    return a


def norm_params(sd, prefix, norm_type, D, g):
    if norm_type == "scalenorm":
        sd[prefix + "scalar"] = 1.0 + 0.2 * torch.randn(1, generator=g)
    elif norm_type == "rmsnorm":
        sd[prefix + "weight"] = 1.0 + 0.1 * torch.randn(D, generator=g)
    else:
        sd[prefix + "weight"] = 1.0 + 0.1 * torch.randn(D, generator=g)
        sd[prefix + "bias"] = 0.1 * torch.randn(D, generator=g)


def make_state_dict(a, seed):
    """fairseq parameter names and shapes of SeqBoatLanguageModel, float32."""
    g = torch.Generator().manual_seed(seed)
    D, z, v, N, L = (a[k] for k in ("decoder_embed_dim", "decoder_z_dim", "decoder_hidden_dim",
                                    "decoder_n_dim", "decoder_layers"))

    def randn(*shape, std=1.0):
        return torch.randn(*shape, generator=g) * std

    emb = randn(VOCAB, D, std=D ** -0.5)
    emb[1] = 0.0                                              # padding row
    sd = {"decoder.version": torch.tensor([3.0]), "decoder.embed_tokens.weight": emb}
    for i in range(L):
        p = f"decoder.layers.{i}.slag_layer."
        norm_params(sd, p + "norm.norm.", a["normalization_type"], D, g)
        sd[p + "move.delta"] = randn(D, N, 1, std=0.5)
        sd[p + "move.alpha"] = randn(D, N, 1, std=0.5)
        sign = torch.tensor([1.0 if n % 2 == 0 else -1.0 for n in range(N)])[:, None]
        sd[p + "move.beta"] = sign + randn(D, N, 1, std=0.02)
        sd[p + "move.gamma"] = randn(D, N)
        sd[p + "move.omega"] = randn(D)
        sd[p + "gamma"] = 1.0 + randn(2, z, std=0.3)
        sd[p + "beta"] = randn(2, z, std=0.3)
        sd[p + "q_router.temp"] = torch.tensor([math.log(a["init_temp_scale"] * D ** 0.5)]) \
            + randn(1, std=0.3)
        sd[p + "mx_proj.weight"] = randn(z + 2 * v, D, std=2.0 / D ** 0.5)
        sd[p + "mx_proj.bias"] = randn(z + 2 * v, std=0.1)
        hx_w = randn(2 + D, D, std=1.0 / D ** 0.5)
        hx_w[:2] *= 3.0                                       # decisive router logits
        sd[p + "hx_proj.weight"] = hx_w
        sd[p + "hx_proj.bias"] = randn(2 + D, std=0.1)
        sd[p + "h_proj.weight"] = randn(D, v, std=1.0 / v ** 0.5)
        sd[p + "h_proj.bias"] = randn(D, std=0.1)
        if a["rel_pos_bias"] == "simple":
            sd[p + "rel_pos_bias.rel_pos_bias"] = randn(2 * a["max_target_positions"] - 1)
    if a["normalize_before"] and not a["no_affine_final_norm"]:
        norm_params(sd, "decoder.final_norm.norm.", a["normalization_type"], D, g)
    if a["share_decoder_input_output_embed"]:
        sd["decoder.output_projection.weight"] = emb       # tied: the same tensor, as in fairseq
    else:
        sd["decoder.output_projection.weight"] = randn(VOCAB, D, std=D ** -0.5)
    return sd


def save_checkpoint(path, sd, args, layout="args"):
    if layout == "args":
        ckpt = {"model": sd, "args": argparse.Namespace(**args), "optimizer_history": [],
                "extra_state": {"epoch": 3}}
    else:
        ckpt = {"model": sd, "args": None, "cfg": {"model": dict(args)}}
    torch.save(ckpt, path)
    return path


# ---- float64 forward written from the fairseq parameterisation -------------------

def seq_norm(x, sd, prefix, norm_type, affine=True):
    if norm_type == "scalenorm":
        s = sd[prefix + "scalar"] if affine else 1.0
        return s * x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5)
    if norm_type == "rmsnorm":
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5)
        return x * sd[prefix + "weight"] if affine else x
    w = sd[prefix + "weight"] if affine else None
    b = sd[prefix + "bias"] if affine else None
    return F.layer_norm(x, x.shape[-1:], w, b, 1e-5)


def mega_ema(x, p_):
    """MultiHeadEMA.forward without incremental state, kernel summed directly."""
    L, D = x.shape
    delta, alpha, beta = p_["move.delta"], p_["move.alpha"], p_["move.beta"]
    N = delta.shape[1]
    pp = torch.sigmoid(delta)                                 # D x N x 1
    q = 1.0 - pp * torch.sigmoid(alpha)
    vander = torch.arange(L, dtype=x.dtype).view(1, 1, L) * torch.log(q)
    kernel = torch.einsum("dnl,dn->dl", (pp * beta) * torch.exp(vander),
                          p_["move.gamma"] * math.sqrt(1.0 / N))            # D x L
    out = torch.zeros_like(x)
    for t in range(L):
        out[t] = (kernel[:, :t + 1].flip(-1) * x[:t + 1].t()).sum(-1)
    return out + x * p_["move.omega"]


def rotary(x, positions):
    """fairseq apply_rotary_emb: consecutive pairs as complex numbers times e^{i p theta}."""
    z = x.shape[-1]
    freqs = 1.0 / (10000.0 ** (torch.arange(0, z, 2, dtype=torch.float64) / z))
    ang = positions.to(torch.float64)[:, None] * freqs[None, :]
    xc = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2).contiguous())
    return torch.view_as_real(xc * torch.polar(torch.ones_like(ang), ang)).flatten(-2)


def slag_layer(S, p_, a, margins):
    z, v, w = a["decoder_z_dim"], a["decoder_hidden_dim"], a["decoder_chunk_size"]
    nt = a["normalization_type"]
    X = seq_norm(S, p_, "norm.norm.", nt) if a["normalize_before"] else S
    H = F.silu(mega_ema(X, p_))
    hx = H @ p_["hx_proj.weight"].t() + p_["hx_proj.bias"]
    u, G = hx[:, :2], hx[:, 2:]
    margins.append((u[:, 1] - u[:, 0]).abs().min().item())
    active = u[:, 1] > u[:, 0]
    conf = torch.softmax(u / torch.exp(p_["q_router.temp"]), dim=-1)[:, 1] * active
    mx = F.silu(H @ p_["mx_proj.weight"].t() + p_["mx_proj.bias"])
    Z, R, Vv = mx[:, :z], mx[:, z:z + v], mx[:, z + v:]
    Q = Z * p_["gamma"][0] + p_["beta"][0]
    K = Z * p_["gamma"][1] + p_["beta"][1]
    pos = torch.arange(S.shape[0])
    if a["rel_pos_bias"] == "rotary":
        Q, K = rotary(Q, pos), rotary(K, pos)
    idx = [t for t in range(S.shape[0]) if active[t]]
    Y = torch.zeros_like(S)
    M = a["max_target_positions"]
    for rho, t in enumerate(idx):
        keys = idx[max(0, rho - w):rho + 1]                   # itself + up to w earlier active
        if a["attention_activation_fn"] == "softmax":
            s = (Q[t] / math.sqrt(z)) @ K[keys].t()
        else:
            s = (Q[t] / w) @ K[keys].t()
        if a["rel_pos_bias"] == "simple":
            table = p_["rel_pos_bias.rel_pos_bias"]
            s = s + table[[M - 1 + max(-(M - 1), min(M - 1, k - t)) for k in keys]]
        attn = torch.softmax(s, -1) if a["attention_activation_fn"] == "softmax" \
            else F.relu(s) ** 2
        O = attn @ Vv[keys]
        Y[t] = (O * R[t]) @ p_["h_proj.weight"].t() + p_["h_proj.bias"]
    out = F.silu(S + G + conf[:, None] * Y)
    if not a["normalize_before"]:
        out = seq_norm(out, p_, "norm.norm.", nt)
    return out


def fairseq_forward(sd, a, tokens):
    sd = {k: v.double() for k, v in sd.items()}
    D = a["decoder_embed_dim"]
    scale = 1.0 if a["no_scale_embedding"] else math.sqrt(D)
    x = scale * sd["decoder.embed_tokens.weight"][torch.tensor(tokens)]
    margins = []
    for i in range(a["decoder_layers"]):
        p = f"decoder.layers.{i}.slag_layer."
        x = slag_layer(x, {k[len(p):]: v for k, v in sd.items() if k.startswith(p)}, a, margins)
    if a["normalize_before"]:
        x = seq_norm(x, sd, "decoder.final_norm.norm.", a["normalization_type"],
                     affine=not a["no_affine_final_norm"])
    return x @ sd["decoder.output_projection.weight"].t(), min(margins)


def tokens(n=T, seed=0):
    rng = np.random.default_rng(seed)
    return [int(t) for t in rng.integers(0, VOCAB, size=n)]


def engine_logits(model_dir, toks, out, chunk):
    if not os.path.exists(ENGINE_LOGITS):
        pytest.fail(f"{ENGINE_LOGITS} is missing: run `bazel build //tests/parity:all` first")
    proc = subprocess.run([ENGINE_LOGITS, "--model", str(model_dir), "--tokens",
                           ",".join(map(str, toks)), "--out", str(out), "--chunk", str(chunk)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return np.load(out)


CASES = {
    # enwik8 settings: rotary, softmax, LayerNorm pre-norm, final norm without affine, tied.
    "enwik8_like": dict(),
    # simple relative bias, relu2, ScaleNorm, affine final norm, untied head, no embed scale.
    "simple_relu2_scalenorm": dict(rel_pos_bias="simple", attention_activation_fn="relu2",
                                   normalization_type="scalenorm", no_affine_final_norm=False,
                                   share_decoder_input_output_embed=False,
                                   no_scale_embedding=True, max_target_positions=40),
    # post-norm (no final norm), simple bias with softmax, hyper-parameters under cfg.model.
    "postnorm_cfg": dict(normalize_before=False, rel_pos_bias="simple", decoder_chunk_size=7,
                         truncation_length=None),
    # RMSNorm (SequenceNorm's rmsnorm): the final norm the engine runs, without and with affine.
    "rmsnorm_rotary": dict(normalization_type="rmsnorm"),
    "rmsnorm_simple_relu2": dict(normalization_type="rmsnorm", rel_pos_bias="simple",
                                 attention_activation_fn="relu2", no_affine_final_norm=False,
                                 share_decoder_input_output_embed=False, decoder_chunk_size=9,
                                 max_target_positions=50),
}
# Every case runs on the engine too: LayerNorm with and without affine, ScaleNorm
# and RMSNorm final norms, and none (post-norm).
ENGINE_CASES = sorted(CASES)


def converted(tmp_path, capsys, case):
    a = make_args(**CASES[case])
    sd = make_state_dict(a, seed=sorted(CASES).index(case) + 1)
    ckpt = save_checkpoint(tmp_path / "checkpoint_best.pt", sd, a,
                           layout="cfg" if case == "postnorm_cfg" else "args")
    out = tmp_path / "out"
    code, err = run(["--source", "fairseq-seqboat", str(ckpt), str(out), "--byte-tokenizer"],
                    capsys)
    assert code == 0, err
    return a, sd, out


@pytest.mark.parametrize("case", sorted(CASES))
def test_converted_model_matches_fairseq_forward(tmp_path, capsys, case):
    a, sd, out = converted(tmp_path, capsys, case)

    toks = tokens(seed=len(case))
    want, margin = fairseq_forward(sd, a, toks)
    assert margin > 1e-3          # no router near-tie that fp32 rounding could flip
    ref = ReferenceModel.load(out, torch.float64).forward(toks)
    assert ref.std() > 0.5
    assert torch.allclose(ref, want, rtol=0, atol=1e-5), (ref - want).abs().max()

    conf = json.loads((out / "config.json").read_text())
    b = conf["blocks"][0]
    assert len(conf["blocks"]) == 2 and b["kind"] == "seqboat"
    assert (b["ema_dim"], b["z_dim"], b["v_dim"], b["window"]) == (
        4, 16, 40, a["decoder_chunk_size"])
    assert b["prenorm"] == a["normalize_before"]
    assert b["pos"] == ("rope_interleaved" if a["rel_pos_bias"] == "rotary" else "simple_bias")
    assert b["ema_truncation"] == a["truncation_length"]
    assert conf["embed"]["scale"] == (1.0 if a["no_scale_embedding"] else math.sqrt(24))
    assert conf["tie_embeddings"] == a["share_decoder_input_output_embed"]
    t, _ = safetensors_io.load_file(out / "model.safetensors")
    assert torch.equal(t["blocks.1.router.temperature"],
                       torch.exp(sd["decoder.layers.1.slag_layer.q_router.temp"]))
    assert torch.equal(t["blocks.0.hx.weight"], sd["decoder.layers.0.slag_layer.hx_proj.weight"][2:])


@pytest.mark.parametrize("case", ENGINE_CASES)
def test_engine_matches_reference_on_converted_model(tmp_path, capsys, case):
    a, sd, out = converted(tmp_path, capsys, case)
    toks = tokens(256, seed=len(case))
    ref = ReferenceModel.load(out, torch.float64).forward(toks).numpy()
    assert ref.std() > 0.5
    for chunk in (1, 13, 256):
        got = engine_logits(out, toks, tmp_path / f"e{chunk}.npy", chunk)
        assert np.abs(got - ref).max() <= 1e-4, chunk


def test_checkpoint_directory_and_enwik8_final_norm(tmp_path, capsys):
    a = make_args()
    sd = make_state_dict(a, seed=9)
    sd.pop("decoder.output_projection.weight")        # tied head may be absent
    (tmp_path / "ckpt").mkdir()
    save_checkpoint(tmp_path / "ckpt" / "checkpoint_best.pt", sd, a)
    out = tmp_path / "out"
    code, err = run(["--source", "fairseq-seqboat", str(tmp_path / "ckpt"), str(out),
                     "--byte-tokenizer"], capsys)
    assert code == 0, err
    conf = json.loads((out / "config.json").read_text())
    assert conf["final_norm"] == {"type": "layernorm", "eps": 1e-5, "affine": False}
    t, _ = safetensors_io.load_file(out / "model.safetensors")
    assert not any(k.startswith("final_norm.") for k in t) and "lm_head.weight" not in t


def _drop(name):
    return lambda sd, a: sd.pop(name)


def _set(**kw):
    return lambda sd, a: a.update(kw)


CORRUPT = {
    "missing_tensor": (_drop("decoder.layers.1.slag_layer.move.alpha"),
                       ["missing tensor", "decoder.layers.1.slag_layer.move.alpha"]),
    "wrong_shape": (lambda sd, a: sd.update({"decoder.layers.0.slag_layer.hx_proj.weight":
                                             torch.zeros(24, 24)}),
                    ["hx_proj.weight", "[24, 24]", "[26, 24]"]),
    "unknown_tensor": (lambda sd, a: sd.update({"decoder.layers.0.nffn.fc1.weight":
                                                torch.zeros(4, 24)}),
                       ["unknown tensor", "nffn.fc1.weight"]),
    "untied_without_head": (lambda sd, a: (sd.pop("decoder.output_projection.weight"),
                                           a.update(share_decoder_input_output_embed=False)),
                            ["missing tensor", "decoder.output_projection.weight"]),
    "global_attention": (_set(decoder_chunk_size=-1), ["decoder_chunk_size"]),
    "ffn": (_set(decoder_ffn_embed_dim=64), ["decoder_ffn_embed_dim"]),
    "t5_bias": (_set(rel_pos_bias="t5"), ["rel_pos_bias", "t5"]),
    "laplace": (_set(attention_activation_fn="laplace"), ["laplace"]),
    "local_pos": (_set(rel_pos_bias="simple", local_pos=True), ["local_pos"]),
    "adaptive": (_set(adaptive_input=True), ["adaptive"]),
    "unknown_architecture": (_set(arch="transformer_lm"), ["unknown architecture"]),
}


@pytest.mark.parametrize("case", sorted(CORRUPT))
def test_bad_checkpoint_is_a_clean_error(tmp_path, capsys, case):
    a = make_args()
    sd = make_state_dict(a, seed=4)
    edit, needles = CORRUPT[case]
    edit(sd, a)
    ckpt = save_checkpoint(tmp_path / "c.pt", sd, a)
    out = tmp_path / "out"
    code, err = run(["--source", "fairseq-seqboat", str(ckpt), str(out), "--byte-tokenizer"],
                    capsys)
    assert_clean_failure(out, code, err, *needles)


class Payload:
    """An object whose unpickling would run code: the converter must refuse it."""

    def __reduce__(self):
        return (os.system, ("true",))


def test_untrusted_pickle_and_non_checkpoints_are_refused(tmp_path, capsys):
    a = make_args()
    bad = tmp_path / "evil.pt"
    torch.save({"model": make_state_dict(a, 1), "args": a, "x": Payload()}, bad,
               pickle_protocol=pickle.HIGHEST_PROTOCOL)
    out = tmp_path / "out"
    code, err = run(["--source", "fairseq-seqboat", str(bad), str(out), "--byte-tokenizer"],
                    capsys)
    assert_clean_failure(out, code, err, "refusing to load", "system")

    flat = tmp_path / "flat.pt"
    torch.save(make_state_dict(a, 1), flat)
    code, err = run(["--source", "fairseq-seqboat", str(flat), str(out), "--byte-tokenizer"],
                    capsys)
    assert_clean_failure(out, code, err, "not a fairseq checkpoint")

    code, err = run(["--source", "fairseq-seqboat", str(tmp_path / "none.pt"), str(out),
                     "--byte-tokenizer"], capsys)
    assert_clean_failure(out, code, err, "no such checkpoint")


def hydra_cfg(args, model_as):
    """A Hydra-era fairseq cfg: a real omegaconf DictConfig with the model's
    hyper-parameters under cfg.model, either as a DictConfig (a dataclass
    model: named by _name, fields interpolated across groups) or as the
    argparse Namespace fairseq stores there for argparse architectures."""
    from omegaconf import OmegaConf

    groups = {"_name": None, "common": {"seed": 1, "fp16": True, "log_format": "json"},
              "task": {"_name": "language_modeling", "tokens_per_sample": 512,
                       "max_target_positions": args["max_target_positions"]},
              "checkpoint": {"save_dir": "checkpoints", "keep_last_epochs": -1},
              "optimization": {"lr": [0.005], "max_update": 100}}
    if model_as == "dictconfig":
        model = {k: v for k, v in args.items() if k != "arch"}
        model["_name"] = args["arch"]
        model["max_target_positions"] = "${task.max_target_positions}"
        model["decoder_input_dim"] = "${model.decoder_embed_dim}"
        return OmegaConf.create(dict(groups, model=model))
    cfg = OmegaConf.create(dict(groups, model=None), flags={"allow_objects": True})
    cfg.model = argparse.Namespace(**args)
    return cfg


@pytest.mark.parametrize("model_as", ["dictconfig", "namespace"])
def test_hydra_dictconfig_cfg(tmp_path, capsys, model_as):
    from omegaconf import DictConfig

    a = make_args(normalization_type="rmsnorm", rel_pos_bias="simple")
    sd = make_state_dict(a, seed=6)
    cfg = hydra_cfg(a, model_as)
    assert isinstance(cfg, DictConfig)
    (tmp_path / "hydra").mkdir()
    hydra = tmp_path / "hydra" / "checkpoint_best.pt"
    torch.save({"model": sd, "args": None, "cfg": cfg, "optimizer_history": []}, hydra)
    (tmp_path / "plain").mkdir()
    plain = save_checkpoint(tmp_path / "plain" / "checkpoint_best.pt", sd, a)

    outs = {}
    for name, ckpt in (("hydra", hydra), ("plain", plain)):
        outs[name] = tmp_path / f"out_{name}"
        code, err = run(["--source", "fairseq-seqboat", str(ckpt), str(outs[name]),
                         "--byte-tokenizer"], capsys)
        assert code == 0, err
    # The same model as from the argparse layout: config and every tensor.
    assert json.loads((outs["hydra"] / "config.json").read_text()) == \
        json.loads((outs["plain"] / "config.json").read_text())
    got, _ = safetensors_io.load_file(outs["hydra"] / "model.safetensors")
    want, _ = safetensors_io.load_file(outs["plain"] / "model.safetensors")
    assert sorted(got) == sorted(want)
    assert all(torch.equal(got[k], want[k]) for k in want)
    toks = tokens(seed=5)
    logits, _ = fairseq_forward(sd, a, toks)
    ref = ReferenceModel.load(outs["hydra"], torch.float64).forward(toks)
    assert torch.allclose(ref, logits, rtol=0, atol=1e-5), (ref - logits).abs().max()


def test_dictconfig_cfg_without_omegaconf_is_a_clean_error(tmp_path, capsys, monkeypatch):
    a = make_args()
    ckpt = tmp_path / "c.pt"
    torch.save({"model": make_state_dict(a, seed=3), "args": None,
                "cfg": hydra_cfg(a, "dictconfig")}, ckpt)
    monkeypatch.setitem(sys.modules, "omegaconf", None)       # as if not installed
    out = tmp_path / "out"
    code, err = run(["--source", "fairseq-seqboat", str(ckpt), str(out), "--byte-tokenizer"],
                    capsys)
    assert_clean_failure(out, code, err, "omegaconf DictConfig", "python3-omegaconf")


def test_cli_exit_status(tmp_path):
    a = make_args(normalization_type="rmsnorm")
    ckpt = save_checkpoint(tmp_path / "c.pt", make_state_dict(a, seed=2), a)
    out = tmp_path / "out"
    base = ["--source", "fairseq-seqboat", str(ckpt)]
    proc = run_process(base + [str(out), "--byte-tokenizer", "--window", "8"])
    assert proc.returncode == 1 and "--window does not apply" in proc.stderr
    assert not out.exists()
    proc = run_process(base + [str(out), "--byte-tokenizer", "--dtype", "bf16"])
    assert proc.returncode == 0, proc.stderr
    assert "2 seqboat blocks" in proc.stdout
    t, _ = safetensors_io.load_file(out / "model.safetensors")
    assert t["blocks.0.gau.in_proj.weight"].dtype == torch.bfloat16
    assert t["blocks.0.ema.decay"].dtype == torch.float32      # derived recurrence stays fp32
    # Without dict.txt beside the checkpoint a tokenizer must be named.
    proc = run_process(base + [str(tmp_path / "out2")])
    assert proc.returncode == 1 and "no tokenizer.json or dict.txt" in proc.stderr


# ---- the fairseq dictionary -------------------------------------------------------

def dictionary_lines(n):
    """n dict.txt lines, as fairseq-preprocess writes them: symbol, count;
    byte-number symbols as enwik8's, padding words at the end."""
    words = [str(b) for b in range(n - 3)] + ["é", "the", "madeupword0000"]
    return [f"{w} {1000 - i}" for i, w in enumerate(words)]


def fairseq_prompt(symbols, text, bos=2):
    """The ids fairseq's language-model inference feeds for `text`: every line
    but the last ends with </s>, as the binarizer ended the training lines;
    words split on whitespace (tokenize_line), unknown ones <unk>; the
    leading </s> (bos) that build_dataset_for_inference prepends. One
    deliberate difference: the word <pad> is <unk>, not the padding id."""
    index = {s: i for i, s in enumerate(symbols) if i != 1}
    ids = [bos]
    lines = text.split("\n")
    for k, line in enumerate(lines):
        ids += [index.get(w, 3) for w in line.split()]
        if k + 1 < len(lines):
            ids.append(2)
    return ids


def converted_with_dictionary(tmp_path, capsys, lines, **over):
    a = make_args(**over)
    (tmp_path / "ckpt").mkdir()
    save_checkpoint(tmp_path / "ckpt" / "checkpoint_best.pt", make_state_dict(a, seed=8), a)
    (tmp_path / "ckpt" / "dict.txt").write_text("".join(l + "\n" for l in lines),
                                                encoding="utf-8")
    out = tmp_path / "out"
    return run(["--source", "fairseq-seqboat", str(tmp_path / "ckpt"), str(out)], capsys), out


def test_dictionary_becomes_a_tokenizer_with_fairseq_ids(tmp_path, capsys):
    tokenizers = pytest.importorskip("tokenizers")
    lines = dictionary_lines(VOCAB - 4 - 2)      # two embedding rows without a symbol
    (code, err), out = converted_with_dictionary(tmp_path, capsys, lines)
    assert code == 0, err
    symbols = ["<s>", "<pad>", "</s>", "<unk>"] + [l.rsplit(" ", 1)[0] for l in lines]
    tok = json.loads((out / "tokenizer.json").read_text())
    vocab = tok["model"]["vocab"]
    assert all(vocab[s] == i for i, s in enumerate(symbols) if i != 1)
    # No text can produce the padding id: it is neither a word nor an added token.
    assert "<pad>" not in vocab and 1 not in vocab.values()
    assert [(t["id"], t["content"], t["special"]) for t in tok["added_tokens"]] == \
        [(0, "<s>", True), (2, "</s>", True), (3, "<unk>", True)]
    conf = json.loads((out / "config.json").read_text())
    assert (conf["bos_token_id"], conf["eos_token_id"], conf["embed"]["padding_idx"]) == (2, 2, 1)

    text = "12 7 the\n250  é\tzzz 3\n\n<pad> 99 </s> 5 madeupword0000 THE\n0"
    want = fairseq_prompt(symbols, text)
    assert 1 not in want
    hf = tokenizers.Tokenizer.from_file(str(out / "tokenizer.json"))
    hf.encode_special_tokens = True          # the server's parse_special off
    assert hf.encode(text).ids == want
    assert all(hf.id_to_token(i) == s for i, s in enumerate(symbols) if i != 1)

    if not os.path.exists(TOKENIZE_TOOL):
        pytest.fail(f"{TOKENIZE_TOOL} is missing: run `bazel build //tests/tools:tokenize_tool`")
    text_path = tmp_path / "prompt.txt"
    text_path.write_bytes(text.encode())
    got = subprocess.run([TOKENIZE_TOOL, "encode", str(out / "tokenizer.json"), str(text_path)],
                         capture_output=True, text=True, check=True).stdout.split()
    assert [int(x) for x in got] == want
    # Generated words come back joined with single spaces; specials print nothing.
    ids_path = tmp_path / "ids.txt"
    ids_path.write_text(" ".join(map(str, want)))
    streamed = subprocess.run([TOKENIZE_TOOL, "stream", str(out / "tokenizer.json"),
                               str(ids_path)], capture_output=True, text=True,
                              check=True).stdout.split("\n")[:-1]
    text_out = b"".join(b"" if l == "-" else bytes.fromhex(l) for l in streamed).decode()
    assert text_out == hf.decode(want) == "12 7 the 250 é 3 99 5 madeupword0000 0"


def test_add_bos_token_starts_prompts_with_bos(tmp_path, capsys):
    (code, err), out = converted_with_dictionary(tmp_path, capsys, dictionary_lines(20),
                                                 add_bos_token=True)
    assert code == 0, err
    assert json.loads((out / "config.json").read_text())["bos_token_id"] == 0
    tok = json.loads((out / "tokenizer.json").read_text())
    assert tok["post_processor"]["special_tokens"] == {
        "<s>": {"id": "<s>", "ids": [0], "tokens": ["<s>"]}}


def test_explicit_tokenizer_wins_over_the_dictionary(tmp_path, capsys):
    a = make_args()
    (tmp_path / "ckpt").mkdir()
    ckpt = save_checkpoint(tmp_path / "ckpt" / "model.pt", make_state_dict(a, seed=8), a)
    (tmp_path / "ckpt" / "dict.txt").write_text("a 1\n")
    out = tmp_path / "out"
    code, err = run(["--source", "fairseq-seqboat", str(ckpt), str(out), "--byte-tokenizer"],
                    capsys)
    assert code == 0, err
    assert json.loads((out / "tokenizer.json").read_text())["model"]["type"] == "Bytes"
    assert json.loads((out / "config.json").read_text())["bos_token_id"] is None


BAD_DICTIONARIES = {
    "too_many_symbols": ([f"w{i} 1" for i in range(VOCAB - 3)],
                         ["dict.txt", f"{VOCAB + 1} symbols", f"has {VOCAB} rows"]),
    "no_count": (["a 1", "b", "c 3"], ["dict.txt:2", "'b'", "<symbol> <count>"]),
    "bad_count": (["a 1", "b x"], ["dict.txt:2", "'b x'"]),
    "blank_line": (["a 1", ""], ["dict.txt:2"]),
    "duplicate": (["a 1", "b 2", "a 3"], ["dict.txt:3", "'a'", "repeats id 4"]),
    "special_without_overwrite": (["</s> 5"], ["dict.txt:1", "'</s>'", "repeats id 2"]),
    "overwrite_word": (["a 1", "a 2 #fairseq:overwrite"], ["dict.txt:2", "overwrites id 4"]),
    "overwrite_eos": (["a 1", "</s> 2 #fairseq:overwrite"], ["dict.txt:2", "overwrites id 2"]),
    "overwrite_unk": (["<unk> 2 #fairseq:overwrite"], ["dict.txt:1", "overwrites id 3"]),
}


@pytest.mark.parametrize("case", sorted(BAD_DICTIONARIES))
def test_bad_dictionary_is_a_clean_error(tmp_path, capsys, case):
    lines, needles = BAD_DICTIONARIES[case]
    (code, err), out = converted_with_dictionary(tmp_path, capsys, lines)
    assert_clean_failure(out, code, err, *needles)


def test_overwritten_special_keeps_its_name(tmp_path, capsys):
    (code, err), out = converted_with_dictionary(
        tmp_path, capsys, ["a 5", "<pad> 3 #fairseq:overwrite", "b 1"])
    assert code == 0, err
    tok = json.loads((out / "tokenizer.json").read_text())
    # Text "<pad>" takes the new id, as in fairseq; id 1 stays the padding
    # id, which no text produces.
    assert tok["model"]["vocab"]["<pad>"] == 5 and 1 not in tok["model"]["vocab"].values()
    assert 1 not in [t["id"] for t in tok["added_tokens"]]


# ---- truncation_length ------------------------------------------------------------

def test_short_truncation_warns_with_the_kernel_tail(tmp_path, capsys):
    a = make_args(truncation_length=16, tokens_per_sample=512)
    ckpt = save_checkpoint(tmp_path / "c.pt", make_state_dict(a, seed=3), a)
    out = tmp_path / "out"
    code, err = run(["--source", "fairseq-seqboat", str(ckpt), str(out), "--byte-tokenizer"],
                    capsys)
    assert code == 0, err
    assert "convert: warning: truncation_length 16" in err
    assert "trained on 512-token samples" in err and "Streams up to 16 tokens" in err
    assert json.loads((out / "config.json").read_text())["blocks"][0]["ema_truncation"] == 16

    # The same weights trained with the default 2048 taps: these decays leave
    # nothing of the kernel that far out, so there is nothing to warn about.
    a2 = make_args(truncation_length=2048)
    ckpt2 = save_checkpoint(tmp_path / "c2.pt", make_state_dict(a2, seed=3), a2)
    code, err = run(["--source", "fairseq-seqboat", str(ckpt2), str(tmp_path / "out2"),
                     "--byte-tokenizer"], capsys)
    assert code == 0 and "warning" not in err, err


def test_truncation_tail_measure():
    from weights.converters.fairseq_seqboat import truncation_tail
    # One channel, two modes: a fast one (phi 0.5) and a slow one (phi 0.99)
    # with equal |eta g|; their weights are 1/(1-phi) = 2 and 100.
    t = {"blocks.0.ema.decay": torch.tensor([[0.5, 0.99]]),
         "blocks.0.ema.in_coef": torch.tensor([[1.0, 1.0]]),
         "blocks.0.ema.out_coef": torch.tensor([[1.0, -1.0]])}
    share, block, channel = truncation_tail(t, 1, 10)
    want = (2 * 0.5 ** 10 + 100 * 0.99 ** 10) / 102
    assert (block, channel) == (0, 0) and abs(share - want) < 1e-6
