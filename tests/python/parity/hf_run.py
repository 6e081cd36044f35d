"""Running transformers models from the Hugging Face parity tests, and the
check that the engine, running a model's conversion, gives what they give."""

import numpy as np
import torch

from engine_run import convert, engine_greedy, run_engine


@torch.no_grad()
def hf_greedy(model, prompt, n, cache=None):
    """n greedy tokens after `prompt` through the model's own KV / recurrent cache
    (past_key_values), stepped as generate() steps it (generate() itself cannot
    be imported with Debian's torch 1.13 on Python 3.11).

    cache: the empty cache to start from, for models that return none unless
    given one (Jamba's HybridMambaAttentionDynamicCache); None lets the model
    make its own.
    """
    position = torch.arange(len(prompt))
    out = model(torch.tensor([prompt]), past_key_values=cache, use_cache=True,
                cache_position=position)
    ids = [int(out.logits[0, -1].argmax())]
    while len(ids) < n:
        position = position[-1:] + 1
        out = model(torch.tensor([[ids[-1]]]), past_key_values=out.past_key_values,
                    use_cache=True, cache_position=position)
        ids.append(int(out.logits[0, -1].argmax()))
    return ids


@torch.no_grad()
def hf_recurrent_greedy(model, prompt, n):
    """n greedy tokens after `prompt` through the recurrent cache (cache_params)
    of transformers' Mamba family, stepped as its generate() steps it: the
    prefill's cache_position has conv_kernel entries, which is how the mixer
    tells a prefill from a decode step."""
    position = torch.arange(0, model.config.conv_kernel)
    out = model(torch.tensor([prompt]), use_cache=True, cache_position=position)
    ids = [int(out.logits[0, -1].argmax())]
    while len(ids) < n:
        position = position[-1:] + 1
        out = model(torch.tensor([[ids[-1]]]), cache_params=out.cache_params, use_cache=True,
                    cache_position=position)
        ids.append(int(out.logits[0, -1].argmax()))
    return ids


def assert_engine_matches_transformers(model, source, prompt, tmp_path, repo_root,
                                       engine_logits, engine_generate, cache=None,
                                       chunks=(32,)):
    """`model` saved with save_pretrained (safetensors) and converted with
    `--source source` and a cache of 4 sinks + 252 recent keys, which holds the
    prompt and 64 generated tokens, so nothing is evicted and the engine must
    equal transformers' full attention: logits over the prompt, prefilled in
    each of `chunks` tokens per step, within 1e-3 (fp32), and 64 greedy tokens
    identical to hf_greedy's (`cache` goes to it). Returns the largest logit
    difference."""
    src = tmp_path / "hf"
    model.save_pretrained(src, safe_serialization=True)
    out = tmp_path / "canonical"
    assert len(prompt) + 64 <= 4 + 252     # the premise: nothing is evicted
    convert(repo_root, source, src, out, "--sinks", "4", "--window", "252")

    with torch.no_grad():
        want = model(torch.tensor([prompt])).logits[0].numpy()
    assert want[-1].std() > 1.0  # logits are spread, so the comparison means something
    err = 0.0
    for chunk in chunks:
        got = run_engine(engine_logits, out, prompt, tmp_path / "logits.npy", chunk=chunk)
        assert np.abs(got[-1] - want[-1]).max() <= 1e-3, chunk
        err = max(err, np.abs(got - want).max())
        assert err <= 1e-3, f"chunk {chunk}: max |engine - transformers| {err:.2e}"

    want_ids = hf_greedy(model, prompt, 64, cache=cache)
    assert len(set(want_ids)) > 4  # not a degenerate repetition of one token
    assert engine_greedy(engine_generate, out, prompt, 64) == want_ids
    return err
