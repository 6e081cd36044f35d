"""Speculative decoding on a real seqboat_server (the bundled model): on by
flag for requests that name no method, off or on per request over gRPC and
HTTP, by prompt lookup, a draft model or a model's MTP head; the output is what decoding without
it gives, greedy and seeded alike; the spec_decode metrics count the drafts
per method; bad options are refused by name."""

import json
import re
import subprocess
import urllib.error
import urllib.request

import grpc
import pytest

from live_server import MODEL, ROOT, start_server, stop_server
from seqboat.v1 import generate_pb2 as pb
from seqboat.v1 import generate_pb2_grpc as pb_grpc

# Repetitive text: prompt lookup finds its drafts in the prompt.
PROMPT = ("def add(a, b):\n    return a + b\n\n" * 6) + "def add("
OTHER = "Once upon a time, in a quiet village by the sea, there lived"


@pytest.fixture(scope="module")
def spec_server(tmp_path_factory):
    # A fixed threshold: auto's measure on a loaded machine could turn
    # rounds off for the bundled model, whose step is bound by compute.
    s = start_server(tmp_path_factory, "speculative",
                     ["--speculative_method=prompt_lookup",
                      "--num_speculative_tokens=4", "--max_draft_tokens=6",
                      "--speculative_max_batch=8"])
    yield s
    stop_server(s)


@pytest.fixture(scope="module")
def draft_server(tmp_path_factory):
    # The bundled Mamba baseline drafts for the bundled hybrid: the same
    # tokenizer, trained on the same text.
    s = start_server(tmp_path_factory, "draft_model",
                     ["--speculative_method=draft_model",
                      f"--speculative_draft_model_dir={ROOT / 'weights/models/mamba-baseline'}",
                      "--num_speculative_tokens=3", "--speculative_max_batch=8"])
    yield s
    stop_server(s)


def generate(server, prompt, method=pb.SPECULATIVE_METHOD_UNSPECIFIED,
             draft=None, temperature=0.0, seed=None, tokens=48, n=None):
    spec = pb.SpeculativeOptions(method=method)
    if draft is not None:
        spec.num_draft_tokens = draft
    sampling = pb.SamplingParams(temperature=temperature)
    if seed is not None:
        sampling.seed = seed
    request = pb.GenerateRequest(
        text=prompt, sampling=sampling, speculative=spec,
        stopping=pb.StoppingCriteria(max_new_tokens=tokens, ignore_eos=True))
    if n is not None:
        request.n = n
    with grpc.insecure_channel(server.grpc) as channel:
        out = list(pb_grpc.TextGenerationStub(channel).Generate(request, timeout=120))
    texts = {}
    for m in out:
        texts[m.index] = texts.get(m.index, "") + m.text
    return [texts[i] for i in sorted(texts)]


def drafted(server):
    return (server.sample('seqboat_spec_decode_num_draft_tokens_total{method="prompt_lookup"}'),
            server.sample('seqboat_spec_decode_num_accepted_tokens_total{method="prompt_lookup"}'))


def test_greedy_output_is_decodings_without_it(spec_server):
    before_drafted, before_accepted = drafted(spec_server)
    on = generate(spec_server, PROMPT)
    after_drafted, after_accepted = drafted(spec_server)
    assert after_drafted > before_drafted
    assert after_accepted > before_accepted
    off = generate(spec_server, PROMPT, method=pb.SPECULATIVE_METHOD_NONE)
    assert on == off
    assert drafted(spec_server)[0] == after_drafted  # NONE drafted nothing
    assert generate(spec_server, OTHER, draft=6) == generate(
        spec_server, OTHER, method=pb.SPECULATIVE_METHOD_NONE)


def test_seeded_sampling_and_n_are_unchanged(spec_server):
    for seed in (1, 2, 3):
        assert generate(spec_server, PROMPT, temperature=0.8, seed=seed) == generate(
            spec_server, PROMPT, method=pb.SPECULATIVE_METHOD_NONE,
            temperature=0.8, seed=seed)
    assert generate(spec_server, PROMPT, temperature=1.0, seed=9, n=3) == generate(
        spec_server, PROMPT, method=pb.SPECULATIVE_METHOD_NONE,
        temperature=1.0, seed=9, n=3)


def test_rounds_by_acceptance_add_up(spec_server):
    generate(spec_server, PROMPT)
    metrics = spec_server.metrics()
    rounds = {}
    for line in metrics.splitlines():
        if line.startswith("seqboat_spec_decode_rounds_by_accepted_total{"):
            label, value = line.rsplit(" ", 1)
            rounds[int(label.split('"')[1])] = float(value)
    assert rounds and max(rounds) <= 6
    drafts = spec_server.sample('seqboat_spec_decode_num_drafts_total{method="prompt_lookup"}')
    assert sum(rounds.values()) == drafts
    assert sum(a * c for a, c in rounds.items()) == drafted(spec_server)[1]


def complete(server, body):
    body = {"prompt": PROMPT, "max_tokens": 32, "temperature": 0, **body}
    request = urllib.request.Request(f"{server.base_url}/completions",
                                     data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as r:
        return json.loads(r.read())["choices"][0]["text"]


def test_openai_speculative_option(spec_server):
    assert complete(spec_server, {"speculative": {"method": "prompt_lookup",
                                                  "num_draft_tokens": 2}}) == \
        complete(spec_server, {"speculative": {"method": "none"}})
    for bad, named in ((["x"], "must be an object"),
                       ({"method": "medusa"}, "speculative.method"),
                       ({"num_draft_tokens": 7}, "num_draft_tokens"),
                       ({"ngram_min": 5, "ngram_max": 2}, "ngram"),
                       ({"draft_model": "x"}, "speculative.draft_model")):
        with pytest.raises(urllib.error.HTTPError) as err:
            complete(spec_server, {"speculative": bad})
        assert err.value.code == 400
        body = json.loads(err.value.read())
        assert named in body["error"]["message"], body


def test_grpc_refuses_bad_options_by_name(spec_server):
    for draft, named in ((0, "num_draft_tokens"), (7, "num_draft_tokens")):
        with pytest.raises(grpc.RpcError) as err:
            generate(spec_server, OTHER, draft=draft)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert named in err.value.details()
    with pytest.raises(grpc.RpcError) as err:
        generate(spec_server, OTHER, method=7)
    assert "speculative.method" in err.value.details()


def test_python_client_speculative_option(spec_server):
    import seqboat
    with seqboat.Client(spec_server.grpc) as client:
        on = client.generate(PROMPT, max_tokens=24, temperature=0,
                             speculative={"method": "prompt_lookup", "num_draft_tokens": 3})
        off = client.generate(PROMPT, max_tokens=24, temperature=0,
                              speculative={"method": "none"})
        assert on.text == off.text
        with pytest.raises(seqboat.errors.InvalidArgument, match="speculative.method"):
            client.generate(PROMPT, max_tokens=4, speculative={"method": "medusa"})
        with pytest.raises(seqboat.errors.InvalidArgument, match="num_draft_tokens"):
            client.generate(PROMPT, max_tokens=4, speculative={"num_draft_tokens": 99})


def test_draft_model_output_is_decodings_without_it(draft_server):
    def counts():
        return [draft_server.sample(f'seqboat_spec_decode_num_{what}_total{{method="draft_model"}}')
                for what in ("drafts", "draft_tokens", "accepted_tokens")]
    before = counts()
    for prompt in (PROMPT, OTHER):
        assert generate(draft_server, prompt) == generate(
            draft_server, prompt, method=pb.SPECULATIVE_METHOD_NONE)
        assert generate(draft_server, prompt, temperature=0.9, seed=4, n=2) == generate(
            draft_server, prompt, method=pb.SPECULATIVE_METHOD_NONE,
            temperature=0.9, seed=4, n=2)
    drafts, draft_tokens, accepted = (a - b for a, b in zip(counts(), before))
    assert drafts > 0 and draft_tokens >= drafts
    # A trained drafter of the same text guesses some of them right.
    assert 0 < accepted <= draft_tokens
    assert draft_server.sample(
        'seqboat_spec_decode_num_drafts_total{method="prompt_lookup"}') == 0
    # Prompt lookup still runs by request on the same server.
    assert generate(draft_server, PROMPT, method=pb.SPECULATIVE_METHOD_PROMPT_LOOKUP) == \
        generate(draft_server, PROMPT, method=pb.SPECULATIVE_METHOD_NONE)


def test_draft_model_needs_one(spec_server):
    with pytest.raises(grpc.RpcError) as err:
        generate(spec_server, OTHER, method=pb.SPECULATIVE_METHOD_DRAFT_MODEL)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "--speculative_draft_model_dir" in err.value.details()
    with pytest.raises(urllib.error.HTTPError) as err:
        complete(spec_server, {"speculative": {"method": "draft_model"}})
    assert err.value.code == 400
    assert "--speculative_draft_model_dir" in json.loads(err.value.read())["error"]["message"]


def test_auto_max_batch_is_measured_logged_and_published(tmp_path_factory):
    # The default, auto: measured at start-up on the loaded model, at most
    # half the slots (a speculating sequence holds two).
    s = start_server(tmp_path_factory, "speculative_auto",
                     ["--log_level=info", "--max_slots=8",
                      "--speculative_method=prompt_lookup"])
    try:
        log = s.log_path.read_text()
        found = re.search(
            r"speculation off above (\d+) running sequences: step at batch 1 = "
            r"[0-9.]+ ms, round of 4 drafts = [0-9.]+ ms", log)
        assert found, log
        measured = int(found.group(1))
        assert 0 <= measured <= 4
        assert s.sample("seqboat_spec_decode_max_batch") == measured
        # Whatever it found, the output is decoding's without speculation.
        assert generate(s, PROMPT) == generate(
            s, PROMPT, method=pb.SPECULATIVE_METHOD_NONE)
    finally:
        stop_server(s)


def test_bad_max_batch_is_refused_by_name(tmp_path_factory):
    binary = ROOT / "bazel-bin/server/seqboat_server"
    out = subprocess.run([str(binary), "--model_dir=weights/models/default",
                          "--speculative_max_batch=many"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "--speculative_max_batch must be auto or a count >= 0, got many" in (
        out.stdout + out.stderr)


MTP_MODEL = ROOT / "tests/data/tiny_qwen3_5_mtp"


@pytest.fixture(scope="module")
def mtp_server(tmp_path_factory):
    # A tiny Qwen3.5 with a (random) multi-token-prediction head.
    s = start_server(tmp_path_factory, "mtp",
                     [f"--model_dir={MTP_MODEL}", "--speculative_method=mtp",
                      "--num_speculative_tokens=3", "--speculative_max_batch=8"])
    yield s
    stop_server(s)


def test_mtp_output_is_decodings_without_it(mtp_server):
    def count():
        return mtp_server.sample('seqboat_spec_decode_num_draft_tokens_total{method="mtp"}')
    before = count()
    for seed in (None, 5):
        temperature = 0.0 if seed is None else 0.9
        assert generate(mtp_server, OTHER, temperature=temperature, seed=seed) == \
            generate(mtp_server, OTHER, method=pb.SPECULATIVE_METHOD_NONE,
                     temperature=temperature, seed=seed)
    assert count() > before
    body = {"prompt": OTHER, "max_tokens": 16, "temperature": 0,
            "speculative": {"method": "mtp", "num_draft_tokens": 2}}
    plain = dict(body, speculative={"method": "none"})
    assert complete(mtp_server, body) == complete(mtp_server, plain)


def test_mtp_needs_a_head(spec_server):
    with pytest.raises(grpc.RpcError) as err:
        generate(spec_server, OTHER, method=pb.SPECULATIVE_METHOD_MTP)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "multi-token-prediction head" in err.value.details()
    with pytest.raises(urllib.error.HTTPError) as err:
        complete(spec_server, {"speculative": {"method": "mtp"}})
    assert err.value.code == 400
    assert "multi-token-prediction head" in json.loads(err.value.read())["error"]["message"]
    # Nor does such a server start with it on by flag.
    proc = subprocess.run([str(ROOT / "bazel-bin/server/seqboat_server"), f"--model_dir={MODEL}",
                           "--host=127.0.0.1", "--port=0", "--http_port=0", "--openai_port=0",
                           "--speculative_method=mtp"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "no multi-token-prediction head" in proc.stderr
