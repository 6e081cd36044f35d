"""Driving weights.convert's command line from tests, and what every
converter's failure must look like: exit 1, the culprit named in stderr, no
output directory and no temporary one left behind. Also the edits tests make
to a saved Hugging Face checkpoint to corrupt it."""

import json
import os
import subprocess
import sys

from weights import convert, safetensors_io

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def run(argv, capsys):
    """convert.main(argv); returns (exit code, stderr)."""
    code = convert.main(argv)
    return code, capsys.readouterr().err


def run_process(argv):
    """`python -m weights.convert *argv` in its own process from the repository
    root, so the exit status and output are what a user gets; returns the
    CompletedProcess (text)."""
    return subprocess.run([sys.executable, "-m", "weights.convert", *argv], cwd=ROOT,
                          capture_output=True, text=True)


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
