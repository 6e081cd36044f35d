"""Hand-built Mamba checkpoints in the HF and mamba_ssm layouts, and a forward
computed straight from the source tensor names (independent of the converter).

Names and shapes follow MODELS.md 1.5 / 1.6 literally; `transformers` and
`mamba_ssm` are not needed.
"""

import json
import math
import os

import torch
import torch.nn.functional as F

from weights import safetensors_io


def hf_config(V=264, D=24, L=2, E=48, N=6, K=4, R="auto", use_bias=False, conv_bias=True,
              tie=True, eps=1e-5):
    cfg = {"architectures": ["MambaForCausalLM"], "model_type": "mamba", "vocab_size": V,
           "hidden_size": D, "intermediate_size": E, "state_size": N, "num_hidden_layers": L,
           "conv_kernel": K, "expand": E // D, "time_step_rank": R, "use_bias": use_bias,
           "use_conv_bias": conv_bias, "hidden_act": "silu", "layer_norm_epsilon": eps,
           "residual_in_fp32": True, "bos_token_id": 0, "eos_token_id": 0, "pad_token_id": 0,
           "torch_dtype": "float32", "initializer_range": 0.1, "time_step_scale": 1.0}
    if not tie:
        cfg["tie_word_embeddings"] = False
    return cfg


def random_source_tensors(V, D, L, E, N, K, R, bias, conv_bias, embed_name, lm_head, seed=0):
    g = torch.Generator().manual_seed(seed)

    def u(*shape, scale=1.0):
        return (torch.rand(shape, generator=g) * 2 - 1) * scale

    t = {embed_name: torch.randn(V, D, generator=g) * 0.5,
         "backbone.norm_f.weight": 1 + 0.1 * torch.randn(D, generator=g)}
    for i in range(L):
        p = f"backbone.layers.{i}."
        t[p + "norm.weight"] = 1 + 0.1 * torch.randn(D, generator=g)
        t[p + "mixer.in_proj.weight"] = u(2 * E, D, scale=D ** -0.5)
        t[p + "mixer.conv1d.weight"] = u(E, 1, K, scale=K ** -0.5)
        if conv_bias:
            t[p + "mixer.conv1d.bias"] = u(E, scale=K ** -0.5)
        t[p + "mixer.x_proj.weight"] = u(R + 2 * N, E, scale=E ** -0.5)
        t[p + "mixer.dt_proj.weight"] = u(E, R, scale=R ** -0.5)
        dt = torch.exp(torch.rand(E, generator=g) * (math.log(0.1) - math.log(1e-3)) + math.log(1e-3))
        t[p + "mixer.dt_proj.bias"] = dt + torch.log(-torch.expm1(-dt))
        t[p + "mixer.A_log"] = torch.log(torch.arange(1, N + 1, dtype=torch.float32)).repeat(E, 1) \
            + 0.1 * torch.randn(E, N, generator=g)
        t[p + "mixer.D"] = 1 + 0.1 * torch.randn(E, generator=g)
        t[p + "mixer.out_proj.weight"] = u(D, E, scale=E ** -0.5)
        if bias:
            t[p + "mixer.in_proj.bias"] = u(2 * E, scale=0.1)
            t[p + "mixer.out_proj.bias"] = u(D, scale=0.1)
    if lm_head == "copy":
        t["lm_head.weight"] = t[embed_name].clone()
    elif lm_head == "own":
        t["lm_head.weight"] = torch.randn(V, D, generator=g) * 0.5
    return t


def write_hf(path, cfg, lm_head=None, seed=0, tokenizer=None):
    """Write an HF checkpoint directory; returns its tensors."""
    os.makedirs(path)
    D = cfg["hidden_size"]
    R = math.ceil(D / 16) if cfg["time_step_rank"] == "auto" else cfg["time_step_rank"]
    t = random_source_tensors(cfg["vocab_size"], D, cfg["num_hidden_layers"],
                              cfg["intermediate_size"], cfg["state_size"], cfg["conv_kernel"], R,
                              cfg["use_bias"], cfg["use_conv_bias"], "backbone.embeddings.weight",
                              lm_head, seed)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(cfg, f)
    safetensors_io.save_file(t, os.path.join(path, "model.safetensors"), {"format": "pt"})
    if tokenizer is not None:
        with open(os.path.join(path, "tokenizer.json"), "w") as f:
            json.dump(tokenizer, f)
    return t


def write_mamba_ssm(path, cfg, seed=0, lm_head="copy"):
    """Write an original mamba_ssm checkpoint (config.json + pytorch_model.bin)."""
    os.makedirs(path)
    D, mult = cfg["d_model"], cfg.get("pad_vocab_size_multiple", 1)
    V = math.ceil(cfg["vocab_size"] / mult) * mult
    ssm = cfg.get("ssm_cfg", {})
    N, K, E = ssm.get("d_state", 16), ssm.get("d_conv", 4), ssm.get("expand", 2) * D
    R = math.ceil(D / 16) if ssm.get("dt_rank", "auto") == "auto" else ssm["dt_rank"]
    t = random_source_tensors(V, D, cfg["n_layer"], E, N, K, R, ssm.get("bias", False),
                              ssm.get("conv_bias", True), "backbone.embedding.weight", lm_head, seed)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(cfg, f)
    torch.save(t, os.path.join(path, "pytorch_model.bin"))
    return t


def source_forward(t, tokens, eps, embed_name="backbone.embeddings.weight", tie=True):
    """Logits [T, V] in float64 from source-named tensors, per-token recurrence.

    Reads A_log, conv1d [E,1,K] and the backbone.* names directly, so it checks
    the converter's renaming, squeezing and A = -exp(A_log) end to end.
    """
    w = {k: v.double() for k, v in t.items()}
    L = 1 + max(int(k.split(".")[2]) for k in w if k.startswith("backbone.layers."))
    st = []
    for i in range(L):
        E, N = w[f"backbone.layers.{i}.mixer.A_log"].shape
        K = w[f"backbone.layers.{i}.mixer.conv1d.weight"].shape[2]
        st.append([torch.zeros(E, K - 1, dtype=torch.float64), torch.zeros(E, N, dtype=torch.float64)])

    def norm(x, wt):
        return wt * x / torch.sqrt((x * x).mean() + eps)

    out = []
    for tok in tokens:
        r = w[embed_name][tok].clone()
        for i in range(L):
            p = f"backbone.layers.{i}."
            A = -torch.exp(w[p + "mixer.A_log"])
            E, N = A.shape
            R = w[p + "mixer.dt_proj.weight"].shape[1]
            xz = w[p + "mixer.in_proj.weight"] @ norm(r, w[p + "norm.weight"])
            if p + "mixer.in_proj.bias" in w:
                xz = xz + w[p + "mixer.in_proj.bias"]
            x, z = xz[:E], xz[E:]
            cw = w[p + "mixer.conv1d.weight"][:, 0, :]
            c = (cw[:, :-1] * st[i][0]).sum(1) + cw[:, -1] * x + w.get(p + "mixer.conv1d.bias", 0)
            st[i][0] = torch.cat([st[i][0][:, 1:], x[:, None]], 1)
            xc = F.silu(c)
            dbc = w[p + "mixer.x_proj.weight"] @ xc
            delta = F.softplus(w[p + "mixer.dt_proj.weight"] @ dbc[:R] + w[p + "mixer.dt_proj.bias"])
            st[i][1] = torch.exp(delta[:, None] * A) * st[i][1] + (delta * xc)[:, None] * dbc[None, R:R + N]
            y = st[i][1] @ dbc[R + N:] + w[p + "mixer.D"] * xc
            o = w[p + "mixer.out_proj.weight"] @ (y * F.silu(z))
            if p + "mixer.out_proj.bias" in w:
                o = o + w[p + "mixer.out_proj.bias"]
            r = r + o
        head = w[embed_name] if tie else w["lm_head.weight"]
        out.append(head @ norm(r, w["backbone.norm_f.weight"]))
    return torch.stack(out)
