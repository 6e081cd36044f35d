"""A stack holding every block kind (tests/data/tiny_hybrid: mamba1, seqboat,
attention with sinks, top-1 moe, s4d, mlp, mamba2) decodes step by step to the float64
full-sequence reference, and chunked prefill equals token-by-token decode."""


import numpy as np
import pytest

from engine_run import run_engine
from weights.reference import logits as ref_logits

T = 256


@pytest.fixture(scope="module")
def tokens():
    rng = np.random.default_rng(17)
    return [int(t) for t in rng.integers(0, 257, size=T)]


@pytest.fixture(scope="module")
def reference(tmp_path_factory, repo_root, tokens):
    out = tmp_path_factory.mktemp("ref") / "ref.npy"
    ref_logits.main(["--model", str(repo_root / "tests/data/tiny_hybrid"),
                     "--tokens", ",".join(map(str, tokens)), "--out", str(out), "--float64"])
    return np.load(out)


def test_every_kind_in_one_stack_matches_the_reference(tmp_path, repo_root, engine_logits,
                                                       tokens, reference):
    kinds = [b["kind"] for b in __import__("json").loads(
        (repo_root / "tests/data/tiny_hybrid/config.json").read_text())["blocks"]]
    assert {"mamba1", "seqboat", "attention", "moe", "s4d", "mlp", "mamba2"} <= set(kinds)
    got = run_engine(engine_logits, repo_root / "tests/data/tiny_hybrid", tokens, tmp_path / "a.npy", 1)
    assert reference.std() > 0.5
    assert np.abs(got - reference).max() <= 1e-4


@pytest.mark.parametrize("chunk", [7, 64, 256])
def test_chunked_prefill_equals_decode(tmp_path, repo_root, engine_logits, tokens, chunk):
    model = repo_root / "tests/data/tiny_hybrid"
    step = run_engine(engine_logits, model, tokens, tmp_path / "s.npy", 1)
    chunked = run_engine(engine_logits, model, tokens, tmp_path / "c.npy", chunk)
    assert np.abs(step - chunked).max() <= 1e-5
