"""Qwen3.5's tokenizer at its real size: 248,044 byte-level BPE tokens and the
added tokens after them, as Qwen/Qwen3.5-* ship it (MODELS.md 13.5; the config's
vocab_size 248320 leaves room above them).

The published tokenizer.json cannot be fetched on a machine that reaches only
package registries, so this builds one of the same construction and size at test
time: qwen3_5_bpe.json's pipeline (NFC, Qwen3.5's split regex, byte-level, its
added tokens re-numbered after the vocabulary) with its trained merges first and
then seeded random merges of existing tokens until the vocabulary holds 248,044
tokens. The C++ tokenizer (//tests/tools:tokenize_tool) must give Hugging Face
`tokenizers`' ids on every line of multilingual.txt, on the whole file and on
random strings, and the streamed detokenization must give back the text: a
vocabulary of this size changes the merge ranks' range, the id width and the
load, not only the rules the small file checks.
"""

import json
import pathlib
import random

import pytest
from tokenizers import Tokenizer

from test_hf_tokenizer_parity import (DATA, check_stream, parse_ids, read_text,  # noqa: F401
                                      run_tool, tool)

QWEN3_5_BPE_TOKENS = 248044
MAX_TOKEN_CHARS = 12


def full_size_tokenizer(path):
    data = json.loads((DATA / "qwen3_5_bpe.json").read_text(encoding="utf-8"))
    model = data["model"]
    vocab = dict(model["vocab"])
    merges = [list(m) for m in model["merges"]]
    tokens = sorted(vocab, key=vocab.get)

    def add(a, b):
        joined = a + b
        if joined in vocab or len(joined) > MAX_TOKEN_CHARS:
            return
        vocab[joined] = len(vocab)
        merges.append([a, b])
        tokens.append(joined)

    # Words of the test text built left to right, as a tokenizer trained on
    # text like it would hold many of them; then random merges.
    small = Tokenizer.from_str(json.dumps(data))
    for line in read_text().split("\n"):
        for word, _ in small.pre_tokenizer.pre_tokenize_str(small.normalizer.normalize_str(line)):
            for k in range(1, len(word)):
                add(word[:k], word[k])
    rng = random.Random(35)
    # Mostly short tokens joined, so that many merges fire on real text.
    short = [t for t in tokens if len(t) <= 2]
    while len(vocab) < QWEN3_5_BPE_TOKENS:
        a = rng.choice(short if rng.random() < 0.7 else tokens)
        b = rng.choice(short if rng.random() < 0.7 else tokens)
        before = len(tokens)
        add(a, b)
        if len(tokens) > before and len(a + b) <= 2:
            short.append(a + b)
    model["vocab"], model["merges"] = vocab, merges
    for i, added in enumerate(data["added_tokens"]):
        added["id"] = QWEN3_5_BPE_TOKENS + i
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def full_size(tmp_path_factory):
    path = full_size_tokenizer(tmp_path_factory.mktemp("qwen3_5") / "tokenizer.json")
    hf = Tokenizer.from_file(str(path))
    hf.encode_special_tokens = True
    assert hf.get_vocab_size(with_added_tokens=False) == QWEN3_5_BPE_TOKENS
    assert hf.get_vocab_size() < 248320
    return path, hf


def test_ids_match_on_the_test_text_and_random_strings(tool, full_size, tmp_path):  # noqa: F811
    path, hf = full_size
    text = read_text()
    got_lines = [parse_ids(l) for l in
                 run_tool(tool, "lines", path, DATA / "multilingual.txt")]
    lines = text.split("\n")
    assert len(got_lines) == len(lines)
    long_tokens = 0
    for line, got in zip(lines, got_lines):
        want = hf.encode(line).ids
        assert got == want, (line, [hf.id_to_token(i) for i in want],
                             [hf.id_to_token(i) for i in got])
        long_tokens += sum(i >= 1200 for i in want)
    # The added merges fire, so the test reaches the new ids' range.
    assert long_tokens > 10
    assert parse_ids(run_tool(tool, "encode", path, DATA / "multilingual.txt")[0]) == \
        hf.encode(text).ids
    pool = sorted(set(text.replace("\n", ""))) + [" "] * 12 + ["<think>", "<|im_end|>"]
    rng = random.Random(11)
    randoms = ["".join(rng.choice(pool) for _ in range(rng.randint(0, 60)))
               for _ in range(300)]
    rpath = tmp_path / "random.txt"
    rpath.write_bytes("\n".join(randoms).encode("utf-8"))
    got = [parse_ids(l) for l in run_tool(tool, "lines", path, rpath)]
    assert got == [hf.encode(s).ids for s in randoms]


def test_streamed_text_is_the_decoded_text(tool, full_size, tmp_path):  # noqa: F811
    path, hf = full_size
    check_stream(tool, path, hf, read_text(), tmp_path, lossless=True)
