"""Fixtures for deploy tests that run the built server and load client."""

import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]


def bazel_binary(target_path):
    """A built binary under bazel-bin; .ci/run builds //... before pytest runs."""
    path = ROOT / "bazel-bin" / target_path
    if not path.exists():
        pytest.fail(f"{path} is missing: run `bazel build //server:seqboat_server "
                    "//clients/load:seqboat_load` first")
    return path


@pytest.fixture(scope="session")
def seqboat_server():
    return bazel_binary("server/seqboat_server")


@pytest.fixture(scope="session")
def seqboat_load():
    return bazel_binary("clients/load/seqboat_load")
