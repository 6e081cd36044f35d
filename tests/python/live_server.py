"""A real seqboat_server (from bazel-bin) on the bundled model, on loopback with
every port picked by the kernel: the server the end-to-end suites under
tests/python talk to (their conftests import this module)."""

import ctypes
import pathlib
import re
import signal
import subprocess
import threading
import time
import urllib.request

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODEL = ROOT / "weights/models/default"
PR_SET_PDEATHSIG = 1


def _die_with_parent():
    # A test run killed midway must not leave a server behind.
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


class Server:
    """seqboat_server on loopback with every port picked by the kernel."""

    def __init__(self, binary, log_path, args=()):
        self.log_path = log_path
        self.proc = subprocess.Popen(
            [str(binary), f"--model_dir={MODEL}", "--host=127.0.0.1", "--port=0",
             "--http_port=0", "--openai_port=0", "--log_level=warn", *args],
            stdout=subprocess.PIPE, stderr=open(log_path, "w"), text=True,
            preexec_fn=_die_with_parent)
        self.lines = {}
        ready = threading.Event()

        def read():
            for line in self.proc.stdout:
                m = re.match(r"^(http |openai |)listening on (\S+)$", line.strip())
                if m:
                    self.lines[m.group(1).strip() or "grpc"] = m.group(2)
                    if not m.group(1):
                        ready.set()
            ready.set()

        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(120) or "grpc" not in self.lines:
            self.stop()
            raise RuntimeError(f"seqboat_server did not start; see {log_path}")
        self.grpc = self.lines["grpc"]
        self.http = self.lines["http"]
        self.openai = self.lines["openai"]
        self.base_url = f"http://{self.openai}/v1"

    def metrics(self):
        with urllib.request.urlopen(f"http://{self.http}/metrics", timeout=10) as r:
            return r.read().decode()

    def sample(self, series):
        """One sample of /metrics by its exact series text; None if absent."""
        for line in self.metrics().splitlines():
            name, _, value = line.rpartition(" ")
            if name == series:
                return float(value)
        return None

    def wait_for(self, series, predicate, timeout=20):
        end = time.monotonic() + timeout
        while True:
            value = self.sample(series)
            if value is not None and predicate(value):
                return value
            if time.monotonic() > end:
                raise AssertionError(f"{series} is {value}")
            time.sleep(0.05)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()




def start_server(tmp_path_factory, name, args=()):
    """A Server with these extra flags, its log in a temporary folder `name`."""
    binary = ROOT / "bazel-bin/server/seqboat_server"
    if not binary.exists():
        pytest.fail(f"{binary} is missing: run `bazel build //server:seqboat_server` first")
    return Server(binary, tmp_path_factory.mktemp(name) / "server.log", args)


def stop_server(server):
    """Stops it (SIGTERM) and checks that it exited cleanly."""
    server.stop()
    assert server.proc.returncode == 0, f"server exited with {server.proc.returncode}"
