"""API keys on a real seqboat_server: every gRPC method and every OpenAI path
refused without a key and with a wrong one (UNAUTHENTICATED, 401
invalid_api_key, naming nothing secret), served with a right one; a key
removed from the file refused after SIGHUP; /metrics behind its own key while
the probes stay open; keys never in the log; a malformed keys file stops the
start naming its line; the clients' api_key and SEQBOAT_API_KEY."""

import json
import signal
import subprocess
import time
import urllib.error
import urllib.request

import grpc
import pytest

import seqboat
from live_server import MODEL, ROOT, start_server, stop_server
from seqboat.v1 import generate_pb2 as pb
from seqboat.v1 import generate_pb2_grpc as pb_grpc

KEY_A = "sk-tenant-a-0123456789abcdef"
KEY_B = "sk-tenant-b-fedcba9876543210"
METRICS_KEY = "mk-scraper-0123456789abcdef"
WRONG = [None, "", "sk-tenant-a-0123456789abcdeX", "Basic " + KEY_A]


@pytest.fixture(scope="module")
def keyed(tmp_path_factory):
    folder = tmp_path_factory.mktemp("keys")
    keys, metrics_keys = folder / "keys.txt", folder / "metrics_keys.txt"
    keys.write_text(f"# tenants\n\n{KEY_A} team-a\n{KEY_B}\tteam-b\n")
    metrics_keys.write_text(METRICS_KEY + "\n")
    s = start_server(tmp_path_factory, "keyed",
                     [f"--api_keys_file={keys}", f"--metrics_api_key_file={metrics_keys}",
                      "--log_level=debug"])
    s.keys_file = keys
    s.metrics_key = METRICS_KEY
    yield s
    stop_server(s)


def metadata(value):
    if value is None:
        return None
    return (("authorization", value if value.startswith("Basic") else f"Bearer {value}"),)


def grpc_calls(stub):
    return {
        "Generate": lambda md: list(stub.Generate(pb.GenerateRequest(
            text="Hi", stopping=pb.StoppingCriteria(max_new_tokens=3)),
            metadata=md, timeout=60)),
        "Tokenize": lambda md: stub.Tokenize(pb.TokenizeRequest(text="Hi"),
                                             metadata=md, timeout=60),
        "GetModelInfo": lambda md: stub.GetModelInfo(pb.GetModelInfoRequest(),
                                                     metadata=md, timeout=60),
    }


def test_every_grpc_method_wants_a_right_key(keyed):
    with grpc.insecure_channel(keyed.grpc) as channel:
        for name, call in grpc_calls(pb_grpc.TextGenerationStub(channel)).items():
            for wrong in WRONG:
                with pytest.raises(grpc.RpcError) as e:
                    call(metadata(wrong))
                assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED, (name, wrong)
                assert "API key" in e.value.details()
                assert KEY_A not in e.value.details() and "0123" not in e.value.details()
            call(metadata(KEY_A))
            call(metadata(KEY_B))


def http(server, method, path, key=None, body=None, port=None):
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Authorization"] = key if key.startswith("Basic") else f"Bearer {key}"
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(f"http://{port or server.openai}{path}", data=data,
                                     method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            return r.status, r.read().decode(), r.headers
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(), e.headers


OPENAI_CALLS = [
    ("POST", "/v1/completions", {"prompt": "Hi", "max_tokens": 3}),
    ("POST", "/v1/completions", {"prompt": "Hi", "max_tokens": 3, "stream": True}),
    ("POST", "/v1/chat/completions",
     {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3}),
    ("GET", "/v1/models", None),
    ("GET", "/v1/models/seqboat-hybrid-bytes", None),
    ("GET", "/v1/nowhere", None),
]


def test_every_openai_path_wants_a_right_key(keyed):
    for method, path, body in OPENAI_CALLS:
        for wrong in WRONG:
            status, text, headers = http(keyed, method, path, wrong, body)
            assert status == 401, (path, wrong, text)
            error = json.loads(text)["error"]
            assert error["code"] == "invalid_api_key"
            assert error["type"] == "invalid_request_error"
            assert headers["WWW-Authenticate"] == "Bearer"
            assert "0123" not in text
        status, text, _ = http(keyed, method, path, KEY_B, body)
        assert status != 401, (path, text)
        assert status == (404 if path == "/v1/nowhere" else 200), (path, text)
    # The probe stays open.
    assert http(keyed, "GET", "/health")[0] == 200


def test_metrics_take_their_own_key_and_probes_stay_open(keyed):
    for key in (None, KEY_A, "mk-wrong-0123456789abcdef"):
        assert http(keyed, "GET", "/metrics", key, port=keyed.http)[0] == 401
    status, text, _ = http(keyed, "GET", "/metrics", keyed.metrics_key, port=keyed.http)
    assert status == 200 and "seqboat_num_requests_running" in text
    assert http(keyed, "GET", "/healthz", port=keyed.http)[0] == 200
    assert http(keyed, "GET", "/readyz", port=keyed.http)[0] == 200


def test_clients_send_their_key(keyed, monkeypatch):
    with seqboat.Client(keyed.grpc, timeout=60) as c:
        with pytest.raises(seqboat.Unauthenticated):
            c.model_info()
    with seqboat.Client(keyed.grpc, timeout=60, api_key=KEY_A) as c:
        assert c.generate("Hi", max_tokens=3).usage.generated_tokens == 3
    monkeypatch.setenv("SEQBOAT_API_KEY", KEY_B)
    with seqboat.Client(keyed.grpc, timeout=60) as c:
        assert c.tokenize("Hi").token_ids
    cli = ROOT / "bazel-bin/clients/cli/seqboat_cli"
    if cli.exists():
        ok = subprocess.run([str(cli), f"--server={keyed.grpc}", "--prompt=Hi",
                             "--max_new_tokens=3", f"--api_key={KEY_A}"],
                            capture_output=True, text=True, timeout=60)
        assert ok.returncode == 0, ok.stderr
        refused = subprocess.run([str(cli), f"--server={keyed.grpc}", "--prompt=Hi",
                                  "--max_new_tokens=3", "--api_key=sk-wrong-wrong-wrong"],
                                 capture_output=True, text=True, timeout=60)
        assert refused.returncode == 1 and "API key" in refused.stderr


def test_a_key_removed_from_the_file_is_refused_after_sighup(keyed):
    before = keyed.keys_file.read_text()
    try:
        keyed.keys_file.write_text(f"{KEY_A} team-a\n")
        keyed.proc.send_signal(signal.SIGHUP)
        with grpc.insecure_channel(keyed.grpc) as channel:
            info = pb_grpc.TextGenerationStub(channel).GetModelInfo
            deadline = time.monotonic() + 20
            while True:
                try:
                    info(pb.GetModelInfoRequest(), metadata=metadata(KEY_B), timeout=10)
                except grpc.RpcError as e:
                    assert e.code() == grpc.StatusCode.UNAUTHENTICATED
                    break
                assert time.monotonic() < deadline, "the removed key still works"
                time.sleep(0.1)
            info(pb.GetModelInfoRequest(), metadata=metadata(KEY_A), timeout=10)
        assert http(keyed, "GET", "/v1/models", KEY_B)[0] == 401
        assert http(keyed, "GET", "/v1/models", KEY_A)[0] == 200
    finally:
        keyed.keys_file.write_text(before)
        keyed.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 20
    while http(keyed, "GET", "/v1/models", KEY_B)[0] != 200:
        assert time.monotonic() < deadline
        time.sleep(0.1)


def test_keys_never_reach_the_log(keyed):
    log = keyed.log_path.read_text()
    assert "API keys from" in log  # it did log about them
    for key in (KEY_A, KEY_B, METRICS_KEY, "sk-tenant-a-0123456789abcdeX"):
        assert key not in log


def test_a_malformed_keys_file_stops_the_start_naming_its_line(tmp_path):
    keys = tmp_path / "keys.txt"
    keys.write_text(f"{KEY_A}\nsk-secret-but-too many fields here\n")
    binary = ROOT / "bazel-bin/server/seqboat_server"
    r = subprocess.run([str(binary), f"--model_dir={MODEL}", "--port=0",
                        f"--api_keys_file={keys}"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1
    assert f"{keys} line 2: field 3 is not a quota NAME=VALUE" in r.stderr
    assert "secret" not in r.stderr
