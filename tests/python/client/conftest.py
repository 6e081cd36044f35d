"""The server the Python client's tests talk to (tests/python/live_server.py),
and the client package from its source folder."""

import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests/python"))
sys.path.insert(0, str(ROOT / "clients/python"))
from live_server import start_server, stop_server  # noqa: E402

# Few slots and a short queue, so that a test can fill them; long streams allowed,
# so that a stream is still running when a test cancels it.
MAX_SLOTS = 3
MAX_QUEUE = 2


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    s = start_server(tmp_path_factory, "client",
                     [f"--max_slots={MAX_SLOTS}", f"--max_queue={MAX_QUEUE}",
                      "--max_new_tokens_limit=1000000"])
    s.max_slots, s.max_queue = MAX_SLOTS, MAX_QUEUE
    yield s
    stop_server(s)
