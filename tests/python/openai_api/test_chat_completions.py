"""/v1/chat/completions end to end: the official `openai` SDK against a real
seqboat_server on the bundled model, whose tokenizer_config.json holds a chat
template (every message a fortune ended by <|endoftext|>, the byte tokenizer's
special token 256); the bundled mamba-baseline model has none.

The prompt a chat request runs is checked against transformers' rendering of
the same template: the answer equals the /v1/completions answer to those
token ids, the template's <|endoftext|> being id 256 and a client's being its
13 bytes."""

import json
import pathlib
import re
import subprocess
import urllib.error
import urllib.request

import openai
import pytest
from tokenizers import Tokenizer, models
from transformers import PreTrainedTokenizerFast

from live_server import start_server, stop_server

ROOT = pathlib.Path(__file__).resolve().parents[3]
MODEL_ID = "seqboat-hybrid-bytes"
EOS = 256
CONFIG = json.loads((ROOT / "weights/models/default/tokenizer_config.json").read_text())

MESSAGES = [{"role": "system", "content": "Fortunes follow."},
            {"role": "user", "content": "The secret of happiness is"}]


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.base_url, api_key="unused",
                         max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    """A server on the bundled model without a chat template."""
    s = start_server(tmp_path_factory, "openai-baseline",
                     [f"--model_dir={ROOT / 'weights/models/mamba-baseline'}",
                      "--max_slots=2"])
    yield s
    stop_server(s)


def rendered(messages):
    """transformers' rendering of the model's chat template."""
    backend = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token=CONFIG["eos_token"])
    tok.chat_template = CONFIG["chat_template"]
    return tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def prompt_ids(messages):
    """The ids of the rendered prompt: bytes, and 256 for the template's EOS."""
    text = rendered(messages)
    ids = []
    for i, piece in enumerate(text.split(CONFIG["eos_token"])):
        if i > 0:
            ids.append(EOS)
        ids += list(piece.encode())
    return ids


def raw_post(server, body):
    request = urllib.request.Request(f"http://{server.openai}/v1/chat/completions",
                                     data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


# ------------------------------------------------------------- answers

def test_chat_runs_the_rendered_template(client):
    c = client.chat.completions.create(model=MODEL_ID, messages=MESSAGES, max_tokens=24,
                                       temperature=0)
    assert c.object == "chat.completion"
    assert c.id.startswith("chatcmpl-")
    assert c.model == MODEL_ID
    (choice,) = c.choices
    assert choice.index == 0
    assert choice.message.role == "assistant"
    assert isinstance(choice.message.content, str) and choice.message.content
    assert choice.finish_reason in ("length", "stop")
    ids = prompt_ids(MESSAGES)
    assert ids.count(EOS) == 2
    assert c.usage.prompt_tokens == len(ids)
    assert 1 <= c.usage.completion_tokens <= 24
    assert c.usage.total_tokens == c.usage.prompt_tokens + c.usage.completion_tokens
    # The same prompt as token ids through /v1/completions: the same answer.
    same = client.completions.create(model=MODEL_ID, prompt=ids, max_tokens=24,
                                     temperature=0)
    assert same.choices[0].text == choice.message.content
    assert same.usage.prompt_tokens == c.usage.prompt_tokens


def test_special_token_text_in_a_message_stays_text(client):
    messages = [{"role": "user", "content": "a<|endoftext|>b"}]
    c = client.chat.completions.create(model=MODEL_ID, messages=messages, max_tokens=4,
                                       temperature=0)
    # The content's 15 bytes, then the template's one EOS.
    assert c.usage.prompt_tokens == len("a<|endoftext|>b") + 1


def test_text_parts_and_developer_messages(client):
    parts = [{"role": "developer", "content": "Fortunes follow."},
             {"role": "user", "content": [{"type": "text", "text": "The secret"},
                                          {"type": "text", "text": "of happiness is"}]}]
    joined = [{"role": "system", "content": "Fortunes follow."},
              {"role": "user", "content": "The secret\nof happiness is"}]
    a = client.chat.completions.create(model=MODEL_ID, messages=parts, max_tokens=12,
                                       temperature=0)
    b = client.chat.completions.create(model=MODEL_ID, messages=joined, max_tokens=12,
                                       temperature=0)
    assert a.choices[0].message.content == b.choices[0].message.content
    assert a.usage.prompt_tokens == len(prompt_ids(joined))


def test_streaming_matches_the_whole_answer_and_ends_with_usage(client):
    whole = client.chat.completions.create(model=MODEL_ID, messages=MESSAGES, max_tokens=32,
                                           temperature=0)
    stream = client.chat.completions.create(model=MODEL_ID, messages=MESSAGES, max_tokens=32,
                                            temperature=0, stream=True,
                                            stream_options={"include_usage": True})
    chunks = list(stream)
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert len({c.id for c in chunks}) == 1 and chunks[0].id.startswith("chatcmpl-")
    # The role first, then content, then the finish, then usage alone.
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[0].choices[0].delta.content == ""
    assert all(c.choices[0].delta.role is None for c in chunks[1:-1])
    text = "".join(c.choices[0].delta.content or "" for c in chunks[:-1])
    assert text == whole.choices[0].message.content
    finishes = [c.choices[0].finish_reason for c in chunks[:-1]]
    assert finishes[-1] == whole.choices[0].finish_reason
    assert all(f is None for f in finishes[:-1])
    assert chunks[-1].choices == []
    assert chunks[-1].usage.completion_tokens == whole.usage.completion_tokens
    assert chunks[-1].usage.prompt_tokens == whole.usage.prompt_tokens
    assert all(c.usage is None for c in chunks[:-1])


def test_stop_strings(client):
    greedy = client.chat.completions.create(model=MODEL_ID, messages=MESSAGES,
                                            max_tokens=40, temperature=0)
    text = greedy.choices[0].message.content
    stop = text[5:8]
    assert len(stop) == 3 and stop in text
    c = client.chat.completions.create(model=MODEL_ID, messages=MESSAGES, max_tokens=40,
                                       temperature=0, stop=[stop, "never seen"])
    assert c.choices[0].finish_reason == "stop"
    assert c.choices[0].message.content == text[:text.index(stop)]


def test_same_seed_same_answer(client):
    def sample(seed):
        return client.chat.completions.create(
            model=MODEL_ID, messages=MESSAGES, max_tokens=40, temperature=1.0, top_p=0.95,
            seed=seed).choices[0].message.content
    first = sample(1234)
    assert sample(1234) == first
    assert any(sample(s) != first for s in (1235, 1236, 1237))


def test_n_choices_are_the_answers_seeded_seed_plus_index(client):
    """n = 3: the prompt is read once and forked; choice i is the answer of a
    request seeded seed + i, streamed or not; usage counts the prompt once."""
    kwargs = dict(model=MODEL_ID, messages=MESSAGES, max_tokens=24, temperature=1.0,
                  seed=500)
    c = client.chat.completions.create(n=3, **kwargs)
    assert [ch.index for ch in c.choices] == [0, 1, 2]
    singles = [client.chat.completions.create(**{**kwargs, "seed": 500 + i})
               for i in range(3)]
    for choice, single in zip(c.choices, singles):
        assert choice.message.role == "assistant"
        assert choice.message.content == single.choices[0].message.content
        assert choice.finish_reason == single.choices[0].finish_reason
    assert len({ch.message.content for ch in c.choices}) > 1
    assert c.usage.prompt_tokens == len(prompt_ids(MESSAGES))
    assert c.usage.completion_tokens == sum(s.usage.completion_tokens for s in singles)

    chunks = list(client.chat.completions.create(
        n=3, stream=True, stream_options={"include_usage": True}, **kwargs))
    roles = [c_.choices[0].index for c_ in chunks[:3]]
    assert roles == [0, 1, 2]
    assert all(c_.choices[0].delta.role == "assistant" for c_ in chunks[:3])
    texts, finishes = {}, {}
    for chunk in chunks[3:-1]:
        (choice,) = chunk.choices
        assert choice.index not in finishes
        texts[choice.index] = texts.get(choice.index, "") + (choice.delta.content or "")
        if choice.finish_reason is not None:
            finishes[choice.index] = choice.finish_reason
    assert [texts.get(i, "") for i in range(3)] == \
        [ch.message.content for ch in c.choices]
    assert [finishes[i] for i in range(3)] == [ch.finish_reason for ch in c.choices]
    assert chunks[-1].usage.completion_tokens == c.usage.completion_tokens


def test_the_template_eos_ends_the_answer(client):
    # The model ends a sampled fortune with EOS (greedy decoding loops); the
    # answer stops there, not at max_tokens, and EOS is no text.
    ended = []
    for seed in range(1, 6):
        c = client.chat.completions.create(model=MODEL_ID, messages=MESSAGES,
                                           max_tokens=400, temperature=0.8, seed=seed)
        assert "<|endoftext|>" not in c.choices[0].message.content
        if c.choices[0].finish_reason == "stop":
            ended.append(c.usage.completion_tokens)
    assert ended and all(n < 400 for n in ended)


def test_logprobs(client):
    c = client.chat.completions.create(model=MODEL_ID, messages=MESSAGES, max_tokens=16,
                                       temperature=0, logprobs=True, top_logprobs=3)
    content = c.choices[0].logprobs.content
    assert len(content) == c.usage.completion_tokens
    assert c.choices[0].finish_reason == "length"
    assert b"".join(bytes(t.bytes) for t in content) == c.choices[0].message.content.encode()
    for t in content:
        assert t.logprob <= 0
        assert len(t.top_logprobs) == 3
        assert [a.logprob for a in t.top_logprobs] == sorted(
            (a.logprob for a in t.top_logprobs), reverse=True)
        # Greedy: the chosen token is the most likely one.
        assert t.top_logprobs[0].logprob == t.logprob
        assert t.top_logprobs[0].token == t.token
        try:
            assert t.token == bytes(t.bytes).decode()
        except UnicodeDecodeError:
            assert t.token.startswith("bytes:")
    plain = client.chat.completions.create(model=MODEL_ID, messages=MESSAGES, max_tokens=4,
                                           temperature=0)
    assert plain.choices[0].logprobs is None
    chosen = client.chat.completions.create(model=MODEL_ID, messages=MESSAGES, max_tokens=4,
                                            temperature=0, logprobs=True)
    assert all(t.top_logprobs == [] for t in chosen.choices[0].logprobs.content)


# ------------------------------------------------------------- errors

def assert_error(excinfo, param, *needles, code=None):
    err = excinfo.value
    assert err.status_code == 400
    body = err.body
    assert set(body) == {"message", "type", "param", "code"}, body
    assert body["type"] == "invalid_request_error"
    assert body["param"] == param, body
    if code is not None:
        assert body["code"] == code, body
    for n in needles:
        assert n in body["message"], body


def test_a_model_without_a_template_is_400(baseline):
    client = openai.OpenAI(base_url=baseline.base_url, api_key="unused", max_retries=0)
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="seqboat-mamba-bytes", messages=MESSAGES)
    assert_error(e, "messages", "The model `seqboat-mamba-bytes` has no usable chat template",
                 "tokenizer_config.json", "/v1/completions", code="no_chat_template")


@pytest.mark.parametrize("messages, needle", [
    ([], "messages must hold at least one message"),
    ([{"role": "function", "content": "x"}], "messages[0].role must be 'system', "
                                              "'developer', 'user', 'assistant' or 'tool'"),
    ([{"role": "tool", "content": "x"}], "messages[0].tool_call_id must be the id"),
    ([{"role": "user"}], "messages[0].content is missing"),
    ([{"role": "user", "content": "x"}, {"role": "user", "content": None}],
     "messages[1].content is missing"),
    ([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}],
     "messages[0].content[0] is of type 'image_url'"),
    ([{"role": "user", "content": "x"}] * 1025, "more than the limit of 1024"),
])
def test_bad_messages_are_400_naming_them(client, messages, needle):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=MODEL_ID, messages=messages)
    assert_error(e, "messages", needle)


def test_prompts_over_the_limits_are_400(client):
    # Over --max_prompt_tokens (32768) once rendered.
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=MODEL_ID, max_tokens=4,
                                       messages=[{"role": "user", "content": "x" * 40000}])
    assert_error(e, "messages", "tokens, the limit is 32768")
    # Over the rendered prompt's byte limit (16 bytes per token).
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=MODEL_ID, max_tokens=4,
                                       messages=[{"role": "user", "content": "x" * 600000}])
    assert_error(e, "messages", "over the server's limits", code="prompt_too_long")


@pytest.mark.parametrize("kwargs, param", [
    (dict(temperature=-1), "temperature"),
    (dict(max_tokens=0), "max_tokens"),
    (dict(max_completion_tokens=100000), "max_completion_tokens"),
    (dict(logprobs=True, top_logprobs=21), "top_logprobs"),
    (dict(top_logprobs=2), "top_logprobs"),
    (dict(n=0), "n"),
    (dict(n=17), "n"),
    (dict(tools=[{"type": "function", "function": {"name": "f b", "parameters": {}}}]),
     "tools"),
    (dict(response_format={"type": "yaml"}), "response_format"),
    (dict(model="gpt-4"), "model"),
])
def test_bad_values_are_400_naming_the_parameter(client, kwargs, param):
    args = dict(model=MODEL_ID, messages=MESSAGES)
    args.update(kwargs)
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(**args)
    assert_error(e, param)


def test_unknown_fields_and_tool_calls_are_400(server):
    # What the SDK would not send.
    status, body = raw_post(server, {"messages": MESSAGES, "echo": True})
    assert status == 400
    assert body["error"]["param"] == "echo"
    assert body["error"]["code"] == "unknown_parameter"
    status, body = raw_post(server, {"messages": [{"role": "user", "content": "x",
                                                   "tool_calls": [{"id": "1"}]}]})
    assert status == 400
    assert "tool_calls is only for assistant messages" in body["error"]["message"]


# ------------------------------------------------------------- README

def readme_block(marker):
    text = (ROOT / "README.md").read_text()
    for block in re.findall(r"^```sh\n(.*?)^```", text, re.S | re.M):
        if marker in block:
            return block
    raise AssertionError(f"README.md has no code block with {marker!r}")


def test_readme_chat_curl_streams_as_written(server):
    block = readme_block("/v1/chat/completions")
    assert block.lstrip().startswith("curl -N")
    command = block.replace("localhost:8000", server.openai)
    out = subprocess.run(["bash", "-c", command], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    events = [e for e in out.split("\n\n") if e.strip()]
    assert all(e.startswith("data: ") for e in events), out[:500]
    assert events[-1] == "data: [DONE]"
    chunks = [json.loads(e[len("data: "):]) for e in events[:-1]]
    assert chunks[0]["object"] == "chat.completion.chunk"
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] in ("stop", "length")
