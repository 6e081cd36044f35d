"""The server of the OpenAI API's end-to-end tests (tests/python/live_server.py),
with its gRPC, side (metrics) and OpenAI ports."""

import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from live_server import start_server, stop_server  # noqa: E402


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    s = start_server(tmp_path_factory, "openai",
                     ["--max_slots=8", "--max_new_tokens_limit=4096"])
    yield s
    stop_server(s)
