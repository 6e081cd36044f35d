"""Constrained decoding through the Python client: SamplingParams' constraint
oneof (json_schema, json_object, regex, choice, grammar) from the client's
keyword arguments to the server, every sample matching its constraint, and the
server's refusals naming the field."""

import json
import re

import grpc
import pytest
import seqboat

PROMPT = "The secret of happiness is"


@pytest.fixture(scope="module")
def client(server):
    with seqboat.Client(server.grpc, timeout=300) as c:
        yield c


def test_build_request_sets_the_oneof():
    r = seqboat.build_request("x", json_schema={"type": "integer"})
    assert r.sampling.WhichOneof("constraint") == "json_schema"
    assert json.loads(r.sampling.json_schema) == {"type": "integer"}
    r = seqboat.build_request("x", json_object=True)
    assert r.sampling.WhichOneof("constraint") == "json_object"
    r = seqboat.build_request("x", choice=["a", "b"])
    assert list(r.sampling.choice.choices) == ["a", "b"]
    assert seqboat.build_request("x").sampling.WhichOneof("constraint") is None
    with pytest.raises(seqboat.InvalidArgument, match="regex and grammar"):
        seqboat.build_request("x", regex="a", grammar='root ::= "a"')
    with pytest.raises(seqboat.InvalidArgument, match="choice"):
        seqboat.build_request("x", choice="ab")


def test_regex_holds_on_every_sample(client):
    pattern = r"[A-Z][a-z]{1,8}( [a-z]{1,8}){0,3}\."
    for seed in range(8):
        r = client.generate(PROMPT, regex=pattern, temperature=1.0, seed=seed,
                            max_tokens=64)
        assert r.finish_reason == seqboat.FinishReason.EOS, r
        assert re.fullmatch(pattern, r.text), r.text


def test_choice_and_grammar_hold_on_every_sample(client):
    choices = ["happy", "sad", "a small dog"]
    seen = set()
    for seed in range(8):
        r = client.generate(PROMPT, choice=choices, temperature=1.0, seed=seed,
                            max_tokens=32)
        assert r.text in choices
        seen.add(r.text)
    grammar = 'root ::= "yes" | "no" | ("maybe " [0-9])'
    for seed in range(8):
        r = client.generate(PROMPT, grammar=grammar, temperature=1.0, seed=seed,
                            max_tokens=32)
        assert re.fullmatch(r"yes|no|maybe [0-9]", r.text), r.text


def test_json_schema_and_json_object(client):
    schema = {"type": "object",
              "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 9},
                             "ok": {"type": "boolean"}},
              "required": ["n", "ok"], "additionalProperties": False}
    for seed in range(4):
        r = client.generate(PROMPT, json_schema=schema, temperature=1.0, seed=seed,
                            max_tokens=64)
        value = json.loads(r.text)
        assert set(value) == {"n", "ok"} and 0 <= value["n"] <= 9
        r = client.generate(PROMPT, json_object=True, temperature=1.0, seed=seed,
                            max_tokens=256)
        if r.finish_reason == seqboat.FinishReason.EOS:
            json.loads(r.text)


@pytest.mark.parametrize("kwargs, field", [
    (dict(json_schema="{not json"), "sampling.json_schema"),
    (dict(regex="[a-z]{1,100000}"), "sampling.regex"),
    (dict(grammar="x" * 40000), "sampling.grammar"),
    (dict(choice=[]), "sampling.choice"),
    (dict(choice=["a", ""]), "sampling.choice"),
])
def test_bad_constraints_raise_invalid_argument_naming_the_field(client, kwargs, field):
    with pytest.raises(seqboat.InvalidArgument) as e:
        client.generate(PROMPT, **kwargs)
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert e.value.message.startswith(field), e.value.message
