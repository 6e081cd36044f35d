"""Structured output and tool calls end to end: the official `openai` SDK
against a real seqboat_server on the bundled fortune model (byte tokenizer).

response_format with a pydantic model through beta.chat.completions.parse
returns a parsed object for every one of 100 seeded requests sampled at
temperature 1; vLLM's guided_regex, guided_choice and guided_grammar hold on
every sample; hostile constraints get a 400 naming the parameter. Tools run
on a copy of the bundled model whose chat template is Qwen-style, with tool
markers: the prompt equals transformers' rendering, and a round trip (a named
tool call, the tool's result, the answer) and calls read from <tool_call>
markers under tool_choice auto (the output forced by a regex) come back as
OpenAI returns them, whole and streamed."""

import concurrent.futures
import enum
import json
import pathlib
import re
import shutil
import urllib.error
import urllib.request

import openai
import pydantic
import pytest
from tokenizers import Tokenizer, models
from transformers import PreTrainedTokenizerFast

from live_server import start_server, stop_server

ROOT = pathlib.Path(__file__).resolve().parents[3]
MODEL_ID = "seqboat-hybrid-bytes"
EOS_TEXT = "<|endoftext|>"
EOS = 256
USER = [{"role": "user", "content": "Tell me my fortune as JSON."}]


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0,
                         timeout=300)


def raw_post(server, path, body):
    request = urllib.request.Request(f"http://{server.openai}/v1/{path}",
                                     data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


# ------------------------------------------------------------ response_format

class Mood(str, enum.Enum):
    happy = "happy"
    wistful = "wistful"
    bold = "bold"


class Fortune(pydantic.BaseModel):
    mood: Mood
    lucky_number: int = pydantic.Field(ge=1, le=99)
    good_day: bool
    # A pattern as well: the grammar's JSON strings admit raw control
    # characters (a tab), which strict JSON parsers refuse.
    summary: str = pydantic.Field(max_length=24, **{
        "regex" if pydantic.VERSION.startswith("1.") else "pattern":
            r"^[A-Za-z ,.!']{0,24}$"})


def test_parse_returns_a_pydantic_object_for_100_of_100_sampled_requests(client):
    def one(seed):
        c = client.beta.chat.completions.parse(
            model=MODEL_ID, messages=USER, response_format=Fortune, temperature=1.0,
            seed=seed, max_tokens=400)
        return c.choices[0]

    # One first, alone: the SDK's first parse builds its generic response
    # classes, which pydantic 1 does not do safely from several threads.
    choices = [one(0)]
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        choices += list(pool.map(one, range(1, 100)))
    parsed = [c.message.parsed for c in choices]
    assert all(isinstance(p, Fortune) for p in parsed), [
        c.message.content for c, p in zip(choices, parsed) if not isinstance(p, Fortune)]
    assert all(c.finish_reason == "stop" for c in choices)
    # Sampled, not one answer 100 times.
    assert len({repr(p) for p in parsed}) > 10


def test_json_object_and_streamed_json_schema(client):
    c = client.chat.completions.create(
        model=MODEL_ID, messages=USER, response_format={"type": "json_object"},
        temperature=1.0, seed=3, max_tokens=300)
    if c.choices[0].finish_reason == "stop":
        json.loads(c.choices[0].message.content)
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0,
                                                     "maximum": 9}},
              "required": ["n"], "additionalProperties": False}
    stream = client.chat.completions.create(
        model=MODEL_ID, messages=USER, temperature=1.0, seed=4, max_tokens=64,
        stream=True,
        response_format={"type": "json_schema",
                         "json_schema": {"name": "N", "schema": schema, "strict": True}})
    text = "".join(ch.choices[0].delta.content or "" for ch in stream if ch.choices)
    assert 0 <= json.loads(text)["n"] <= 9


def test_guided_regex_choice_and_grammar_hold_on_every_sample(client):
    pattern = r"[A-Z][a-z]{1,8}( [a-z]{1,8}){0,3}\."
    grammar = 'root ::= "yes" | "no" | ("maybe " [0-9])'
    choices = ["happy", "sad", "a small dog"]

    def run(seed):
        r = client.completions.create(model=MODEL_ID, prompt="Your fortune:",
                                      temperature=1.0, seed=seed, max_tokens=64,
                                      extra_body={"guided_regex": pattern})
        c = client.chat.completions.create(model=MODEL_ID, messages=USER,
                                           temperature=1.0, seed=seed, max_tokens=32,
                                           extra_body={"guided_choice": choices})
        g = client.chat.completions.create(model=MODEL_ID, messages=USER,
                                           temperature=1.0, seed=seed, max_tokens=32,
                                           extra_body={"guided_grammar": grammar})
        return r.choices[0].text, c.choices[0].message.content, g.choices[0].message.content

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        samples = list(pool.map(run, range(16)))
    for regex_text, choice_text, grammar_text in samples:
        assert re.fullmatch(pattern, regex_text), regex_text
        assert choice_text in choices
        assert re.fullmatch(r"yes|no|maybe [0-9]", grammar_text), grammar_text


@pytest.mark.parametrize("extra, param, words", [
    ({"guided_regex": "[a-z]{1,100000}"}, "guided_regex", "repetition count"),
    ({"guided_grammar": "root ::= " + " | ".join(['"a"'] * 9000)}, "guided_grammar",
     "bytes is over the limit"),
    ({"guided_json": "{not json"}, "guided_json", "guided_json"),
    ({"guided_choice": []}, "guided_choice", "guided_choice"),
    ({"guided_regex": "a", "guided_choice": ["a"]}, "guided_choice",
     "both constrain the output"),
    ({"response_format": {"type": "json_schema",
                          "json_schema": {"name": "x", "schema": {"type": "object",
                                          "properties": {"s": {"type": "string",
                                                               "maxLength": 100000}}}}}},
     "response_format", "100000"),
    ({"response_format": {"type": "yaml"}}, "response_format", "response_format.type"),
])
def test_hostile_constraints_get_a_400_naming_the_parameter(server, extra, param, words):
    status, body = raw_post(server, "chat/completions",
                            {"messages": USER, "max_tokens": 8, **extra})
    assert status == 400, body
    assert body["error"]["param"] == param, body
    assert words in body["error"]["message"], body
    # The server keeps serving.
    status, body = raw_post(server, "completions", {"prompt": "a", "max_tokens": 2})
    assert status == 200


def test_tools_without_a_parser_refuse_auto_but_take_required(client, server):
    tools = [WEATHER]
    status, body = raw_post(server, "chat/completions",
                            {"messages": USER, "tools": tools, "max_tokens": 8})
    assert status == 400 and body["error"]["param"] == "tool_choice", body
    assert "--tool_call_parser" in body["error"]["message"]
    c = client.chat.completions.create(model=MODEL_ID, messages=USER, tools=tools,
                                       tool_choice="required", temperature=1.0, seed=1,
                                       max_tokens=200, parallel_tool_calls=False)
    (call,) = c.choices[0].message.tool_calls
    assert call.function.name == "get_weather"
    assert isinstance(json.loads(call.function.arguments)["city"], str)
    assert c.choices[0].finish_reason == "tool_calls"


# ------------------------------------------------------------------- tools

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.",
    "parameters": {"type": "object",
                   "properties": {"city": {"type": "string", "enum": ["Paris", "Oslo"]},
                                  "days": {"type": "integer", "minimum": 1, "maximum": 7}},
                   "required": ["city", "days"], "additionalProperties": False}}}

# Qwen 2.5's template in outline: tools listed in the system turn, calls as
# <tool_call> markers, results as <tool_response> in a user turn; turns end
# with the bundled model's <|endoftext|>.
QWEN_STYLE = (
    "{%- if tools %}<|im_start|>system\n"
    "{% if messages[0].role == 'system' %}{{ messages[0].content }}\n\n{% endif %}"
    "# Tools\n\n<tools>"
    "{%- for tool in tools %}\n{{ tool | tojson }}{%- endfor %}\n</tools>\n\n"
    "For each function call, return a json object within <tool_call></tool_call>:\n"
    "<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n"
    "</tool_call>{{ eos_token }}\n"
    "{%- elif messages[0].role == 'system' %}<|im_start|>system\n"
    "{{ messages[0].content }}{{ eos_token }}\n{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'user' %}<|im_start|>user\n{{ message.content }}"
    "{{ eos_token }}\n"
    "{%- elif message.role == 'assistant' %}<|im_start|>assistant\n"
    "{%- if message.content %}{{ message.content }}{% endif %}"
    "{%- if message.tool_calls %}{%- for tool_call in message.tool_calls %}\n"
    "<tool_call>\n{\"name\": \"{{ tool_call.function.name }}\", \"arguments\": "
    "{{ tool_call.function.arguments | tojson }}}\n</tool_call>"
    "{%- endfor %}{%- endif %}{{ eos_token }}\n"
    "{%- elif message.role == 'tool' %}<|im_start|>user\n<tool_response>\n"
    "{{ message.content }}\n</tool_response>{{ eos_token }}\n"
    "{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


@pytest.fixture(scope="module")
def tool_server(tmp_path_factory):
    model = tmp_path_factory.mktemp("tool-model") / "model"
    shutil.copytree(ROOT / "weights/models/default", model)
    (model / "tokenizer_config.json").write_text(
        json.dumps({"chat_template": QWEN_STYLE, "eos_token": EOS_TEXT}))
    s = start_server(tmp_path_factory, "openai-tools",
                     [f"--model_dir={model}", "--max_slots=4",
                      "--tool_call_parser=hermes"])
    yield s
    stop_server(s)


@pytest.fixture(scope="module")
def tool_client(tool_server):
    return openai.OpenAI(base_url=tool_server.base_url, api_key="unused",
                         max_retries=0, timeout=300)


def prompt_tokens(messages, tools):
    """The length of transformers' rendering in the byte tokenizer's ids."""
    backend = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token=EOS_TEXT)
    tok.chat_template = QWEN_STYLE
    text = tok.apply_chat_template(messages, tools=tools, tokenize=False,
                                   add_generation_prompt=True)
    return len(text.replace(EOS_TEXT, "\0").encode())


def test_tool_call_round_trip(tool_client):
    messages = [{"role": "system", "content": "You forecast."},
                {"role": "user", "content": "Weather in Paris for 2 days?"}]
    first = tool_client.chat.completions.create(
        model=MODEL_ID, messages=messages, tools=[WEATHER],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        temperature=1.0, seed=5, max_tokens=100)
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    (call,) = choice.message.tool_calls
    assert re.fullmatch(r"call_[A-Za-z0-9]{24}", call.id)
    assert call.type == "function" and call.function.name == "get_weather"
    arguments = json.loads(call.function.arguments)
    assert arguments["city"] in ("Paris", "Oslo") and 1 <= arguments["days"] <= 7
    assert first.usage.prompt_tokens == prompt_tokens(messages, [WEATHER])

    # The call and the tool's result go back; the answer is text.
    messages.append(choice.message.model_dump(exclude_none=True,
                                              exclude={"parsed", "refusal"}))
    messages.append({"role": "tool", "tool_call_id": call.id,
                     "content": "Sunny, 21 C."})
    answer = tool_client.chat.completions.create(
        model=MODEL_ID, messages=messages, tools=[WEATHER], tool_choice="none",
        temperature=0, max_tokens=24)
    assert answer.choices[0].message.tool_calls is None
    assert isinstance(answer.choices[0].message.content, str)
    assert answer.choices[0].finish_reason in ("stop", "length")
    # What the template got is what transformers renders: arguments as an object.
    for_transformers = [dict(m) for m in messages]
    for_transformers[2] = {"role": "assistant", "tool_calls": [{
        "id": call.id, "type": "function",
        "function": {"name": "get_weather", "arguments": arguments}}]}
    assert answer.usage.prompt_tokens == prompt_tokens(for_transformers, [WEATHER])


FORCED_CALL = (r'Checking\.\n<tool_call>\n\{"name": "get_weather", "arguments": '
               r'\{"city": "(Paris|Oslo)", "days": [1-7]\}\}\n</tool_call>')


def test_auto_reads_hermes_markers_whole_and_streamed(tool_client):
    common = dict(model=MODEL_ID, messages=USER, tools=[WEATHER], tool_choice="auto",
                  temperature=1.0, max_tokens=200,
                  extra_body={"guided_regex": FORCED_CALL})
    whole = tool_client.chat.completions.create(seed=7, **common)
    choice = whole.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Checking."
    (call,) = choice.message.tool_calls
    assert call.function.name == "get_weather"
    arguments = json.loads(call.function.arguments)

    chunks = list(tool_client.chat.completions.create(seed=7, stream=True, **common))
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content == "Checking."
    deltas = [t for c in chunks if c.choices for t in (c.choices[0].delta.tool_calls or [])]
    # First the id, type and name, then the arguments.
    assert deltas[0].index == 0 and deltas[0].id.startswith("call_")
    assert deltas[0].type == "function" and deltas[0].function.name == "get_weather"
    streamed = "".join(d.function.arguments or "" for d in deltas)
    assert json.loads(streamed) == arguments
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    # No marker text ever reached the content.
    assert "<tool" not in content


def test_a_malformed_call_under_auto_is_content(tool_client):
    c = tool_client.chat.completions.create(
        model=MODEL_ID, messages=USER, tools=[WEATHER], temperature=1.0, seed=2,
        max_tokens=64, extra_body={"guided_regex": r"<tool_call>\{oops\}</tool_call>"})
    assert c.choices[0].message.content == "<tool_call>{oops}</tool_call>"
    assert c.choices[0].message.tool_calls is None
    assert c.choices[0].finish_reason == "stop"
