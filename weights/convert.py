"""Convert a checkpoint into a canonical model directory (MODELS.md section 6).

    python -m weights.convert --source SOURCE SRC OUT
        [--dtype f32|bf16|f16] [--byte-tokenizer | --tokenizer FILE]
        [--tokenizer-config FILE] [--name NAME] [--sinks S] [--window W]

SOURCE: hf-mamba, hf-mamba2, mamba-ssm, falcon-mamba, hf-llama, hf-jamba, hf-bamba,
hf-qwen3_5, hf-qwen3-next, hf-nemotron-h, hf-granite-moe-hybrid, hf-falcon-h1,
fairseq-seqboat.

--sinks / --window (hf-llama, hf-jamba, hf-bamba, hf-qwen3_5, hf-qwen3-next, hf-nemotron-h,
hf-granite-moe-hybrid, hf-falcon-h1) set the attention-sink cache of
every attention block: S pinned first tokens plus the W most recent ones
(MODELS.md 3.4). Defaults: hf-llama 4 and 2044 (a 2048-key cache), hf-jamba, hf-bamba,
hf-nemotron-h, hf-granite-moe-hybrid and hf-falcon-h1 4 and 4092 (a 4096-key cache),
hf-qwen3_5 and hf-qwen3-next 4 and 8188, the window shortened when the model's
max_position_embeddings is smaller; see weights/converters/hf_llama.py, hf_jamba.py,
hf_bamba.py, hf_qwen3_5.py, hf_nemotron_h.py, hf_granite_moe_hybrid.py and hf_falcon_h1.py.
For fairseq-seqboat SRC is the checkpoint .pt file (or its directory), and
the dict.txt beside it becomes tokenizer.json; see
weights/converters/fairseq_seqboat.py.

The tokenizer: --byte-tokenizer, else --tokenizer FILE, else SRC/tokenizer.json,
else what the source keeps beside its weights (fairseq's dict.txt).

The chat template: --tokenizer-config FILE, else SRC/tokenizer_config.json, else the
tokenizer_config.json beside --tokenizer FILE (none with --byte-tokenizer, whose tokens are
not the source's). Its chat_template (a string, or the list of named templates; a
chat_template.jinja beside it stands in for a missing one) and special-token strings
(bos_token, eos_token, ... as strings) go to OUT/tokenizer_config.json, which the server's
/v1/chat/completions renders; a model without one answers chat requests with an error.

The checkpoint is streamed: only the source's headers (and pickles) are read up
front, and each output tensor is made from its source tensors, written and
dropped in turn, so a checkpoint larger than memory converts in the memory of a
few tensors (a .bin in torch's legacy pre-1.6 format, read whole, excepted). On
a terminal, stderr shows the tensors and bytes written so far.

Every missing, unknown or mis-shaped tensor is an error that names it (exit 1,
message on stderr). A checkpoint that converts but will not run exactly as
trained gets a warning on stderr ("convert: warning: ..."). OUT is written to a
temporary directory and renamed only when complete; an existing OUT is never
overwritten.
"""

import argparse
import json
import os
import sys
import warnings

from weights import canonical, safetensors_io
from weights.converters import (fairseq_seqboat, hf_bamba, hf_falcon_h1, hf_falcon_mamba,
                                hf_granite_moe_hybrid, hf_jamba, hf_llama, hf_mamba, hf_mamba2,
                                hf_nemotron_h, hf_qwen3_5, hf_qwen3_next, mamba_ssm, sink_cache)
from weights.converters.convert_error import ConvertError, ConvertWarning

CONVERTER_VERSION = "seqboat-convert@1"
SOURCES = {hf_mamba.NAME: hf_mamba, hf_mamba2.NAME: hf_mamba2, mamba_ssm.NAME: mamba_ssm,
           hf_falcon_mamba.NAME: hf_falcon_mamba, hf_llama.NAME: hf_llama,
           hf_jamba.NAME: hf_jamba, hf_bamba.NAME: hf_bamba, hf_qwen3_5.NAME: hf_qwen3_5,
           hf_qwen3_next.NAME: hf_qwen3_next, hf_nemotron_h.NAME: hf_nemotron_h,
           hf_granite_moe_hybrid.NAME: hf_granite_moe_hybrid, hf_falcon_h1.NAME: hf_falcon_h1,
           fairseq_seqboat.NAME: fairseq_seqboat}


# What the server reads of a tokenizer_config.json (server/chat_template.cc).
SPECIAL_TOKENS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token",
                  "mask_token")


def _token_string(value, where):
    """A special token as tokenizer_config.json writes it: a string or an AddedToken object."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    raise ConvertError(f"{where} must be a string or an object with a string \"content\", "
                       f"got {json.dumps(value)[:60]}")


def chat_config(path):
    """The chat template and special-token strings of the tokenizer_config.json at `path`:
    the subset the server reads, special tokens as strings. None when `path` does not exist."""
    if not os.path.isfile(path):
        return None
    try:
        with open(path) as f:
            config = json.load(f)
    except json.JSONDecodeError as e:
        raise ConvertError(f"{path}: not JSON: {e}") from e
    if not isinstance(config, dict):
        raise ConvertError(f"{path}: must hold a JSON object")
    out = {}
    template = config.get("chat_template")
    beside = os.path.join(os.path.dirname(path), "chat_template.jinja")
    if template is None and os.path.isfile(beside):
        with open(beside) as f:
            template = f.read()
    if template is not None:
        named = isinstance(template, list) and all(
            isinstance(t, dict) and isinstance(t.get("name"), str)
            and isinstance(t.get("template"), str) for t in template)
        if not isinstance(template, str) and not named:
            raise ConvertError(f"{path}: chat_template must be a string or a list of "
                               "{\"name\", \"template\"} objects")
        out["chat_template"] = template
    for key in SPECIAL_TOKENS:
        token = _token_string(config.get(key), f"{path}: {key}")
        if token is not None:
            out[key] = token
    extra = config.get("additional_special_tokens")
    if extra is not None:
        if not isinstance(extra, list):
            raise ConvertError(f"{path}: additional_special_tokens must be a list")
        out["additional_special_tokens"] = [
            _token_string(t, f"{path}: additional_special_tokens[{i}]") for i, t in enumerate(extra)]
    return out


def _tokenizer_config_path(src, byte_tokenizer, tokenizer, tokenizer_config):
    if tokenizer_config:
        if not os.path.isfile(tokenizer_config):
            raise ConvertError(f"--tokenizer-config {tokenizer_config} does not exist")
        return tokenizer_config
    if byte_tokenizer:
        return None
    src_dir = src if os.path.isdir(src) else os.path.dirname(src)
    for d in (src_dir, os.path.dirname(tokenizer) if tokenizer else None):
        if d is not None and os.path.isfile(os.path.join(d, "tokenizer_config.json")):
            return os.path.join(d, "tokenizer_config.json")
    return None


def _progress_bar(tensors, stream):
    """(on_tensor callback, close) drawing tensors and bytes written on `stream`;
    (None, None) without tqdm, so that a python lacking the venv's extras still
    converts, silently."""
    try:
        import tqdm         # pinned in weights/requirements.txt; only needed on a terminal
    except ImportError:
        return None, None
    total = len(tensors)
    # desc carries the tensor count: tqdm counts one unit, and bytes tell the time left.
    bar = tqdm.tqdm(total=safetensors_io.total_bytes(tensors), unit="B", unit_scale=True,
                    unit_divisor=1024, file=stream, dynamic_ncols=True, desc=f"0/{total}",
                    bar_format="convert: {desc} tensors, {n_fmt}B/{total_fmt}B {bar} "
                               "[{elapsed}<{remaining}, {rate_fmt}]")
    done = [0]

    def on_tensor(name, nbytes):
        done[0] += 1
        bar.set_description_str(f"{done[0]}/{total}", refresh=False)
        bar.update(nbytes)
    return on_tensor, bar.close


def convert(source, src, out, dtype="f32", byte_tokenizer=False, tokenizer=None, name=None,
            tokenizer_config=None, progress=None, **serving):
    """Convert SRC into OUT; raises ConvertError / CanonicalError / SafetensorsError / OSError.

    `serving` holds the source's serving options (e.g. sinks=, window= for hf-llama,
    hf-jamba and hf-bamba);
    None values mean the source's default. `progress`: a stream to draw a progress
    bar on, or None.
    """
    if source not in SOURCES:
        raise ConvertError(f"unknown --source {source!r}; one of {sorted(SOURCES)}")
    module = SOURCES[source]
    serving = {k: v for k, v in serving.items() if v is not None}
    allowed = getattr(module, "SERVING_OPTIONS", ())
    for key in sorted(serving):
        if key not in allowed:
            raise ConvertError(f"--{key} does not apply to --source {source}")
    if os.path.exists(out):
        raise ConvertError(f"output {out} already exists")
    config, tensors = module.convert(src, canonical.DTYPES[dtype], **serving)
    # A head the source ships but the engine does not run (config "mtp") goes
    # to its own file, verbatim.
    kept = {}
    if "mtp" in config:
        kept[config["mtp"]["file"]] = {n: tensors.pop(n) for n in sorted(tensors)
                                       if n.startswith("mtp.")}
    if name:
        config["name"] = name
    tok_path, tok_json = None, None
    if byte_tokenizer:
        if config["vocab_size"] <= canonical.BYTE_EOS:
            raise ConvertError(f"vocab_size {config['vocab_size']} too small for the byte tokenizer")
        tok_json = canonical.byte_tokenizer()
        config["eos_token_id"], config["bos_token_id"] = canonical.BYTE_EOS, None
    elif tokenizer or os.path.isfile(os.path.join(src, "tokenizer.json")):
        tok_path = tokenizer or os.path.join(src, "tokenizer.json")
        with open(tok_path) as f:
            json.load(f)                     # fail now, not in the engine, if it is not JSON
    elif hasattr(module, "default_tokenizer") and \
            (tok_json := module.default_tokenizer(src, config)) is not None:
        pass
    else:
        beside = " or dict.txt beside it" if hasattr(module, "default_tokenizer") else ""
        raise ConvertError(f"{src} has no tokenizer.json{beside}; pass --byte-tokenizer or "
                           "--tokenizer FILE")
    chat_path = _tokenizer_config_path(src, byte_tokenizer, tokenizer, tokenizer_config)
    chat = chat_config(chat_path) if chat_path else None
    extra = {}
    if chat is not None:
        extra["tokenizer_config.json"] = json.dumps(chat, indent=2, ensure_ascii=False) + "\n"
    meta = {"source": os.path.abspath(src), "converter": f"{CONVERTER_VERSION}/{source}"}
    on_tensor, close = _progress_bar(tensors, progress) if progress else (None, None)
    try:
        canonical.write_model_dir(out, config, tensors, meta, tokenizer=tok_json,
                                  tokenizer_path=tok_path, extra_files=extra, on_tensor=on_tensor,
                                  kept_tensors=kept)
    finally:
        if close:
            close()
    return config


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", required=True, choices=sorted(SOURCES))
    ap.add_argument("src", help="source checkpoint directory (fairseq-seqboat: the .pt file)")
    ap.add_argument("out", help="canonical output directory (must not exist)")
    ap.add_argument("--dtype", choices=sorted(canonical.DTYPES), default="f32",
                    help="dtype of the matrices (A, D, dt_proj.bias are always f32)")
    tok = ap.add_mutually_exclusive_group()
    tok.add_argument("--byte-tokenizer", action="store_true",
                     help="write the byte-level tokenizer.json (ids 0..255 bytes, 256 EOS)")
    tok.add_argument("--tokenizer", help="tokenizer.json to copy (default: SRC/tokenizer.json, or "
                     "the dict.txt beside a fairseq checkpoint)")
    ap.add_argument("--tokenizer-config", help="tokenizer_config.json whose chat_template and "
                    "special-token strings to keep (default: SRC/tokenizer_config.json, or the one "
                    "beside --tokenizer; none with --byte-tokenizer)")
    ap.add_argument("--name", help="model name for config.json (default: SRC's basename)")
    ap.add_argument("--sinks", type=int, help="attention sources (hf-llama, ...): attention sinks "
                    f"kept per layer (default {sink_cache.DEFAULT_SINKS})")
    ap.add_argument("--window", type=int, help="attention sources: recent tokens "
                    f"kept per layer (default {hf_llama.DEFAULT_WINDOW} for hf-llama, "
                    f"{hf_jamba.DEFAULT_WINDOW} for hf-jamba, hf-bamba, hf-nemotron-h and "
                    "hf-granite-moe-hybrid, "
                    f"{hf_qwen3_5.DEFAULT_WINDOW} for hf-qwen3_5, capped by "
                    "max_position_embeddings)")
    a = ap.parse_args(argv)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvertWarning)
            # A bar only where someone watches: logs and pipes get the summary line alone.
            cfg = convert(a.source, a.src, a.out, a.dtype, a.byte_tokenizer, a.tokenizer,
                          a.name, a.tokenizer_config, sys.stderr if sys.stderr.isatty() else None,
                          sinks=a.sinks, window=a.window)
    except (ConvertError, canonical.CanonicalError, safetensors_io.SafetensorsError,
            OSError, json.JSONDecodeError) as e:
        print(f"convert: error: {e}", file=sys.stderr)
        return 1
    for w in caught:
        if issubclass(w.category, ConvertWarning):
            print(f"convert: warning: {w.message}", file=sys.stderr)
        else:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    kinds = {}
    for b in cfg["blocks"]:
        kinds[b["kind"]] = kinds.get(b["kind"], 0) + 1
    blocks = ", ".join(f"{n} {k}" for k, n in kinds.items())
    with_template = False
    if os.path.isfile(os.path.join(a.out, "tokenizer_config.json")):
        with open(os.path.join(a.out, "tokenizer_config.json")) as f:
            with_template = "chat_template" in json.load(f)
    template = "a chat template" if with_template else "no chat template"
    print(f"convert: wrote {a.out} ({blocks} blocks, d_model {cfg['d_model']}, "
          f"vocab {cfg['vocab_size']}, {a.dtype}, {template})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
