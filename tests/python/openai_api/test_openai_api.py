"""The OpenAI-compatible API end to end: the official `openai` SDK (pinned in
tests/python/requirements.txt) and curl against a real seqboat_server on the
bundled model, checked against the gRPC API and the server's metrics."""

import importlib
import json
import pathlib
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import grpc
import openai
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]

MODEL_ID = "seqboat-hybrid-bytes"  # weights/models/default/config.json's name
PROMPT = "The secret of happiness is"


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.base_url, api_key="unused",
                         max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def pb():
    """seqboat.v1's messages, as the Python client package commits them
    (tests/python/client checks them against the proto)."""
    sys.path.insert(0, str(ROOT / "clients/python"))
    try:
        return importlib.import_module("seqboat.v1.generate_pb2")
    finally:
        sys.path.remove(str(ROOT / "clients/python"))


def grpc_generate(server, pb, request):
    with grpc.insecure_channel(server.grpc) as channel:
        generate = channel.unary_stream(
            "/seqboat.v1.TextGeneration/Generate",
            request_serializer=pb.GenerateRequest.SerializeToString,
            response_deserializer=pb.GenerateResponse.FromString)
        return list(generate(request, timeout=120))


def raw_post(server, path, body, content_type="application/json"):
    """(status, parsed JSON body) of a POST the SDK would not send."""
    request = urllib.request.Request(f"http://{server.openai}{path}", data=body,
                                     headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def assert_error_shape(body):
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"message", "type", "param", "code"}, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]


# ------------------------------------------------------------- the basics

def test_models_and_health(server, client):
    models = client.models.list()
    assert [m.id for m in models.data] == [MODEL_ID]
    assert client.models.retrieve(MODEL_ID).id == MODEL_ID
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("gpt-4")
    with urllib.request.urlopen(f"http://{server.openai}/health", timeout=10) as r:
        assert r.status == 200


def test_completion_and_usage(client):
    c = client.completions.create(model=MODEL_ID, prompt=PROMPT, max_tokens=24,
                                  temperature=0)
    assert c.object == "text_completion"
    assert c.id.startswith("cmpl-")
    assert c.model == MODEL_ID
    (choice,) = c.choices
    assert choice.index == 0
    assert isinstance(choice.text, str) and choice.text
    assert choice.finish_reason in ("length", "stop")
    # The bundled model's tokenizer is one token per byte.
    assert c.usage.prompt_tokens == len(PROMPT.encode())
    assert 1 <= c.usage.completion_tokens <= 24
    assert c.usage.total_tokens == c.usage.prompt_tokens + c.usage.completion_tokens
    assert c.usage.prompt_tokens_details.cached_tokens >= 0


def test_prompt_as_token_ids(client):
    by_text = client.completions.create(model=MODEL_ID, prompt="Hello there",
                                        max_tokens=12, temperature=0)
    by_ids = client.completions.create(model=MODEL_ID,
                                       prompt=list("Hello there".encode()),
                                       max_tokens=12, temperature=0)
    assert by_ids.choices[0].text == by_text.choices[0].text
    assert by_ids.usage.prompt_tokens == by_text.usage.prompt_tokens


def test_a_repeated_prompt_reuses_the_cached_state(client):
    prompt = "A prompt that nobody else in these tests sends, twice."
    client.completions.create(model=MODEL_ID, prompt=prompt, max_tokens=4)
    again = client.completions.create(model=MODEL_ID, prompt=prompt, max_tokens=4)
    # All but the prompt's last token come from the snapshot of the first.
    assert again.usage.prompt_tokens_details.cached_tokens == \
        again.usage.prompt_tokens - 1


# ------------------------------------------------------------- streaming

def test_streaming_matches_the_whole_answer_and_ends_with_usage(client):
    kwargs = dict(model=MODEL_ID, prompt=PROMPT, max_tokens=40, seed=11,
                  temperature=0.8)
    whole = client.completions.create(**kwargs)
    chunks = list(client.completions.create(
        **kwargs, stream=True, stream_options={"include_usage": True}))
    # How many chunks depends on how fast this client reads (a slow reader
    # gets fewer, larger ones); test_a_client_gone_mid_stream_frees_its_slot
    # reads the first chunks of a stream far from finished.
    text_chunks = [c for c in chunks if c.choices]
    assert text_chunks
    assert "".join(c.choices[0].text for c in text_chunks) == whole.choices[0].text
    assert all(c.choices[0].finish_reason is None for c in text_chunks[:-1])
    assert text_chunks[-1].choices[0].finish_reason == whole.choices[0].finish_reason
    usage_chunk = chunks[-1]
    assert usage_chunk.choices == []
    assert usage_chunk.usage.completion_tokens == whole.usage.completion_tokens
    assert usage_chunk.usage.prompt_tokens == whole.usage.prompt_tokens
    assert all(c.usage is None for c in chunks[:-1])
    assert len({c.id for c in chunks}) == 1


def test_streaming_without_include_usage_has_no_usage(client):
    chunks = list(client.completions.create(model=MODEL_ID, prompt=PROMPT,
                                            max_tokens=8, stream=True))
    assert chunks and all(c.choices for c in chunks)
    assert all(getattr(c, "usage", None) is None for c in chunks)


# ------------------------------------------------------------- sampling

def test_same_seed_same_text(client):
    def run(seed):
        return client.completions.create(model=MODEL_ID, prompt=PROMPT,
                                         max_tokens=48, temperature=1.0,
                                         top_p=0.95, seed=seed).choices[0].text
    first = run(1234)
    assert run(1234) == first
    assert any(run(s) != first for s in (1, 2, 3)), "the seed changes the sample"


def test_same_tokens_as_the_grpc_api(server, client, pb):
    c = client.completions.create(model=MODEL_ID, prompt=PROMPT, max_tokens=32,
                                  temperature=0.9, seed=77, logprobs=0,
                                  extra_body={"top_k": 50})
    messages = grpc_generate(server, pb, pb.GenerateRequest(
        text=PROMPT,
        sampling=pb.SamplingParams(temperature=0.9, top_k=50, seed=77),
        stopping=pb.StoppingCriteria(max_new_tokens=32),
        logprobs=pb.LogprobsOptions(enabled=True)))
    ids = [i for m in messages for i in m.token_ids]
    assert "".join(m.text for m in messages) == c.choices[0].text
    assert len(ids) == c.usage.completion_tokens
    grpc_logprobs = [lp.chosen.logprob for m in messages for lp in m.logprobs]
    # Each token's log probability, to the bit: the same tokens were sampled
    # from the same distributions.
    assert c.choices[0].logprobs.token_logprobs == grpc_logprobs
    # One token per byte: each token's text is its byte.
    assert c.choices[0].logprobs.tokens[:5] == [chr(i) for i in ids[:5]]


def test_stop_strings(client):
    base = client.completions.create(model=MODEL_ID, prompt=PROMPT, max_tokens=40,
                                     temperature=0).choices[0].text
    stop = next(ch for ch in base[3:] if ch.isalpha())
    cut = base[:base.index(stop)]
    for form in (stop, [stop, "\u00e9\u00e9\u00e9"]):
        c = client.completions.create(model=MODEL_ID, prompt=PROMPT, max_tokens=40,
                                      temperature=0, stop=form)
        assert c.choices[0].text == cut
        assert c.choices[0].finish_reason == "stop"


def test_logprobs(client):
    c = client.completions.create(model=MODEL_ID, prompt=PROMPT, max_tokens=16,
                                  temperature=0, logprobs=3)
    lp = c.choices[0].logprobs
    n = c.usage.completion_tokens
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == n
    assert "".join(lp.tokens) == c.choices[0].text
    assert lp.text_offset == sorted(lp.text_offset) and lp.text_offset[0] == 0
    for token, logprob, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs):
        assert logprob <= 0
        assert top[token] == logprob, "the chosen token is among them"
        assert 1 <= len(top) <= 4
        # Greedy: the chosen token is the most likely one.
        assert logprob == max(top.values())


def test_presence_and_frequency_penalties_follow_openai(client):
    """Greedy: each chosen token has the best logit once the penalties of the
    tokens generated before it are subtracted (frequency_penalty per earlier
    time, presence_penalty once; the prompt's tokens do not count). The
    logprobs are the model's own, and a log-softmax differs from the logits
    by one constant per step, so ranking them ranks the logits."""
    presence, frequency = 0.5, 0.7
    c = client.completions.create(model=MODEL_ID, prompt=PROMPT, max_tokens=48,
                                  temperature=0, logprobs=5,
                                  presence_penalty=presence,
                                  frequency_penalty=frequency)
    lp = c.choices[0].logprobs
    counts = {}
    penalised_choices = 0
    for token, top in zip(lp.tokens, lp.top_logprobs):
        def score(t):
            n = counts.get(t, 0)
            return top[t] - frequency * n - (presence if n else 0.0)
        best = max(top, key=score)
        assert score(token) >= score(best) - 1e-5, (token, top, counts)
        # Without the penalties another token would have won.
        penalised_choices += top[token] < max(top.values())
        counts[token] = counts.get(token, 0) + 1
    assert penalised_choices > 0
    plain = client.completions.create(model=MODEL_ID, prompt=PROMPT,
                                      max_tokens=48, temperature=0)
    assert c.choices[0].text != plain.choices[0].text

    def most_repeated(text):
        return max(text.count(ch) for ch in set(text))
    # Positive penalties repeat less; negative ones repeat more.
    assert most_repeated(c.choices[0].text) < most_repeated(plain.choices[0].text)
    eager = client.completions.create(model=MODEL_ID, prompt=PROMPT,
                                      max_tokens=48, temperature=0,
                                      presence_penalty=-2, frequency_penalty=-2)
    assert most_repeated(eager.choices[0].text) > \
        most_repeated(plain.choices[0].text)


def test_penalties_give_the_same_tokens_over_grpc(server, client, pb):
    c = client.completions.create(model=MODEL_ID, prompt=PROMPT, max_tokens=40,
                                  temperature=0.9, seed=5, presence_penalty=0.8,
                                  frequency_penalty=-0.4,
                                  extra_body={"repetition_penalty": 1.1})
    messages = grpc_generate(server, pb, pb.GenerateRequest(
        text=PROMPT,
        sampling=pb.SamplingParams(temperature=0.9, seed=5, presence_penalty=0.8,
                                   frequency_penalty=-0.4,
                                   repetition_penalty=1.1),
        stopping=pb.StoppingCriteria(max_new_tokens=40)))
    assert "".join(m.text for m in messages) == c.choices[0].text
    # Out of range over gRPC: INVALID_ARGUMENT naming the field.
    with pytest.raises(grpc.RpcError) as info:
        grpc_generate(server, pb, pb.GenerateRequest(
            text=PROMPT, sampling=pb.SamplingParams(frequency_penalty=2.5)))
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "sampling.frequency_penalty" in info.value.details()


def test_min_tokens_holds_stop_strings_back(client):
    """A stop string ending before the min_tokens-th token is text like any
    other; the first one ending at it or later stops (vLLM's rule). Greedy,
    so the tokens are the same whatever stops them."""
    base = client.completions.create(model=MODEL_ID, prompt=PROMPT,
                                     max_tokens=40, temperature=0).choices[0].text
    assert base.isascii()  # one token per character
    stop = next(ch for ch in base[2:] if ch.isalpha())
    first = base.index(stop)
    min_tokens = first + 3
    want_end = base.find(stop, min_tokens - 1)
    c = client.completions.create(model=MODEL_ID, prompt=PROMPT, max_tokens=40,
                                  temperature=0, stop=stop,
                                  extra_body={"min_tokens": min_tokens})
    if want_end < 0:
        assert c.choices[0].text == base
        assert c.choices[0].finish_reason == "length"
    else:
        assert c.choices[0].text == base[:want_end]
        assert c.choices[0].finish_reason == "stop"
    assert stop in c.choices[0].text[:min_tokens]
    assert c.usage.completion_tokens >= min_tokens


def test_min_tokens_masks_the_stop_ids(client):
    """Up to the min_tokens-th token the stop ids are never chosen: greedy
    picks the best of the other tokens (the logprobs are the model's own);
    after it a stop id ends the completion."""
    free = client.completions.create(model=MODEL_ID, prompt=PROMPT,
                                     max_tokens=12, temperature=0, logprobs=1)
    held = [ord(ch) for ch in free.choices[0].text[:2]]
    min_tokens = 6
    c = client.completions.create(model=MODEL_ID, prompt=PROMPT, max_tokens=40,
                                  temperature=0, logprobs=5,
                                  extra_body={"min_tokens": min_tokens,
                                              "stop_token_ids": held})
    lp = c.choices[0].logprobs
    assert c.usage.completion_tokens >= min_tokens
    for token, top in zip(lp.tokens[:min_tokens], lp.top_logprobs):
        assert ord(token) not in held
        others = {t: v for t, v in top.items() if ord(t) not in held}
        assert top[token] == max(others.values()), (token, top)
    # The first token would have been a stop id.
    assert ord(free.choices[0].text[0]) in held
    assert not any(ord(ch) in held for ch in c.choices[0].text)
    if c.usage.completion_tokens < 40:
        assert c.choices[0].finish_reason == "stop"


def test_min_tokens_over_grpc(server, client, pb):
    c = client.completions.create(model=MODEL_ID, prompt=PROMPT, max_tokens=30,
                                  temperature=0.8, seed=21, stop=" ",
                                  extra_body={"min_tokens": 10})
    messages = grpc_generate(server, pb, pb.GenerateRequest(
        text=PROMPT, sampling=pb.SamplingParams(temperature=0.8, seed=21),
        stopping=pb.StoppingCriteria(max_new_tokens=30, min_new_tokens=10,
                                     stop=[" "])))
    assert "".join(m.text for m in messages) == c.choices[0].text
    assert messages[-1].usage.generated_tokens == c.usage.completion_tokens >= 10
    with pytest.raises(grpc.RpcError) as info:
        grpc_generate(server, pb, pb.GenerateRequest(
            text=PROMPT, stopping=pb.StoppingCriteria(max_new_tokens=5,
                                                      min_new_tokens=6)))
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "stopping.min_new_tokens" in info.value.details()


# ------------------------------------------------------------- n > 1

def test_n_choices_are_the_completions_seeded_seed_plus_index(client):
    """The prompt is read once and forked: choice i is exactly what a request
    of one completion seeded seed + i gives; usage counts the prompt once and
    every choice's tokens."""
    kwargs = dict(model=MODEL_ID, prompt=PROMPT, max_tokens=24, temperature=1.0,
                  seed=300)
    c = client.completions.create(n=3, **kwargs)
    assert [ch.index for ch in c.choices] == [0, 1, 2]
    singles = [client.completions.create(**{**kwargs, "seed": 300 + i})
               for i in range(3)]
    for choice, single in zip(c.choices, singles):
        assert choice.text == single.choices[0].text
        assert choice.finish_reason == single.choices[0].finish_reason
    assert len({ch.text for ch in c.choices}) > 1, "the seeds differ"
    assert c.usage.prompt_tokens == len(PROMPT.encode())
    assert c.usage.completion_tokens == \
        sum(s.usage.completion_tokens for s in singles)
    assert c.usage.total_tokens == c.usage.prompt_tokens + c.usage.completion_tokens


def test_n_streams_each_choice_with_its_index(client):
    kwargs = dict(model=MODEL_ID, prompt=PROMPT, max_tokens=30, temperature=0.9,
                  seed=41, n=4, logprobs=1)
    whole = client.completions.create(**kwargs)
    chunks = list(client.completions.create(
        **kwargs, stream=True, stream_options={"include_usage": True}))
    texts, finishes, offsets = {}, {}, {}
    for chunk in chunks[:-1]:
        (choice,) = chunk.choices
        assert choice.index not in finishes, "a chunk after its choice ended"
        texts[choice.index] = texts.get(choice.index, "") + choice.text
        offsets.setdefault(choice.index, []).extend(choice.logprobs.text_offset)
        if choice.finish_reason is not None:
            finishes[choice.index] = choice.finish_reason
    assert sorted(texts) == [0, 1, 2, 3]
    for choice in whole.choices:
        assert texts[choice.index] == choice.text
        assert finishes[choice.index] == choice.finish_reason
        assert offsets[choice.index] == choice.logprobs.text_offset
    usage = chunks[-1]
    assert usage.choices == []
    assert usage.usage.completion_tokens == whole.usage.completion_tokens
    assert usage.usage.prompt_tokens == whole.usage.prompt_tokens == \
        len(PROMPT.encode())


def test_n_choices_stop_on_their_own(client):
    """Each choice has its own stop rules: the ones that meet the stop string
    end early, the others run to max_tokens."""
    c = client.completions.create(model=MODEL_ID, prompt=PROMPT, max_tokens=40,
                                  temperature=1.0, seed=8, n=6, stop="e")
    assert len(c.choices) == 6
    for choice in c.choices:
        assert "e" not in choice.text
        assert choice.finish_reason == ("stop" if len(choice.text) < 40
                                        else "length")
    assert c.usage.completion_tokens >= sum(len(ch.text) for ch in c.choices)


def test_n_over_grpc(server, client, pb):
    c = client.completions.create(model=MODEL_ID, prompt=PROMPT, max_tokens=20,
                                  temperature=1.0, seed=9, n=3)
    messages = grpc_generate(server, pb, pb.GenerateRequest(
        text=PROMPT, n=3, sampling=pb.SamplingParams(temperature=1.0, seed=9),
        stopping=pb.StoppingCriteria(max_new_tokens=20)))
    texts, usage = {}, {}
    for m in messages:
        assert m.index < 3
        assert m.index not in usage, "a message after its sequence's last"
        texts[m.index] = texts.get(m.index, "") + m.text
        if m.finish_reason:
            usage[m.index] = m.usage
    assert [texts[i] for i in range(3)] == [ch.text for ch in c.choices]
    assert sum(u.generated_tokens for u in usage.values()) == \
        c.usage.completion_tokens
    assert all(u.prompt_tokens == c.usage.prompt_tokens for u in usage.values())
    with pytest.raises(grpc.RpcError) as info:
        grpc_generate(server, pb, pb.GenerateRequest(text=PROMPT, n=9))
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "n must be in [1, 8], got 9" in info.value.details()


def test_n_beyond_the_slots_is_refused(client):
    with pytest.raises(openai.BadRequestError) as info:
        client.completions.create(model=MODEL_ID, prompt=PROMPT, max_tokens=4,
                                  n=9)
    assert info.value.body["param"] == "n"
    assert info.value.body["message"] == "n must be in [1, 8], got 9"


def test_a_client_gone_mid_stream_frees_every_slot_of_its_n(server, client):
    stream = client.completions.create(model=MODEL_ID, prompt=PROMPT,
                                       max_tokens=4000, stream=True, n=5,
                                       extra_body={"ignore_eos": True})
    seen = set()
    for chunk in stream:
        seen.add(chunk.choices[0].index)
        if len(seen) == 5:
            break
    assert server.sample("seqboat_state_slots_used") == 5
    stream.close()
    server.wait_for("seqboat_state_slots_used", lambda v: v == 0)
    server.wait_for("seqboat_num_requests_running", lambda v: v == 0)


# ------------------------------------------------------------- errors

@pytest.mark.parametrize("kwargs,param", [
    (dict(model="gpt-4"), "model"),
    (dict(temperature=500), "temperature"),
    (dict(top_p=2.0), "top_p"),
    (dict(max_tokens=0), "max_tokens"),
    (dict(max_tokens=100000), "max_tokens"),
    (dict(logprobs=50), "logprobs"),
    (dict(n=0), "n"),
    (dict(n=17), "n"),
    (dict(n=2, best_of=3), "best_of"),
    (dict(presence_penalty=2.5), "presence_penalty"),
    (dict(frequency_penalty=-3), "frequency_penalty"),
    (dict(stop=[""]), "stop"),
    (dict(prompt=""), "prompt"),
    (dict(prompt=[100000]), "prompt"),
    (dict(extra_body={"top_k": -5}), "top_k"),
    (dict(extra_body={"min_tokens": 5}), "min_tokens"),  # > max_tokens 4
    (dict(extra_body={"min_tokens": -1}), "min_tokens"),
    (dict(extra_body={"bogus": 1}), "bogus"),
])
def test_bad_values_are_400_naming_the_parameter(client, kwargs, param):
    args = dict(model=MODEL_ID, prompt=PROMPT, max_tokens=4)
    args.update(kwargs)
    with pytest.raises(openai.BadRequestError) as info:
        client.completions.create(**args)
    e = info.value
    assert e.status_code == 400
    assert_error_shape(e.response.json())
    assert e.body["param"] == param
    assert e.body["type"] == "invalid_request_error"
    assert param in e.body["message"]


def test_bad_json_and_bad_bodies(server):
    status, body = raw_post(server, "/v1/completions", b'{"prompt": "x", ')
    assert status == 400
    assert_error_shape(body)
    assert "JSON" in body["error"]["message"]
    status, body = raw_post(server, "/v1/completions", b'["not", "an object"]')
    assert status == 400
    assert_error_shape(body)
    # Over the body limit (4 x --max_prompt_bytes + 64 KiB): refused before
    # a byte of it is sent.
    host, port = server.openai.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % (3 << 20))
        reply = b""
        while b"}}" not in reply:
            data = s.recv(4096)
            if not data:
                break
            reply += data
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413"), reply
    body = json.loads(body)
    assert_error_shape(body)
    assert body["error"]["code"] == "body_too_large"


def test_unknown_paths_and_methods(server):
    status, body = raw_post(server, "/v1/chat/completion", b"{}")
    assert status == 404
    assert_error_shape(body)
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(f"http://{server.openai}/v1/completions", timeout=10)
    assert info.value.code == 405
    assert_error_shape(json.loads(info.value.read()))


# ------------------------------------------------------------- one engine

def test_a_client_gone_mid_stream_frees_its_slot(server, client):
    cancelled = 'seqboat_requests_total{code="CANCELLED",frontend="http"}'
    before = server.sample(cancelled) or 0
    stream = client.completions.create(model=MODEL_ID, prompt=PROMPT,
                                       max_tokens=4000, stream=True,
                                       extra_body={"ignore_eos": True})
    got = 0
    for chunk in stream:
        got += 1
        if got == 3:
            break
    assert server.sample("seqboat_num_requests_running") == 1
    stream.close()
    # The slot comes back long before 4000 tokens could have been generated.
    server.wait_for("seqboat_num_requests_running", lambda v: v == 0)
    server.wait_for("seqboat_state_slots_used", lambda v: v == 0)
    server.wait_for(cancelled, lambda v: v == before + 1)
    # And nothing generates for it any more.
    tokens = 'seqboat_generation_tokens_total{frontend="http"}'
    now = server.sample(tokens)
    time.sleep(0.5)
    assert server.sample(tokens) == now


def test_a_client_gone_before_its_answer_frees_its_slot(server):
    """Not streaming: nothing is written until the end, so only the server's
    watch on the socket can notice the client leave."""
    body = json.dumps({"prompt": PROMPT, "max_tokens": 4000,
                       "ignore_eos": True}).encode()
    host, port = server.openai.rsplit(":", 1)
    with socket.create_connection((host, int(port))) as s:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        server.wait_for("seqboat_num_requests_running", lambda v: v == 1)
    server.wait_for("seqboat_num_requests_running", lambda v: v == 0)
    server.wait_for("seqboat_state_slots_used", lambda v: v == 0)


def test_http_and_grpc_share_the_metrics(server, client, pb):
    ok_http = 'seqboat_requests_total{code="OK",frontend="http"}'
    ok_grpc = 'seqboat_requests_total{code="OK",frontend="grpc"}'
    http_before = server.sample(ok_http) or 0
    grpc_before = server.sample(ok_grpc) or 0
    client.completions.create(model=MODEL_ID, prompt=PROMPT, max_tokens=3)
    grpc_generate(server, pb, pb.GenerateRequest(
        text=PROMPT, stopping=pb.StoppingCriteria(max_new_tokens=3)))
    server.wait_for(ok_http, lambda v: v == http_before + 1)
    server.wait_for(ok_grpc, lambda v: v == grpc_before + 1)
    text = server.metrics()
    assert 'seqboat_time_to_first_token_seconds_count{frontend="http"}' in text
    assert 'seqboat_time_to_first_token_seconds_count{frontend="grpc"}' in text


# ------------------------------------------------------------- README

def readme_block(marker):
    """The README code block holding `marker`."""
    text = (ROOT / "README.md").read_text()
    for block in re.findall(r"^```(?:sh|python)\n(.*?)^```", text, re.S | re.M):
        if marker in block:
            return block
    raise AssertionError(f"README.md has no code block with {marker!r}")


def test_readme_curl_streams_as_written(server):
    block = readme_block("curl -N")
    command = block.replace("localhost:8000", server.openai)
    out = subprocess.run(["bash", "-c", command], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    events = [e for e in out.split("\n\n") if e.strip()]
    assert len(events) >= 2
    assert all(e.startswith("data: ") for e in events), out[:500]
    assert events[-1] == "data: [DONE]"
    chunks = [json.loads(e[len("data: "):]) for e in events[:-1]]
    assert chunks[0]["object"] == "text_completion"
    assert any(c["choices"] and c["choices"][0]["finish_reason"] for c in chunks)


def test_readme_python_example_runs_as_written(server):
    block = readme_block("from openai import OpenAI")
    code = block.replace("localhost:8000", server.openai)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, timeout=120, check=True).stdout
    assert out.strip()
