"""Helpers of the mamba2 / gdn / mlp / moe / s4d parity tests: block dicts, random mixed-kind
models, and running the engine's logits tool and the float64 reference."""


import numpy as np

from weights.reference import logits as ref_logits
from weights.reference.random_blocks import hybrid_config, write_random_model
from engine_run import run_engine, tokens  # noqa: F401 (re-exported)

TOKENS = 256


def mamba1(**kw):
    b = dict(kind="mamba1", norm={"type": "rmsnorm", "eps": 1e-5}, d_inner=64, d_state=8,
             d_conv=4, dt_rank=4, in_proj_bias=False, out_proj_bias=False, conv_bias=True)
    b.update(kw)
    return b


def mamba2(**kw):
    b = dict(kind="mamba2", norm={"type": "rmsnorm", "eps": 1e-5}, n_heads=4, head_dim=16,
             d_state=12, n_groups=1, d_conv=4, in_proj_bias=False, out_proj_bias=False,
             conv_bias=True, dt_min=0.0, dt_max=None, gated_norm_eps=1e-5)
    b.update(kw)
    return b


def mlp(**kw):
    b = dict(kind="mlp", norm={"type": "rmsnorm", "eps": 1e-5}, d_ff=64, act="silu",
             gated=True, bias=False)
    b.update(kw)
    return b


def moe(**kw):
    b = dict(kind="moe", norm={"type": "rmsnorm_t5", "eps": 1e-6}, routing="top1_softmax",
             n_experts=6, d_ff=48, act="relu", gated=False, router_bias=False,
             expert_bias=False, capacity=None)
    b.update(kw)
    return b


def s4d(**kw):
    b = dict(kind="s4d", norm={"type": "layernorm", "eps": 1e-5}, channels=1, modes=16,
             state_layout="conj_half", output="none")
    b.update(kw)
    return b


def gdn(**kw):
    b = dict(kind="gdn", norm={"type": "rmsnorm", "eps": 1e-6}, n_k_heads=2, n_v_heads=4,
             head_k_dim=8, head_v_dim=8, d_conv=4, gated_norm_eps=1e-6)
    b.update(kw)
    return b


def make_model(tmp_path, blocks, seed, d_model=32, name="model", **kw):
    path = tmp_path / name
    write_random_model(path, hybrid_config(blocks, d_model=d_model, **kw), seed=seed)
    return path


def reference(model, toks, out):
    rc = ref_logits.main(["--model", str(model), "--tokens", ",".join(map(str, toks)),
                          "--out", str(out), "--float64"])
    assert rc == 0
    return np.load(out)


def check_step_vs_reference(tmp_path, binary, model, toks, tol=1e-4):
    """Token-by-token engine logits vs the float64 full-sequence reference."""
    expected = reference(model, toks, tmp_path / "ref.npy")
    got = run_engine(binary, model, toks, tmp_path / "step.npy", chunk=1)
    assert got.shape == expected.shape == (len(toks), 264)
    assert expected.std() > 0.1   # logits are spread out: the comparison means something
    err = float(np.abs(got - expected).max())
    assert err <= tol, f"max abs error {err}"
    return err


def check_chunked_vs_step(tmp_path, binary, model, toks, chunks=(7, 64), tol=1e-5,
                          stateful=True):
    """Chunked prefill gives token-by-token decode's logits and final state."""
    step = run_engine(binary, model, toks, tmp_path / "c1.npy", 1, tmp_path / "c1.state")
    sa = np.fromfile(tmp_path / "c1.state", dtype=np.float32)
    errs = {}
    for chunk in chunks:
        got = run_engine(binary, model, toks, tmp_path / f"c{chunk}.npy", chunk,
                         tmp_path / f"c{chunk}.state")
        errs[chunk] = float(np.abs(step - got).max())
        assert errs[chunk] <= tol, f"chunk {chunk}: max abs diff {errs[chunk]}"
        sb = np.fromfile(tmp_path / f"c{chunk}.state", dtype=np.float32)
        assert sa.size == sb.size
        if stateful:
            assert sa.size > 0 and np.abs(sa).max() > 0
            assert np.abs(sa - sb).max() <= tol
    return errs
