"""Shared fixtures for tests that drive the C++ engine's binaries."""

import os
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests/python"))  # hf_models


def bazel_binary(target_path):
    """A built binary under bazel-bin; .ci/run builds //... before pytest runs."""
    path = ROOT / "bazel-bin" / target_path
    if not path.exists():
        pytest.fail(f"{path} is missing: run `bazel build //...` first")
    return path


@pytest.fixture(scope="session")
def engine_logits():
    return bazel_binary("tests/parity/engine_logits")


@pytest.fixture(scope="session")
def engine_generate():
    return bazel_binary("tests/parity/engine_generate")


@pytest.fixture(scope="session")
def repo_root():
    return ROOT
