"""A seqboat_server child process for benchmarks: start it on a model, time
how long until the gRPC health service answers SERVING, read its memory from
/proc, stop it.

A module of convert_serve_bench.py, not a program.
"""

import ctypes
import signal
import socket
import subprocess
import threading
import time

import grpc

HEALTH_CHECK = "/grpc.health.v1.Health/Check"
SERVING = 1              # grpc.health.v1.HealthCheckResponse.ServingStatus
PR_SET_PDEATHSIG = 1


class ServerError(RuntimeError):
    pass


def free_port():
    """A loopback port that is free now. The server must know its port before
    it starts, so that the health check can be polled from the first moment."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parse_health_status(raw):
    """HealthCheckResponse.status from its wire bytes.

    The grpc.health.v1 stubs (grpcio-health-checking) are not installed, and
    the message is one enum field, so it is decoded here: tag 0x08 (field 1,
    varint), then the value; an empty message is status 0 (UNKNOWN).
    """
    if not raw:
        return 0
    if raw[0] != 0x08:
        raise ServerError(f"unexpected health response bytes {raw!r}")
    value, shift = 0, 0
    for byte in raw[1:]:
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value
        shift += 7
    raise ServerError(f"truncated health response {raw!r}")


def _die_with_parent():
    # A benchmark killed mid-run (Ctrl-C, a test timeout) must not leave a
    # server holding gigabytes behind.
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def read_proc_memory(pid):
    """VmRSS and VmHWM of a live process, in bytes."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                number, unit = value.split()
                assert unit == "kB", line
                out[key] = int(number) * 1024
    return out


class ServerProcess:
    """seqboat_server on 127.0.0.1; `start` returns once health says SERVING."""

    def __init__(self, binary, model_dir, args=(), log_path=None):
        self.binary, self.model_dir = str(binary), str(model_dir)
        self.args, self.log_path = list(args), log_path
        self.port = None
        self.proc = None
        self.t0 = None
        self.lines = []              # (seconds since start, stdout line)
        self._reader = None

    @property
    def target(self):
        return f"127.0.0.1:{self.port}"

    def start(self, timeout_s=600):
        """Start the server; returns the seconds from process start to SERVING."""
        self.port = free_port()
        argv = [self.binary, f"--model_dir={self.model_dir}", "--host=127.0.0.1",
                f"--port={self.port}", "--http_port=0", *self.args]
        log = open(self.log_path, "w") if self.log_path else subprocess.DEVNULL
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, text=True,
                                     preexec_fn=_die_with_parent)
        if log is not subprocess.DEVNULL:
            log.close()                  # the child holds its own descriptor
        self._reader = threading.Thread(target=self._read_stdout, daemon=True)
        self._reader.start()
        # Wait for the port with plain TCP connects: a gRPC channel that found
        # it closed backs off for seconds (whatever its backoff options say),
        # which would count as load time. The port opens once the model is
        # loaded; the health check then says when the server is SERVING.
        while not self._port_open():
            self._check_alive(timeout_s)
            time.sleep(0.005)
        with grpc.insecure_channel(self.target) as channel:
            check = channel.unary_unary(HEALTH_CHECK)      # bytes in, bytes out
            while True:
                self._check_alive(timeout_s)
                try:
                    status = parse_health_status(check(b"", timeout=5.0, wait_for_ready=True))
                except grpc.RpcError:
                    status = None
                if status == SERVING:
                    return time.monotonic() - self.t0
                time.sleep(0.005)

    def _port_open(self):
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1.0):
                return True
        except OSError:
            return False

    def _check_alive(self, timeout_s):
        if self.proc.poll() is not None:
            raise ServerError(f"server exited with {self.proc.returncode} before serving; "
                              f"log: {self.log_path}")
        if time.monotonic() - self.t0 > timeout_s:
            raise ServerError(f"server not SERVING after {timeout_s} s")

    def _read_stdout(self):
        for line in self.proc.stdout:
            self.lines.append((time.monotonic() - self.t0, line.rstrip("\n")))

    def line_time(self, prefix, timeout_s=5.0):
        """Seconds from process start to the first stdout line starting with prefix."""
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            for t, line in list(self.lines):
                if line.startswith(prefix):
                    return t
            time.sleep(0.01)
        raise ServerError(f"server printed no line starting {prefix!r}")

    def memory(self):
        return read_proc_memory(self.proc.pid)

    def stop(self, grace_s=30):
        """SIGTERM (the server drains and exits 0); SIGKILL if it does not."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
