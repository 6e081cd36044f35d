"""Trainable Mamba-1 language model whose state_dict is the HF `MambaForCausalLM` layout.

Parameter names match MODELS.md 1.5 exactly (backbone.embeddings.weight,
backbone.layers.{i}.mixer.A_log, ...), so saving the state_dict gives an HF
checkpoint that goes through the same converter as any downloaded model.

The selective scan is weights/training/train_scan.py (a cache-friendly autograd Function
with chunked checkpointing), which is what makes CPU training fast enough. The
whole model is verified against the independent full-sequence reference
(weights/reference/mamba.py) in the tests.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from weights.training.train_scan import selective_scan


class RMSNorm(nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class MambaMixer(nn.Module):
    def __init__(self, d_model, d_inner, d_state, d_conv, dt_rank, chunk,
                 dt_min=1e-3, dt_max=1e-1):
        super().__init__()
        self.E, self.N, self.K, self.R, self.chunk = d_inner, d_state, d_conv, dt_rank, chunk
        self.in_proj = nn.Linear(d_model, 2 * d_inner, bias=False)
        self.conv1d = nn.Conv1d(d_inner, d_inner, d_conv, groups=d_inner, bias=True)
        self.x_proj = nn.Linear(d_inner, dt_rank + 2 * d_state, bias=False)
        self.dt_proj = nn.Linear(dt_rank, d_inner, bias=True)
        self.out_proj = nn.Linear(d_inner, d_model, bias=False)
        # Mamba's initialisation: dt_proj weight ~ U(+-R^-1/2), dt bias = softplus^-1(dt)
        # with dt log-uniform in [dt_min, dt_max], A = -(1..N) per channel, D = 1.
        nn.init.uniform_(self.dt_proj.weight, -dt_rank ** -0.5, dt_rank ** -0.5)
        dt = torch.exp(torch.rand(d_inner) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min))
        with torch.no_grad():
            self.dt_proj.bias.copy_(dt + torch.log(-torch.expm1(-dt)))
        self.A_log = nn.Parameter(torch.log(torch.arange(1, d_state + 1, dtype=torch.float32)).repeat(d_inner, 1))
        self.D = nn.Parameter(torch.ones(d_inner))

    def forward(self, u):                                               # u: [B, T, D]
        T = u.shape[1]
        x, z = self.in_proj(u).chunk(2, dim=-1)
        x = F.silu(self.conv1d(F.pad(x.transpose(1, 2), (self.K - 1, 0)))).transpose(1, 2)
        dt, Bm, Cm = self.x_proj(x).split([self.R, self.N, self.N], dim=-1)
        delta = F.softplus(self.dt_proj(dt))
        A = -torch.exp(self.A_log.float())
        y = selective_scan(delta, A, Bm, Cm, x, self.chunk)
        y = y + x * self.D
        assert y.shape[1] == T
        return self.out_proj(y * F.silu(z))


class MambaBlock(nn.Module):
    def __init__(self, d_model, eps, **mixer_args):
        super().__init__()
        self.norm = RMSNorm(d_model, eps)
        self.mixer = MambaMixer(d_model, **mixer_args)


class Backbone(nn.Module):
    def __init__(self, vocab_size, d_model, n_layers, eps, **mixer_args):
        super().__init__()
        self.embeddings = nn.Embedding(vocab_size, d_model)
        self.layers = nn.ModuleList([MambaBlock(d_model, eps, **mixer_args) for _ in range(n_layers)])
        self.norm_f = RMSNorm(d_model, eps)


class MambaLM(nn.Module):
    """Tied-embedding Mamba-1 LM. hf_config() gives the matching HF config.json."""

    def __init__(self, vocab_size=264, d_model=192, n_layers=7, d_state=16, d_conv=4, expand=2,
                 dt_rank=None, eps=1e-5, chunk=32):
        super().__init__()
        self.dims = dict(vocab_size=vocab_size, d_model=d_model, n_layers=n_layers, d_state=d_state,
                         d_conv=d_conv, expand=expand, eps=eps,
                         dt_rank=dt_rank or math.ceil(d_model / 16))
        self.backbone = Backbone(vocab_size, d_model, n_layers, eps, d_inner=expand * d_model,
                                 d_state=d_state, d_conv=d_conv, dt_rank=self.dims["dt_rank"],
                                 chunk=chunk)
        nn.init.normal_(self.backbone.embeddings.weight, std=0.02)
        # GPT-2 style: scale residual-writing projections by 1/sqrt(n_layers) (Mamba does too).
        for layer in self.backbone.layers:
            with torch.no_grad():
                layer.mixer.out_proj.weight /= math.sqrt(n_layers)

    def forward(self, tokens):                                          # [B, T] -> [B, T, V]
        r = self.backbone.embeddings(tokens)
        for layer in self.backbone.layers:
            r = r + layer.mixer(layer.norm(r))
        return F.linear(self.backbone.norm_f(r), self.backbone.embeddings.weight)

    def hf_state_dict(self):
        """The HF checkpoint tensors; tied lm_head is left out as save_pretrained does."""
        return {k: v.detach().clone() for k, v in self.state_dict().items()}

    def hf_config(self, eos_token_id=256, bos_token_id=None):
        d = self.dims
        return {"architectures": ["MambaForCausalLM"], "model_type": "mamba",
                "vocab_size": d["vocab_size"], "hidden_size": d["d_model"],
                "intermediate_size": d["expand"] * d["d_model"], "state_size": d["d_state"],
                "num_hidden_layers": d["n_layers"], "conv_kernel": d["d_conv"],
                "expand": d["expand"], "time_step_rank": d["dt_rank"],
                "use_bias": False, "use_conv_bias": True, "hidden_act": "silu",
                "layer_norm_epsilon": d["eps"], "residual_in_fp32": True,
                "tie_word_embeddings": True, "eos_token_id": eos_token_id,
                "bos_token_id": bos_token_id, "pad_token_id": eos_token_id,
                "torch_dtype": "float32"}


@torch.no_grad()
def generate(model, prompt, n_new, temperature=0.8, seed=0, stop_token=256):
    """Sample n_new tokens after `prompt` with per-token state updates (MODELS.md 1.3).

    Used for the samples printed after training; O(1) work per token, like the engine.
    """
    g = torch.Generator().manual_seed(seed)
    bb = model.backbone
    state = []
    for layer in bb.layers:
        m = layer.mixer
        state.append([torch.zeros(m.E, m.K - 1), torch.zeros(m.E, m.N)])

    def step(tok):
        r = bb.embeddings.weight[tok]
        for layer, st in zip(bb.layers, state):
            m = layer.mixer
            x, z = m.in_proj(layer.norm(r)).chunk(2)
            w = m.conv1d.weight[:, 0]
            xc = F.silu((w[:, :-1] * st[0]).sum(1) + w[:, -1] * x + m.conv1d.bias)
            st[0] = torch.cat([st[0][:, 1:], x[:, None]], 1)
            dt, Bv, Cv = m.x_proj(xc).split([m.R, m.N, m.N])
            delta = F.softplus(m.dt_proj(dt))
            st[1] = torch.exp(delta[:, None] * -torch.exp(m.A_log)) * st[1] + (delta * xc)[:, None] * Bv
            y = st[1] @ Cv + m.D * xc
            r = r + m.out_proj(y * F.silu(z))
        return F.linear(bb.norm_f(r), bb.embeddings.weight)

    logits = None
    for tok in prompt:
        logits = step(tok)
    out = []
    for _ in range(n_new):
        probs = torch.softmax(logits[:stop_token + 1] / temperature, -1)   # never sample padding ids
        tok = int(torch.multinomial(probs, 1, generator=g))
        if tok == stop_token:
            break
        out.append(tok)
        logits = step(tok)
    return out
