"""Per-tenant quotas on a real seqboat_server: a burst from one tenant past its
sequences in flight, its request rate or its token rate is answered RESOURCE_EXHAUSTED with a
`retry-after` trailer (gRPC) or 429 with Retry-After (HTTP), while another
tenant is served as before; the sequences come back when their streams end."""

import json
import signal
import time
import urllib.error
import urllib.request

import grpc
import pytest

from live_server import start_server, stop_server
from seqboat.v1 import generate_pb2 as pb
from seqboat.v1 import generate_pb2_grpc as pb_grpc

KEY_A = "sk-tenant-a-0123456789abcdef"
KEY_B = "sk-tenant-b-fedcba9876543210"
LONG = 1_000_000


def keyed_server(tmp_path_factory, name, flags):
    keys = tmp_path_factory.mktemp(name + "_keys") / "keys.txt"
    keys.write_text(f"{KEY_A} team-a\n{KEY_B} team-b\n")
    return start_server(tmp_path_factory, name,
                        [f"--api_keys_file={keys}", f"--max_new_tokens_limit={LONG}",
                         *flags])


def md(key):
    return (("authorization", f"Bearer {key}"),)


def request(tokens):
    return pb.GenerateRequest(text="Hi", stopping=pb.StoppingCriteria(
        max_new_tokens=tokens, ignore_eos=True))


def http_complete(server, key):
    req = urllib.request.Request(
        f"{server.base_url}/completions",
        data=json.dumps({"prompt": "Hi", "max_tokens": 2}).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.headers
    except urllib.error.HTTPError as e:
        return e.code, e.headers


@pytest.fixture(scope="module")
def bounded(tmp_path_factory):
    s = keyed_server(tmp_path_factory, "quota_sequences", ["--tenant_max_sequences=2"])
    yield s
    stop_server(s)


def test_a_tenant_past_its_sequences_is_refused_and_another_is_not(bounded):
    with grpc.insecure_channel(bounded.grpc) as channel:
        stub = pb_grpc.TextGenerationStub(channel)
        running = [stub.Generate(request(LONG), metadata=md(KEY_A)) for _ in range(2)]
        for call in running:
            next(call)  # streaming: both hold their sequence
        with pytest.raises(grpc.RpcError) as e:
            list(stub.Generate(request(2), metadata=md(KEY_A), timeout=60))
        assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "team-a" in e.value.details() and "limit is 2" in e.value.details()
        assert dict(e.value.trailing_metadata())["retry-after"] == "1"
        status, headers = http_complete(bounded, KEY_A)
        assert status == 429 and headers["Retry-After"] == "1"
        # Tenant B is unaffected by A's burst.
        assert len(list(stub.Generate(request(2), metadata=md(KEY_B), timeout=60))) > 0
        assert http_complete(bounded, KEY_B)[0] == 200
        for call in running:
            call.cancel()
        # A's sequences come back once its streams end.
        deadline = time.monotonic() + 20
        while True:
            try:
                list(stub.Generate(request(2), metadata=md(KEY_A), timeout=60))
                break
            except grpc.RpcError as e:
                assert e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                assert time.monotonic() < deadline, "A's sequences never came back"
                time.sleep(0.1)


@pytest.fixture(scope="module")
def rated(tmp_path_factory):
    s = keyed_server(tmp_path_factory, "quota_rate",
                     ["--tenant_requests_per_second=0.2", "--tenant_request_burst=2"])
    yield s
    stop_server(s)


def test_a_tenant_past_its_rate_waits_and_another_does_not(rated):
    assert http_complete(rated, KEY_A)[0] == 200
    assert http_complete(rated, KEY_A)[0] == 200
    status, headers = http_complete(rated, KEY_A)
    assert status == 429
    assert 1 <= int(headers["Retry-After"]) <= 5
    with grpc.insecure_channel(rated.grpc) as channel:
        stub = pb_grpc.TextGenerationStub(channel)
        with pytest.raises(grpc.RpcError) as e:
            list(stub.Generate(request(2), metadata=md(KEY_A), timeout=60))
        assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "requests per second" in e.value.details()
        for _ in range(2):
            list(stub.Generate(request(2), metadata=md(KEY_B), timeout=60))


@pytest.fixture(scope="module")
def token_rated(tmp_path_factory):
    # A slow refill and a bucket one request of 60 new tokens overdraws.
    s = keyed_server(tmp_path_factory, "quota_tokens",
                     ["--tenant_tokens_per_second=1", "--tenant_token_burst=30"])
    yield s
    stop_server(s)


def test_a_tenant_past_its_token_rate_waits_and_another_does_not(token_rated):
    with grpc.insecure_channel(token_rated.grpc) as channel:
        stub = pb_grpc.TextGenerationStub(channel)
        # Let in with tokens in the bucket; its prompt's and its 60 new
        # tokens are all taken, so the bucket ends some 30 below zero.
        done = list(stub.Generate(request(60), metadata=md(KEY_A), timeout=60))
        assert sum(len(m.token_ids) for m in done) == 60
        with pytest.raises(grpc.RpcError) as e:
            list(stub.Generate(request(2), metadata=md(KEY_A), timeout=60))
        assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "team-a" in e.value.details() and "tokens per second" in e.value.details()
        assert int(dict(e.value.trailing_metadata())["retry-after"]) >= 5
        status, headers = http_complete(token_rated, KEY_A)
        assert status == 429 and int(headers["Retry-After"]) >= 5
        # Tenant B's bucket is its own.
        assert len(list(stub.Generate(request(20), metadata=md(KEY_B), timeout=60))) > 0
        assert http_complete(token_rated, KEY_B)[0] == 200


def test_a_tenants_own_quotas_from_the_keys_file_and_their_reload(tmp_path_factory):
    keys = tmp_path_factory.mktemp("own_quota_keys") / "keys.txt"
    keys.write_text(f"{KEY_A} team-a max_sequences=1\n{KEY_B} team-b\n")
    s = start_server(tmp_path_factory, "own_quotas",
                     [f"--api_keys_file={keys}", f"--max_new_tokens_limit={LONG}"])
    try:
        with grpc.insecure_channel(s.grpc) as channel:
            stub = pb_grpc.TextGenerationStub(channel)
            a = stub.Generate(request(LONG), metadata=md(KEY_A))
            next(a)
            with pytest.raises(grpc.RpcError) as e:
                list(stub.Generate(request(2), metadata=md(KEY_A), timeout=60))
            assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "team-a" in e.value.details() and "limit is 1" in e.value.details()
            # team-b has no line of quotas and no flag bounds it.
            b = [stub.Generate(request(LONG), metadata=md(KEY_B)) for _ in range(3)]
            for call in b:
                next(call)
            # A reload raises team-a's bound; its running stream still counts.
            keys.write_text(f"{KEY_A} team-a max_sequences=2\n{KEY_B} team-b\n")
            s.proc.send_signal(signal.SIGHUP)
            deadline = time.monotonic() + 20
            while True:
                try:
                    list(stub.Generate(request(2), metadata=md(KEY_A), timeout=60))
                    break
                except grpc.RpcError as e:
                    assert e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                    assert time.monotonic() < deadline, "the reload never applied"
                    time.sleep(0.1)
            for call in [a, *b]:
                call.cancel()
    finally:
        stop_server(s)
