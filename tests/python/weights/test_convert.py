import json
import os

import pytest
import torch

from weights import canonical, convert, safetensors_io
from weights.reference.model import ReferenceModel

import hf_fixture as fx
from convert_cli import assert_clean_failure, edit_tensors, run, run_process

TOKENS = [256, 84, 104, 101, 32, 113, 117, 105, 99, 107, 10, 0, 255, 200, 7, 256, 65]


@pytest.mark.parametrize("case", [
    dict(),                                            # released-model shape: no biases, tied, lm_head absent
    dict(lm_head="copy"),                              # tied duplicate present in the file: dropped
    dict(cfg=dict(use_bias=True, R=5)),                # projection biases, explicit rank
    dict(cfg=dict(tie=False), lm_head="own"),          # untied head
    dict(cfg=dict(conv_bias=False, K=3, eps=1e-6)),
])
def test_hf_convert_matches_source_forward(tmp_path, capsys, case):
    cfg = fx.hf_config(**case.get("cfg", {}))
    src_t = fx.write_hf(tmp_path / "hf", cfg, lm_head=case.get("lm_head"))
    out = tmp_path / "out"
    code, err = run(["--source", "hf-mamba", str(tmp_path / "hf"), str(out), "--byte-tokenizer"], capsys)
    assert code == 0, err
    tied = cfg.get("tie_word_embeddings", True)
    ref = ReferenceModel.load(out, torch.float64).forward(TOKENS)
    want = fx.source_forward(src_t, TOKENS, cfg["layer_norm_epsilon"], tie=tied)
    assert ref.std() > 0.5
    assert torch.allclose(ref, want, rtol=0, atol=1e-9), (ref - want).abs().max()

    conf = json.loads((out / "config.json").read_text())
    assert conf["format"] == "seqboat-canonical" and conf["tie_embeddings"] == tied
    assert conf["eos_token_id"] == 256 and conf["bos_token_id"] is None
    assert conf["blocks"][0]["dt_rank"] == (2 if cfg["time_step_rank"] == "auto" else 5)
    assert json.loads((out / "tokenizer.json").read_text()) == canonical.byte_tokenizer()
    t, meta = safetensors_io.load_file(out / "model.safetensors")
    assert ("lm_head.weight" in t) == (not tied)
    assert meta["converter"].startswith("seqboat-convert@") and meta["source"].endswith("hf")
    assert torch.equal(t["blocks.1.A"], -torch.exp(src_t["backbone.layers.1.mixer.A_log"]))


@pytest.mark.parametrize("dtype, torch_dtype, tol", [("bf16", torch.bfloat16, 0.5), ("f16", torch.float16, 0.05)])
def test_hf_convert_half_dtypes(tmp_path, capsys, dtype, torch_dtype, tol):
    cfg = fx.hf_config()
    src_t = fx.write_hf(tmp_path / "hf", cfg)
    out = tmp_path / "out"
    code, err = run(["--source", "hf-mamba", str(tmp_path / "hf"), str(out), "--byte-tokenizer",
                     "--dtype", dtype], capsys)
    assert code == 0, err
    t, _ = safetensors_io.load_file(out / "model.safetensors")
    for name, v in t.items():
        fp32 = name.endswith(("dt_proj.bias", ".A", ".D"))
        assert v.dtype == (torch.float32 if fp32 else torch_dtype), name
    # A, D and the dt bias are bit-exact; matrices only rounded.
    assert torch.equal(t["blocks.0.D"], src_t["backbone.layers.0.mixer.D"])
    assert torch.equal(t["blocks.0.dt_proj.bias"], src_t["backbone.layers.0.mixer.dt_proj.bias"])
    ref = ReferenceModel.load(out, torch.float64).forward(TOKENS)
    want = fx.source_forward(src_t, TOKENS, cfg["layer_norm_epsilon"])
    assert (ref - want).abs().max() < tol


def test_hf_tokenizer_copied(tmp_path, capsys):
    tok = {"version": "1.0", "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}}
    fx.write_hf(tmp_path / "hf", fx.hf_config(), tokenizer=tok)
    code, err = run(["--source", "hf-mamba", str(tmp_path / "hf"), str(tmp_path / "out")], capsys)
    assert code == 0, err
    assert json.loads((tmp_path / "out" / "tokenizer.json").read_text()) == tok
    conf = json.loads((tmp_path / "out" / "config.json").read_text())
    assert conf["eos_token_id"] == 0                     # from the HF config


def test_hf_sharded_checkpoint(tmp_path, capsys):
    src = tmp_path / "hf"
    t = fx.write_hf(src, fx.hf_config())
    os.remove(src / "model.safetensors")
    names = sorted(t)
    shards = {"model-00001-of-00002.safetensors": names[:7], "model-00002-of-00002.safetensors": names[7:]}
    weight_map = {}
    for shard, keys in shards.items():
        safetensors_io.save_file({k: t[k] for k in keys}, src / shard)
        weight_map.update({k: shard for k in keys})
    (src / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    code, err = run(["--source", "hf-mamba", str(src), str(tmp_path / "out"), "--byte-tokenizer"], capsys)
    assert code == 0, err
    ref = ReferenceModel.load(tmp_path / "out", torch.float64).forward(TOKENS)
    assert torch.allclose(ref, fx.source_forward(t, TOKENS, 1e-5), rtol=0, atol=1e-9)


def test_mamba_ssm_convert(tmp_path, capsys):
    cfg = {"d_model": 24, "n_layer": 3, "vocab_size": 259, "ssm_cfg": {"d_state": 5, "dt_min": 0.01},
           "rms_norm": True, "residual_in_fp32": True, "fused_add_norm": True,
           "pad_vocab_size_multiple": 8}
    src_t = fx.write_mamba_ssm(tmp_path / "ssm", cfg)
    assert src_t["backbone.embedding.weight"].shape == (264, 24)       # padded up
    out = tmp_path / "out"
    code, err = run(["--source", "mamba-ssm", str(tmp_path / "ssm"), str(out), "--byte-tokenizer"], capsys)
    assert code == 0, err
    conf = json.loads((out / "config.json").read_text())
    assert conf["vocab_size"] == 264 and conf["blocks"][0]["d_state"] == 5
    assert conf["blocks"][0]["d_inner"] == 48 and len(conf["blocks"]) == 3
    ref = ReferenceModel.load(out, torch.float64).forward(TOKENS)
    want = fx.source_forward(src_t, TOKENS, 1e-5, embed_name="backbone.embedding.weight")
    assert torch.allclose(ref, want, rtol=0, atol=1e-9)


def _hf_src(tmp_path, **kw):
    cfg = fx.hf_config(**kw)
    fx.write_hf(tmp_path / "hf", cfg)
    return tmp_path / "hf", cfg


@pytest.mark.parametrize("corrupt, needles", [
    (lambda t: t.pop("backbone.layers.1.mixer.x_proj.weight"),
     ["missing tensor", "backbone.layers.1.mixer.x_proj.weight"]),
    (lambda t: t.update({"backbone.layers.0.mixer.A_log": torch.zeros(48, 7)}),
     ["backbone.layers.0.mixer.A_log", "[48, 7]", "expected [48, 6]"]),
    (lambda t: t.update({"backbone.layers.0.mixer.extra": torch.zeros(3)}),
     ["unknown tensor", "backbone.layers.0.mixer.extra"]),
    (lambda t: t.update({"backbone.layers.2.norm.weight": torch.zeros(24)}),   # one layer too many
     ["unknown tensor", "backbone.layers.2.norm.weight"]),
    (lambda t: t.update({"backbone.layers.0.mixer.in_proj.bias": torch.zeros(96)}),  # use_bias false
     ["unknown tensor", "in_proj.bias"]),
    (lambda t: t.update({"lm_head.weight": torch.zeros(264, 24)}),
     ["lm_head.weight", "differs from the embedding"]),
])
def test_hf_bad_tensors(tmp_path, capsys, corrupt, needles):
    src, _ = _hf_src(tmp_path)
    edit_tensors(src, corrupt)
    out = tmp_path / "out"
    code, err = run(["--source", "hf-mamba", str(src), str(out), "--byte-tokenizer"], capsys)
    assert_clean_failure(out, code, err, *needles)


def test_hf_untied_without_head(tmp_path, capsys):
    src, _ = _hf_src(tmp_path, tie=False)
    out = tmp_path / "out"
    code, err = run(["--source", "hf-mamba", str(src), str(out), "--byte-tokenizer"], capsys)
    assert_clean_failure(out, code, err, "missing tensor 'lm_head.weight'")


def test_hf_use_bias_default_is_true(tmp_path, capsys):
    """A config without use_bias means the HF default (true): bias tensors are then required."""
    src, cfg = _hf_src(tmp_path)
    del cfg["use_bias"]
    (src / "config.json").write_text(json.dumps(cfg))
    out = tmp_path / "out"
    code, err = run(["--source", "hf-mamba", str(src), str(out), "--byte-tokenizer"], capsys)
    assert_clean_failure(out, code, err, "missing tensor", "in_proj.bias")


def test_hf_truncated_safetensors(tmp_path, capsys):
    src, _ = _hf_src(tmp_path)
    blob = (src / "model.safetensors").read_bytes()
    (src / "model.safetensors").write_bytes(blob[:len(blob) - 100])
    out = tmp_path / "out"
    code, err = run(["--source", "hf-mamba", str(src), str(out), "--byte-tokenizer"], capsys)
    assert_clean_failure(out, code, err, "truncated")


@pytest.mark.parametrize("edit, needle", [
    (dict(model_type="llama", architectures=["LlamaForCausalLM"]), "unknown architecture"),
    (dict(architectures=["Mamba2ForCausalLM"]), "unknown architecture"),
    (dict(hidden_act="gelu"), "hidden_act"),
    (dict(state_size=0), "state_size"),
])
def test_hf_bad_config(tmp_path, capsys, edit, needle):
    src, cfg = _hf_src(tmp_path)
    cfg.update(edit)
    (src / "config.json").write_text(json.dumps(cfg))
    out = tmp_path / "out"
    code, err = run(["--source", "hf-mamba", str(src), str(out), "--byte-tokenizer"], capsys)
    assert_clean_failure(out, code, err, needle)


@pytest.mark.parametrize("edit, needle", [
    ({"ssm_cfg": {"layer": "Mamba3"}}, "Mamba3"),
    ({"d_intermediate": 64}, "d_intermediate"),
    ({"attn_layer_idx": [1]}, "attn_layer_idx"),
    ({"ssm_cfg": {"headdim": 8}}, "unknown ssm_cfg"),
])
def test_mamba_ssm_unsupported(tmp_path, capsys, edit, needle):
    cfg = {"d_model": 24, "n_layer": 2, "vocab_size": 264, "ssm_cfg": {}}
    fx.write_mamba_ssm(tmp_path / "ssm", cfg)
    cfg.update(edit)
    (tmp_path / "ssm" / "config.json").write_text(json.dumps(cfg))
    out = tmp_path / "out"
    code, err = run(["--source", "mamba-ssm", str(tmp_path / "ssm"), str(out), "--byte-tokenizer"], capsys)
    assert_clean_failure(out, code, err, needle)


def test_mamba_ssm_missing_embedding(tmp_path, capsys):
    fx.write_mamba_ssm(tmp_path / "ssm", {"d_model": 24, "n_layer": 2, "vocab_size": 264})
    t = torch.load(tmp_path / "ssm" / "pytorch_model.bin")
    t["backbone.embeddings.weight"] = t.pop("backbone.embedding.weight")   # HF name in an ssm file
    torch.save(t, tmp_path / "ssm" / "pytorch_model.bin")
    out = tmp_path / "out"
    code, err = run(["--source", "mamba-ssm", str(tmp_path / "ssm"), str(out), "--byte-tokenizer"], capsys)
    assert_clean_failure(out, code, err, "missing tensor 'backbone.embedding.weight'")


def test_mamba_ssm_without_weights_file(tmp_path, capsys):
    fx.write_mamba_ssm(tmp_path / "ssm", {"d_model": 24, "n_layer": 2, "vocab_size": 264})
    os.remove(tmp_path / "ssm" / "pytorch_model.bin")
    out = tmp_path / "out"
    code, err = run(["--source", "mamba-ssm", str(tmp_path / "ssm"), str(out), "--byte-tokenizer"], capsys)
    assert_clean_failure(out, code, err, "pytorch_model.bin")


def test_no_tokenizer_and_existing_out(tmp_path, capsys):
    src, _ = _hf_src(tmp_path)
    out = tmp_path / "out"
    code, err = run(["--source", "hf-mamba", str(src), str(out)], capsys)
    assert_clean_failure(out, code, err, "--byte-tokenizer")
    out.mkdir()
    (out / "keep").write_text("x")
    code, err = run(["--source", "hf-mamba", str(src), str(out), "--byte-tokenizer"], capsys)
    assert code != 0 and "already exists" in err
    assert os.listdir(out) == ["keep"]


def test_cli_subprocess(tmp_path):
    src, _ = _hf_src(tmp_path)
    ok = run_process(["--source", "hf-mamba", str(src), str(tmp_path / "out"), "--byte-tokenizer",
                      "--name", "m"])
    assert ok.returncode == 0, ok.stderr
    assert json.loads((tmp_path / "out" / "config.json").read_text())["name"] == "m"
    bad = run_process(["--source", "mamba-ssm", str(src), str(tmp_path / "out2"), "--byte-tokenizer"])
    assert bad.returncode == 1 and "convert: error:" in bad.stderr and "unknown architecture" in bad.stderr
    assert not (tmp_path / "out2").exists()


def test_hf_eps_default_is_mamba_config_default(tmp_path, capsys):
    src, cfg = _hf_src(tmp_path)
    del cfg["layer_norm_epsilon"]
    (src / "config.json").write_text(json.dumps(cfg))
    code, err = run(["--source", "hf-mamba", str(src), str(tmp_path / "out"), "--byte-tokenizer"], capsys)
    assert code == 0, err
    conf = json.loads((tmp_path / "out" / "config.json").read_text())
    assert conf["final_norm"]["eps"] == 1e-5 and conf["blocks"][1]["norm"]["eps"] == 1e-5


# ------------------------------------------------- chat template (tokenizer_config.json)

CHAT_TEMPLATE = ("{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + "
                 "'<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}"
                 "{{ '<|im_start|>assistant\\n' }}{% endif %}")
HF_TOKENIZER = {"version": "1.0", "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}}


def run_out(argv, capsys):
    """convert.main(argv); returns (exit code, stdout, stderr)."""
    code = convert.main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def write_tokenizer_config(directory, **fields):
    config = {"model_max_length": 2048, "added_tokens_decoder": {"0": {"content": "a"}},
              "tokenizer_class": "PreTrainedTokenizerFast", **fields}
    (directory / "tokenizer_config.json").write_text(json.dumps(config))


def test_chat_template_and_special_tokens_are_kept(tmp_path, capsys):
    fx.write_hf(tmp_path / "hf", fx.hf_config(), tokenizer=HF_TOKENIZER)
    write_tokenizer_config(
        tmp_path / "hf", chat_template=CHAT_TEMPLATE,
        bos_token={"__type": "AddedToken", "content": "<s>", "lstrip": False},
        eos_token="<|im_end|>", unk_token=None, pad_token="<pad>",
        additional_special_tokens=["<|im_start|>", {"content": "<|im_end|>"}])
    code, out, err = run_out(["--source", "hf-mamba", str(tmp_path / "hf"),
                              str(tmp_path / "out")], capsys)
    assert code == 0, err
    # Only what the server reads, special tokens as strings.
    assert json.loads((tmp_path / "out" / "tokenizer_config.json").read_text()) == {
        "chat_template": CHAT_TEMPLATE, "bos_token": "<s>", "eos_token": "<|im_end|>",
        "pad_token": "<pad>", "additional_special_tokens": ["<|im_start|>", "<|im_end|>"]}
    assert "a chat template)" in out


def test_named_chat_templates_are_kept_as_a_list(tmp_path, capsys):
    named = [{"name": "default", "template": CHAT_TEMPLATE}, {"name": "tool_use", "template": "x"}]
    fx.write_hf(tmp_path / "hf", fx.hf_config(), tokenizer=HF_TOKENIZER)
    write_tokenizer_config(tmp_path / "hf", chat_template=named, eos_token="</s>")
    code, err = run(["--source", "hf-mamba", str(tmp_path / "hf"), str(tmp_path / "out")], capsys)
    assert code == 0, err
    out = json.loads((tmp_path / "out" / "tokenizer_config.json").read_text())
    assert out == {"chat_template": named, "eos_token": "</s>"}


def test_chat_template_jinja_stands_in_for_a_missing_one(tmp_path, capsys):
    fx.write_hf(tmp_path / "hf", fx.hf_config(), tokenizer=HF_TOKENIZER)
    write_tokenizer_config(tmp_path / "hf", eos_token="</s>")
    (tmp_path / "hf" / "chat_template.jinja").write_text(CHAT_TEMPLATE)
    code, err = run(["--source", "hf-mamba", str(tmp_path / "hf"), str(tmp_path / "out")], capsys)
    assert code == 0, err
    out = json.loads((tmp_path / "out" / "tokenizer_config.json").read_text())
    assert out == {"chat_template": CHAT_TEMPLATE, "eos_token": "</s>"}


def test_no_tokenizer_config_no_chat_template(tmp_path, capsys):
    fx.write_hf(tmp_path / "hf", fx.hf_config(), tokenizer=HF_TOKENIZER)
    code, out, err = run_out(["--source", "hf-mamba", str(tmp_path / "hf"),
                              str(tmp_path / "out")], capsys)
    assert code == 0, err
    assert not (tmp_path / "out" / "tokenizer_config.json").exists()
    assert "no chat template)" in out


def test_byte_tokenizer_takes_a_chat_template_only_when_given(tmp_path, capsys):
    fx.write_hf(tmp_path / "hf", fx.hf_config())
    write_tokenizer_config(tmp_path / "hf", chat_template="{{ 'source' }}", eos_token="</s>")
    # The source's special tokens are not the byte tokenizer's: not copied.
    code, err = run(["--source", "hf-mamba", str(tmp_path / "hf"), str(tmp_path / "out"),
                     "--byte-tokenizer"], capsys)
    assert code == 0, err
    assert not (tmp_path / "out" / "tokenizer_config.json").exists()
    given = tmp_path / "given.json"
    given.write_text(json.dumps({"chat_template": CHAT_TEMPLATE}))
    code, err = run(["--source", "hf-mamba", str(tmp_path / "hf"), str(tmp_path / "out2"),
                     "--byte-tokenizer", "--tokenizer-config", str(given)], capsys)
    assert code == 0, err
    assert json.loads((tmp_path / "out2" / "tokenizer_config.json").read_text()) == {
        "chat_template": CHAT_TEMPLATE}


def test_tokenizer_config_beside_the_given_tokenizer(tmp_path, capsys):
    fx.write_hf(tmp_path / "hf", fx.hf_config())
    (tmp_path / "tok").mkdir()
    (tmp_path / "tok" / "tokenizer.json").write_text(json.dumps(HF_TOKENIZER))
    write_tokenizer_config(tmp_path / "tok", chat_template=CHAT_TEMPLATE)
    code, err = run(["--source", "hf-mamba", str(tmp_path / "hf"), str(tmp_path / "out"),
                     "--tokenizer", str(tmp_path / "tok" / "tokenizer.json")], capsys)
    assert code == 0, err
    assert json.loads((tmp_path / "out" / "tokenizer_config.json").read_text()) == {
        "chat_template": CHAT_TEMPLATE}


@pytest.mark.parametrize("fields, message", [
    (dict(chat_template=3), "chat_template must be a string or a list"),
    (dict(chat_template=[{"name": "default"}]), "chat_template must be a string or a list"),
    (dict(chat_template="x", bos_token=5), "bos_token must be a string or an object"),
    (dict(chat_template="x", additional_special_tokens="<a>"),
     "additional_special_tokens must be a list"),
])
def test_bad_tokenizer_config_fails_cleanly(tmp_path, capsys, fields, message):
    fx.write_hf(tmp_path / "hf", fx.hf_config(), tokenizer=HF_TOKENIZER)
    write_tokenizer_config(tmp_path / "hf", **fields)
    out = tmp_path / "out"
    code, err = run(["--source", "hf-mamba", str(tmp_path / "hf"), str(out)], capsys)
    assert_clean_failure(out, code, err, message)
    (tmp_path / "hf" / "tokenizer_config.json").write_text("{not json")
    code, err = run(["--source", "hf-mamba", str(tmp_path / "hf"), str(out)], capsys)
    assert_clean_failure(out, code, err, "tokenizer_config.json: not JSON")
