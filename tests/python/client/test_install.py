"""The package installs with pip (offline, into a fresh venv over Debian's
grpcio and protobuf), and the examples of clients/python/README.md run as
written against a live server with that installed copy."""

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "clients/python"


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """A venv holding only the installed package (over the system's site
    packages), run from a folder outside the checkout."""
    tmp = tmp_path_factory.mktemp("install")
    # A copy, so that the build leaves nothing behind in the checkout and so
    # that the package is shown to need nothing outside its folder.
    source = tmp / "src"
    shutil.copytree(PACKAGE, source, ignore=shutil.ignore_patterns("__pycache__"))
    env_dir = tmp / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--system-site-packages", str(env_dir)], check=True)
    python = env_dir / "bin/python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps",
                    "--no-build-isolation", "--no-index", "--disable-pip-version-check",
                    str(source)], check=True, cwd=tmp)
    return python, tmp


def run(venv, code, timeout=120):
    python, cwd = venv
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([str(python), "-c", code], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=timeout)


def test_pip_installs_the_package(venv):
    r = run(venv, "import pathlib, seqboat, seqboat.v1.generate_pb2_grpc as g\n"
                  "p = pathlib.Path(seqboat.__file__).parent\n"
                  "print(p)\n"
                  "print(sorted(f.name for f in (p / 'v1').iterdir() if f.suffix != '.pyc'))\n"
                  "print((p / 'py.typed').exists(), seqboat.__version__, g.TextGenerationStub)")
    assert r.returncode == 0, r.stderr
    where, files, rest = r.stdout.splitlines()
    assert "site-packages" in where and str(ROOT) not in where
    for name in ("generate_pb2.py", "generate_pb2.pyi", "generate_pb2_grpc.py"):
        assert name in files
    assert rest.startswith("True 0.1.0")
    show = subprocess.run([str(venv[0]), "-m", "pip", "show", "seqboat-client"],
                          capture_output=True, text=True, check=True).stdout
    assert "Requires: grpcio, protobuf" in show


def readme_blocks():
    text = (PACKAGE / "README.md").read_text()
    return re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)


def test_the_readme_has_the_two_examples():
    blocks = readme_blocks()
    assert len(blocks) == 2
    assert all('"localhost:50051"' in b for b in blocks)


def test_sync_example_runs_as_written(server, venv):
    code = readme_blocks()[0].replace("localhost:50051", server.grpc)
    r = run(venv, code)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert out.startswith(f"seqboat-hybrid-bytes: 9 layers, {server.max_slots} slots, ")
    assert " length Usage(prompt_tokens=26, generated_tokens=40, " in out
    assert re.search(r"\n\[(length|stop_string|eos), \d+ tokens\]\n", out), out
    for i in range(3):
        assert re.search(rf"\n{i} ['\"].*['\"] (length|stop_string|eos)\n", out), out
    assert re.search(r"\nUsage\(prompt_tokens=7, generated_tokens=\d+, ", out), out
    assert "refused: sampling.top_p must be in (0, 1], got 2" in out
    server.wait_for("seqboat_num_requests_running", lambda v: v == 0)


def test_async_example_runs_as_written(server, venv):
    code = readme_blocks()[1].replace("localhost:50051", server.grpc)
    r = run(venv, code)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert [l.split(" -> ")[0] for l in lines[:3]] == ["'Roses are'", "'The sea'",
                                                        "'In the morning'"]
    assert lines[3:] == ["timed out; the server stopped generating", "cancelled"]
    server.wait_for("seqboat_num_requests_running", lambda v: v == 0)
