"""The prefix cache partitioned by tenant on a real seqboat_server: tenant A's
prompt is never a cache hit for tenant B (cached tokens 0 in B's usage) while
A's own second turn hits; cache_salt partitions a keyless server (and a
tenant) the same way, over gRPC and HTTP; --share_prefix_cache_across_tenants
shares; the per-tenant metrics are labelled by tenant, never by key."""

import json
import urllib.error
import urllib.request

import grpc
import pytest

import seqboat
from live_server import start_server, stop_server
from seqboat.v1 import generate_pb2 as pb
from seqboat.v1 import generate_pb2_grpc as pb_grpc

KEY_A = "sk-tenant-a-0123456789abcdef"
KEY_A2 = "sk-tenant-a-second-key-0000"
KEY_B = "sk-tenant-b-fedcba9876543210"
PROMPT = "The secret of happiness is a long prompt that the prefix cache keeps"


def keys_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("tenant_keys") / "keys.txt"
    path.write_text(f"{KEY_A} team-a\n{KEY_A2} team-a\n{KEY_B} team-b\n")
    return path


@pytest.fixture(scope="module")
def tenants(tmp_path_factory):
    s = start_server(tmp_path_factory, "tenants",
                     [f"--api_keys_file={keys_file(tmp_path_factory)}"])
    yield s
    stop_server(s)


def generate(server, prompt, key=None, salt="", tokens=4):
    """Greedy over gRPC; returns (text, cached prompt tokens)."""
    md = (("authorization", f"Bearer {key}"),) if key else None
    with grpc.insecure_channel(server.grpc) as channel:
        out = list(pb_grpc.TextGenerationStub(channel).Generate(pb.GenerateRequest(
            text=prompt, cache_salt=salt,
            sampling=pb.SamplingParams(temperature=0),
            stopping=pb.StoppingCriteria(max_new_tokens=tokens, ignore_eos=True)),
            metadata=md, timeout=60))
    return "".join(m.text for m in out), out[-1].usage.cached_prompt_tokens


def complete(server, prompt, key=None, salt=None, tokens=4):
    """Greedy over HTTP; returns (text, cached prompt tokens)."""
    body = {"prompt": prompt, "max_tokens": tokens, "temperature": 0, "ignore_eos": True}
    if salt is not None:
        body["cache_salt"] = salt
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    request = urllib.request.Request(f"{server.base_url}/completions",
                                     data=json.dumps(body).encode(), headers=headers)
    with urllib.request.urlopen(request, timeout=60) as r:
        out = json.loads(r.read())
    return (out["choices"][0]["text"],
            out["usage"].get("prompt_tokens_details", {}).get("cached_tokens", 0))


def test_a_tenants_prompt_is_never_a_hit_for_another(tenants):
    first, cached = generate(tenants, PROMPT, KEY_A)
    assert cached == 0
    # A's next turn (its prompt and answer, and more) resumes from A's snapshot.
    turn = PROMPT + first + " and more"
    _, cached_a = generate(tenants, turn, KEY_A)
    assert cached_a > 0
    # B sends A's very prompts (the longer first, so that B's own snapshots
    # cannot serve the other): nothing of A's is found, and B's text is A's.
    _, cached_b = complete(tenants, turn, KEY_B)
    assert cached_b == 0
    text_b, cached_b = generate(tenants, PROMPT, KEY_B)
    assert (text_b, cached_b) == (first, 0)
    # Another key of tenant A shares A's snapshots.
    _, cached = complete(tenants, turn, KEY_A2)
    assert cached > 0


def test_cache_salt_partitions_within_a_tenant(tenants):
    prompt = "Salted: " + PROMPT  # no unsalted snapshot of A is a prefix of it
    text, _ = generate(tenants, prompt, KEY_A, salt="s1")
    assert generate(tenants, prompt + text, KEY_A, salt="s2")[1] == 0
    assert generate(tenants, prompt + text, KEY_A)[1] == 0
    assert generate(tenants, prompt + text, KEY_A, salt="s1")[1] > 0


def test_per_tenant_metrics_are_labelled_by_tenant_never_key(tenants):
    generate(tenants, PROMPT + " metrics", KEY_B)
    metrics = tenants.metrics()
    assert tenants.sample('seqboat_tenant_requests_total{tenant="team-b"}') >= 1
    assert tenants.sample('seqboat_tenant_generation_tokens_total{tenant="team-a"}') > 0
    assert tenants.sample('seqboat_tenant_cached_prompt_tokens_total{tenant="team-a"}') > 0
    assert tenants.sample('seqboat_tenant_prompt_tokens_total{tenant="team-b"}') > 0
    for key in (KEY_A, KEY_A2, KEY_B, "0123456789"):
        assert key not in metrics


@pytest.fixture(scope="module")
def keyless(tmp_path_factory):
    s = start_server(tmp_path_factory, "keyless_salt", [])
    yield s
    stop_server(s)


def test_cache_salt_partitions_a_keyless_server(keyless):
    first, _ = complete(keyless, PROMPT, salt="user-1")
    turn = PROMPT + first + " again"
    assert complete(keyless, turn, salt="user-2")[1] == 0
    assert complete(keyless, turn)[1] == 0
    assert complete(keyless, turn, salt="user-1")[1] > 0
    assert generate(keyless, turn + " more", salt="user-1")[1] > 0
    with pytest.raises(urllib.error.HTTPError) as e:
        complete(keyless, PROMPT, salt=7)
    assert e.value.code == 400 and json.loads(e.value.read())["error"]["param"] == "cache_salt"


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    s = start_server(tmp_path_factory, "shared_tenants",
                     [f"--api_keys_file={keys_file(tmp_path_factory)}",
                      "--share_prefix_cache_across_tenants"])
    yield s
    stop_server(s)


def test_tenants_share_when_told_to(shared):
    first, _ = generate(shared, PROMPT, KEY_A)
    assert generate(shared, PROMPT + first, KEY_B)[1] > 0


def test_the_python_clients_cache_salt(keyless):
    prompt = PROMPT + " from the client"
    with seqboat.Client(keyless.grpc, timeout=60) as c:
        first = c.generate(prompt, max_tokens=4, temperature=0, ignore_eos=True,
                           cache_salt="client-1")
        turn = prompt + first.text + " again"
        assert c.generate(turn, max_tokens=2, cache_salt="client-2").usage.cached_prompt_tokens == 0
        assert c.generate(turn, max_tokens=2, cache_salt="client-1").usage.cached_prompt_tokens > 0
    assert seqboat.build_request("Hi", cache_salt="s").cache_salt == "s"
