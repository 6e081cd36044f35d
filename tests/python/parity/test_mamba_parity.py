"""The C++ engine's O(1) decode step equals the PyTorch reference's full-sequence form.

Both run the same random canonical weights; the reference computes in float64 and
never uses a recurrent step, so agreement checks the engine's recurrence, its
chunked prefill and the packing of its state.
"""


import numpy as np
import pytest

from weights.reference import logits as ref_logits
from weights.reference.make_random_model import make_random_model
from engine_run import run_engine, tokens

SHAPES = {
    "tiny": dict(d_model=32, n_layers=2, d_inner=64, d_state=8, d_conv=4, dt_rank=4),
    "biases_untied": dict(d_model=48, n_layers=3, d_inner=96, d_state=16, d_conv=4, dt_rank=3,
                          in_proj_bias=True, out_proj_bias=True, tie_embeddings=False),
    "conv2_no_conv_bias": dict(d_model=24, n_layers=2, d_inner=72, d_state=4, d_conv=2,
                               dt_rank=2, conv_bias=False),
    # Jamba's mixer: RMSNorms over the dt, B and C slices of x_proj's output.
    "dt_bc_norm": dict(d_model=32, n_layers=2, d_inner=64, d_state=8, d_conv=4, dt_rank=3,
                       in_proj_bias=True, dt_bc_norm={"type": "rmsnorm", "eps": 1e-6}),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_step_by_step_logits_match_full_sequence_reference(tmp_path, engine_logits, shape):
    model = tmp_path / "model"
    make_random_model(model, seed=7, **SHAPES[shape])
    toks = tokens(64, seed=1)
    ref = tmp_path / "ref.npy"
    ref_logits.main(["--model", str(model), "--tokens", ",".join(map(str, toks)),
                     "--out", str(ref), "--float64"])
    expected = np.load(ref)
    got = run_engine(engine_logits, model, toks, tmp_path / "step.npy", chunk=1)
    assert got.shape == expected.shape == (64, 264)
    err = np.abs(got - expected).max()
    assert err <= 1e-4, f"{shape}: max abs error {err}"
    # The comparison means something only if logits are not all alike.
    assert expected.std() > 0.1


@pytest.mark.parametrize("chunk", [3, 16, 64])
def test_chunked_prefill_gives_the_state_of_token_by_token_decode(tmp_path, engine_logits, chunk):
    model = tmp_path / "model"
    make_random_model(model, seed=3, **SHAPES["biases_untied"])
    toks = tokens(64, seed=2)
    step = run_engine(engine_logits, model, toks, tmp_path / "a.npy", 1, tmp_path / "a.state")
    chunked = run_engine(engine_logits, model, toks, tmp_path / "b.npy", chunk,
                         tmp_path / "b.state")
    assert np.abs(step - chunked).max() <= 1e-5
    sa = np.fromfile(tmp_path / "a.state", dtype=np.float32)
    sb = np.fromfile(tmp_path / "b.state", dtype=np.float32)
    assert sa.size == sb.size > 0
    assert np.abs(sa).max() > 0  # the state really moved
    assert np.abs(sa - sb).max() <= 1e-5


def test_bf16_weights_load_and_stay_close(tmp_path, engine_logits):
    """A bf16 checkpoint is widened at load; its logits track the fp32 reference of
    the same (bf16-rounded) weights."""
    model = tmp_path / "model"
    make_random_model(model, seed=5, dtype="bf16", **SHAPES["tiny"])
    toks = tokens(32, seed=4)
    ref = tmp_path / "ref.npy"
    ref_logits.main(["--model", str(model), "--tokens", ",".join(map(str, toks)),
                     "--out", str(ref), "--float64"])
    got = run_engine(engine_logits, model, toks, tmp_path / "bf16.npy", chunk=5)
    assert np.abs(got - np.load(ref)).max() <= 1e-4


@pytest.mark.parametrize("chunk", [7, 64])
def test_dt_bc_norms_are_applied_in_chunked_prefill(tmp_path, engine_logits, chunk):
    """The normed mixer matches the reference under chunked prefill too, and the
    norms change the result (so neither side can be ignoring them)."""
    shape = SHAPES["dt_bc_norm"]
    normed, plain = tmp_path / "normed", tmp_path / "plain"
    make_random_model(normed, seed=9, **shape)
    make_random_model(plain, seed=9, **dict(shape, dt_bc_norm=None))
    toks = tokens(64, seed=5)
    ref = tmp_path / "ref.npy"
    ref_logits.main(["--model", str(normed), "--tokens", ",".join(map(str, toks)),
                     "--out", str(ref), "--float64"])
    expected = np.load(ref)
    got = run_engine(engine_logits, normed, toks, tmp_path / "normed.npy", chunk)
    assert np.abs(got - expected).max() <= 1e-4
    without = run_engine(engine_logits, plain, toks, tmp_path / "plain.npy", chunk)
    assert np.abs(without - expected).max() > 0.1
