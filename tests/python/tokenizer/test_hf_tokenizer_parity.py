"""The C++ tokenizer (//engine/tokenizer:tokenize_tool) against Hugging Face's
`tokenizers` (pinned in weights/requirements.txt) on the generated
tokenizer.json files of tests/data/tokenizers.

Encoding: ids equal `Tokenizer.encode(text).ids` (BOS from the template
post-processor included) for every line of multilingual.txt, for the whole
file, and for random strings drawn from its characters. By default the C++
side does not turn special-token text into ids (parse_special off), which is
Hugging Face with `encode_special_tokens = True`; with --parse_special it is
Hugging Face's default.

Streaming: the ids of the whole file go through the C++ IncrementalDetokenizer
from the start of a text. After k pushes the streamed text S_k is compared with
D_k = `decode(ids[:k])` (skip_special_tokens, as the detokenizer skips
specials) at every k where D_k holds no U+FFFD. The file holds no U+FFFD, so a
U+FFFD in D_k means ids[:k] ends inside a multi-byte character: Hugging Face
replaces the partial bytes there, while the streamer holds them back until the
character completes, so S_k is then D_k without its replacement tail and is
checked to be a prefix of the final text instead. S_n plus Flush() must equal
D_n exactly.
"""

import pathlib
import random
import subprocess

import pytest
from tokenizers import Tokenizer

ROOT = pathlib.Path(__file__).resolve().parents[3]
DATA = ROOT / "tests" / "data" / "tokenizers"
TOOL = ROOT / "bazel-bin" / "engine" / "tokenizer" / "tokenize_tool"
TOKENIZERS = ["byte_bpe.json", "llama3_bpe.json", "llama_bpe.json"]
BYTE_LEVEL = {"byte_bpe.json", "llama3_bpe.json"}


@pytest.fixture(scope="module")
def tool():
    if not TOOL.exists():
        pytest.fail(f"{TOOL} is missing: run `bazel build //engine/tokenizer:tokenize_tool`")
    return TOOL


def read_text():
    # newline="" keeps the file's "\r" (universal newlines would turn it into "\n").
    with open(DATA / "multilingual.txt", encoding="utf-8", newline="") as f:
        return f.read()


def hf_tokenizer(name, parse_special):
    tok = Tokenizer.from_file(str(DATA / name))
    tok.encode_special_tokens = not parse_special
    return tok


def run_tool(tool, mode, name, path, parse_special=False):
    args = [str(tool), mode, str(DATA / name), str(path)]
    if parse_special:
        args.append("--parse_special")
    out = subprocess.run(args, capture_output=True, check=True)
    return out.stdout.decode("ascii").split("\n")[:-1]


def parse_ids(line):
    return [int(x) for x in line.split()]


@pytest.mark.parametrize("parse_special", [False, True])
@pytest.mark.parametrize("name", TOKENIZERS)
def test_ids_match_line_by_line_and_whole_file(tool, name, parse_special):
    text = read_text()
    hf = hf_tokenizer(name, parse_special)
    path = DATA / "multilingual.txt"
    got_lines = [parse_ids(l) for l in run_tool(tool, "lines", name, path, parse_special)]
    lines = text.split("\n")
    assert len(got_lines) == len(lines)
    for line, got in zip(lines, got_lines):
        want = hf.encode(line).ids
        assert got == want, (line, [hf.id_to_token(i) for i in want],
                             [hf.id_to_token(i) for i in got])
    whole = parse_ids(run_tool(tool, "encode", name, path, parse_special)[0])
    assert whole == hf.encode(text).ids


@pytest.mark.parametrize("name", TOKENIZERS)
def test_special_token_text_is_plain_text_unless_parse_special(tool, name, tmp_path):
    hf = hf_tokenizer(name, parse_special=True)
    specials = [t.content for t in hf.get_added_tokens_decoder().values() if t.special]
    path = tmp_path / "specials.txt"
    path.write_text("x" + "y".join(specials), encoding="utf-8")
    ids_plain = parse_ids(run_tool(tool, "encode", name, path)[0])
    ids_parsed = parse_ids(run_tool(tool, "encode", name, path, parse_special=True)[0])
    special_ids = {hf.token_to_id(s) for s in specials}
    bos = hf.encode("").ids  # the template's prefix, if any
    assert not special_ids & set(ids_plain[len(bos):])
    assert special_ids <= set(ids_parsed) | set(bos)


@pytest.mark.parametrize("name", TOKENIZERS)
def test_ids_match_on_random_strings(tool, name, tmp_path):
    text = read_text()
    pool = sorted(set(text.replace("\n", ""))) + [" "] * 12 + ["<note>", "[[x]]"]
    rng = random.Random(7)
    lines = ["".join(rng.choice(pool) for _ in range(rng.randint(0, 40)))
             for _ in range(300)]
    path = tmp_path / "random.txt"
    path.write_bytes("\n".join(lines).encode("utf-8"))
    hf = hf_tokenizer(name, parse_special=False)
    got_lines = [parse_ids(l) for l in run_tool(tool, "lines", name, path)]
    assert len(got_lines) == len(lines)
    for line, got in zip(lines, got_lines):
        assert got == hf.encode(line).ids, repr(line)


@pytest.mark.parametrize("name", TOKENIZERS)
def test_streamed_text_equals_decode_of_every_complete_prefix(tool, name, tmp_path):
    text = read_text()
    # Special-token text stays text, so byte-level decoding gives the file
    # back; the Llama files' BOS is a special id the streamer must skip.
    hf = hf_tokenizer(name, parse_special=False)
    ids = hf.encode(text).ids
    ids_path = tmp_path / "ids.txt"
    ids_path.write_text(" ".join(map(str, ids)))
    out = run_tool(tool, "stream", name, ids_path)
    assert len(out) == len(ids) + 1  # one line per push, then Flush()
    pieces = [b"" if l == "-" else bytes.fromhex(l) for l in out]

    final = hf.decode(ids)
    assert "\ufffd" not in final
    if name in BYTE_LEVEL:
        assert final == text  # byte-level BPE is lossless
    streamed = b""
    compared = 0
    for k in range(1, len(ids) + 1):
        piece = pieces[k - 1]
        piece.decode("utf-8")  # every push is complete UTF-8 on its own
        streamed += piece
        s_k = streamed.decode("utf-8")
        d_k = hf.decode(ids[:k])
        if "\ufffd" in d_k:
            assert final.startswith(s_k), k
            continue
        compared += 1
        assert s_k == d_k, (k, s_k[-40:], d_k[-40:])
    assert (streamed + pieces[-1]).decode("utf-8") == final
    # Most prefixes end on a character boundary; the multi-byte emoji, CJK
    # and byte-fallback tokens supply the others.
    assert compared > len(ids) // 2
    assert compared < len(ids)
