"""Running transformers models from the Hugging Face parity tests."""

import torch


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
