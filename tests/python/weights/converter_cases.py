"""What the tests of every Hugging Face converter check alike, written once: a
conversion that must succeed and what it wrote, the reference against
transformers' logits, the bf16 option through the command line, the
save_pretrained layouts, a cut-off pytorch_model.bin, and the bad checkpoints
and cache sizes that must fail cleanly. A test file lists its own cases (built
with the constructors below, plus hf_layouts.BROKEN_FILES) and makes its tests
with the factories below, which keep the tests' names and parameters:

    test_bad_checkpoint_is_a_clean_error = converter_cases.bad_checkpoint_test(
        "hf-bamba", make_model, CORRUPT)
"""

import json
import pathlib
import shutil

import pytest
import torch

from weights import canonical, safetensors_io
from weights.reference.model import ReferenceModel

import hf_layouts
from convert_cli import assert_clean_failure, edit_config, edit_tensors, run, run_process

BYTES_TOKENIZER = {"version": "1.0", "model": {"type": "Bytes"}, "added_tokens": []}


def convert_ok(source, src, out, capsys, *extra):
    """`--source source src out --byte-tokenizer *extra`, which must succeed;
    returns (the written config.json, stderr)."""
    code, err = run(["--source", source, str(src), str(out), "--byte-tokenizer", *extra], capsys)
    assert code == 0, err
    return json.loads((out / "config.json").read_text()), err


def convert_with_tokenizer(source, src, out, capsys):
    """Converts src with a tokenizer.json of its own and no --byte-tokenizer:
    the tokenizer must be copied as it is; returns the written config.json."""
    (src / "tokenizer.json").write_text(json.dumps(BYTES_TOKENIZER))
    code, err = run(["--source", source, str(src), str(out)], capsys)
    assert code == 0, err
    assert json.loads((out / "tokenizer.json").read_text()) == BYTES_TOKENIZER
    return json.loads((out / "config.json").read_text())


def assert_reference_matches(out, want, tokens, min_std=None):
    """The float64 reference on the converted directory `out` gives the logits
    `want` (transformers' own) within 1e-5; with min_std, its logits are spread
    wider than that, so that the comparison means something."""
    ref = ReferenceModel.load(out, torch.float64).forward(tokens)
    if min_std is not None:
        assert ref.std() > min_std
    assert torch.allclose(ref, want, rtol=0, atol=1e-5), (ref - want).abs().max()


def written_tensors(out, source, tied):
    """The tensors converted into `out`: an lm_head only when untied, and the
    converter named in the file's metadata."""
    t, meta = safetensors_io.load_file(out / "model.safetensors")
    assert ("lm_head.weight" in t) == (not tied)
    assert meta["converter"].endswith("/" + source)
    return t


def assert_bf16_conversion(source, src, out, summary, bf16_names, fp32_names):
    """`python -m weights.convert --dtype bf16` exits 0 and prints `summary`;
    the named tensors are written as bf16 and fp32 respectively, and the result
    loads as a canonical directory."""
    proc = run_process(["--source", source, str(src), str(out), "--byte-tokenizer",
                        "--dtype", "bf16"])
    assert proc.returncode == 0, proc.stderr
    assert summary in proc.stdout
    t, _ = safetensors_io.load_file(out / "model.safetensors")
    for name in bf16_names:
        assert t[name].dtype == torch.bfloat16, name
    for name in fp32_names:
        assert t[name].dtype == torch.float32, name
    canonical.load_model_dir(out)


# The cases of a CORRUPT table, {case: (edit of a save() directory, what the
# error must name)}.

def missing_tensor(name):
    return (lambda s: edit_tensors(s, lambda t: t.pop(name)), ["missing tensor", name])


def wrong_shape(name, shape, expected):
    return (lambda s: edit_tensors(s, lambda t: t.update({name: torch.zeros(*shape)})),
            [name, str(list(shape)), str(list(expected))])


def unknown_tensor(name, value, named=None):
    """A tensor `name` the converter does not know; the error names it, or `named`."""
    return (lambda s: edit_tensors(s, lambda t: t.update({name: value})),
            ["unknown tensor", named or name])


def integer_tensor(name, *shape):
    return (lambda s: edit_tensors(s, lambda t: t.update(
        {name: torch.zeros(*shape, dtype=torch.int32)})), [name, "not floating point"])


def config_case(needles, **fields):
    """config.json with these fields set."""
    return (lambda s: edit_config(s, lambda c: c.update(fields)), needles)


LM_HEAD_MISSING = (lambda s: edit_tensors(s, lambda t: t.pop("lm_head.weight")),
                   ["missing tensor 'lm_head.weight'"])
ACTIVATION = config_case(["hidden_act", "gelu"], hidden_act="gelu")


# Factories of the tests every HF converter's file has; `make_model()` gives
# the model each saves.

def layouts_test(source, make_model):
    @pytest.mark.parametrize("layout", sorted(hf_layouts.LAYOUTS))
    def test(tmp_path, layout):
        hf_layouts.assert_layout_converts_alike(make_model(), tmp_path, source, layout)
    return test


def truncated_bin_test(source, make_model):
    def test(tmp_path):
        hf_layouts.assert_truncated_bin_fails(make_model(), tmp_path, source)
    return test


def _fails_cleanly(source, src, tmp_path, capsys, needles, *extra):
    out = tmp_path / "out"
    code, err = run(["--source", source, str(src), str(out), "--byte-tokenizer", *extra],
                    capsys)
    assert_clean_failure(out, code, err, *needles)


def bad_checkpoint_test(source, make_model, cases):
    """Each of `cases` applied to a saved make_model() is an error naming its
    culprit, with nothing left behind."""
    @pytest.mark.parametrize("case", sorted(cases))
    def test(tmp_path, capsys, case):
        src = hf_layouts.save(make_model(), tmp_path / "hf")
        corrupt, needles = cases[case]
        corrupt(src)
        _fails_cleanly(source, src, tmp_path, capsys, needles)
    return test


def edited_golden_test(source, golden_hf, edit, cases):
    """Each of `cases` ({name: (change, needles)}), applied by `edit`
    (convert_cli.edit_config or edit_tensors) to a copy of the golden checkpoint
    directory `golden_hf` (tests/data/hf_golden/NAME/hf), is an error naming
    its culprit, with nothing left behind."""
    @pytest.mark.parametrize("case", sorted(cases))
    def test(tmp_path, capsys, case):
        src = pathlib.Path(shutil.copytree(golden_hf, tmp_path / "hf"))
        change, needles = cases[case]
        edit(src, change)
        _fails_cleanly(source, src, tmp_path, capsys, needles)
    return test


DEFAULT_BAD_CACHE_SIZES = [
    (["--sinks", "-1"], "--sinks"),
    (["--window", "-3"], "--window"),
    (["--sinks", "0", "--window", "0"], "at least 1"),
]


def bad_cache_size_test(source, make_model, cases=DEFAULT_BAD_CACHE_SIZES):
    """Each (extra argv, what the error must name) of `cases` fails cleanly."""
    @pytest.mark.parametrize("argv,needle", cases)
    def test(tmp_path, capsys, argv, needle):
        src = hf_layouts.save(make_model(), tmp_path / "hf")
        _fails_cleanly(source, src, tmp_path, capsys, [needle], *argv)
    return test
