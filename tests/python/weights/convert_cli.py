"""Driving weights.convert's command line from tests, and what every
converter's failure must look like: exit 1, the culprit named in stderr, no
output directory and no temporary one left behind. Also the edits tests make
to a saved Hugging Face checkpoint to corrupt it."""

import json
import os

from weights import convert, safetensors_io


def run(argv, capsys):
    """convert.main(argv); returns (exit code, stderr)."""
    code = convert.main(argv)
    return code, capsys.readouterr().err


def assert_clean_failure(out, code, err, *needles):
    assert code == 1
    for n in needles:
        assert n in err, err
    assert not out.exists()
    assert [p for p in os.listdir(out.parent) if p.startswith("." + out.name)] == []


def edit_tensors(src, fn):
    """Applies fn to the tensors of src/model.safetensors and saves them back."""
    path = src / "model.safetensors"
    t, meta = safetensors_io.load_file(path)
    fn(t)
    os.remove(path)
    safetensors_io.save_file(t, path, meta)


def edit_config(src, fn):
    """Applies fn to src/config.json's dict and saves it back."""
    cfg = json.loads((src / "config.json").read_text())
    fn(cfg)
    (src / "config.json").write_text(json.dumps(cfg))


def truncate(src):
    """Cuts src/model.safetensors in half."""
    path = src / "model.safetensors"
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])
