"""The C++ tokenizer (//tests/tools:tokenize_tool) against Hugging Face's
`tokenizers` (pinned in weights/requirements.txt) on the generated
tokenizer.json files of tests/data/tokenizers.

Encoding: ids equal `Tokenizer.encode(text).ids` (BOS from the template
post-processor included) for every line of multilingual.txt, for the whole
file, and for random strings drawn from its characters. By default the C++
side does not turn special-token text into ids (parse_special off), which is
Hugging Face with `encode_special_tokens = True`; with --parse_special it is
Hugging Face's default.

The files stand for the families the converters serve (make_tokenizers.py):
neox_bpe.json is GPT-NeoX-20B's layout (the Mamba and Mamba-2 checkpoints),
with its added tokens for runs of spaces and the older key set of that file;
llama3_bpe.json Llama 3's (its pre-tokenizer regex, ignore_merges, a BOS
template); qwen2_bpe.json Qwen2's as transformers' converter writes it
(digits split one by one, empty BPE affixes, special and non-special added
tokens after the vocabulary); qwen3_5_bpe.json Qwen3.5's, whose regex keeps
combining marks with their letters (the Devanagari and Thai lines test it).

Streaming: the ids of the whole file go through the C++ IncrementalDetokenizer
from the start of a text. After k pushes the streamed text S_k is compared with
D_k = `decode(ids[:k])` (skip_special_tokens, as the detokenizer skips
specials) at every k where D_k holds no U+FFFD. The file holds no U+FFFD, so a
U+FFFD in D_k means ids[:k] ends inside a multi-byte character: Hugging Face
replaces the partial bytes there, while the streamer holds them back until the
character completes, so S_k is then D_k without its replacement tail and is
checked to be a prefix of the final text instead. S_n plus Flush() must equal
D_n exactly.

Unicode normalizers: neox_bpe.json (GPT-NeoX style, NFC) runs through all of
the above, and, with its normalizer swapped for NFD, NFKC and NFKD, through the
same id and streaming checks on normalization.txt: decomposed and partly
composed text (combining accents out of canonical order, Vietnamese stacked
diacritics, conjoining Hangul jamo, singleton and excluded decompositions),
compatibility characters, emoji, CJK, leading spaces, blank lines and "\r".
"""

import json
import pathlib
import random
import subprocess
import unicodedata

import pytest
from tokenizers import Tokenizer

ROOT = pathlib.Path(__file__).resolve().parents[3]
DATA = ROOT / "tests" / "data" / "tokenizers"
TOOL = ROOT / "bazel-bin" / "tests" / "tools" / "tokenize_tool"
TOKENIZERS = ["byte_bpe.json", "llama3_bpe.json", "llama_bpe.json", "neox_bpe.json",
              "qwen2_bpe.json", "qwen3_5_bpe.json"]
BYTE_LEVEL = {"byte_bpe.json", "llama3_bpe.json", "neox_bpe.json", "qwen2_bpe.json",
              "qwen3_5_bpe.json"}
NEOX = "neox_bpe.json"  # its normalizer is NFC


@pytest.fixture(scope="module")
def tool():
    if not TOOL.exists():
        pytest.fail(f"{TOOL} is missing: run `bazel build //tests/tools:tokenize_tool`")
    return TOOL


def read_text(name="multilingual.txt"):
    # newline="" keeps the file's "\r" (universal newlines would turn it into "\n").
    with open(DATA / name, encoding="utf-8", newline="") as f:
        return f.read()


def hf_tokenizer(name, parse_special):
    tok = Tokenizer.from_file(str(DATA / name))
    tok.encode_special_tokens = not parse_special
    return tok


def run_tool(tool, mode, name, path, parse_special=False):
    """`name` is a file in DATA or the path of one elsewhere."""
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


def check_stream(tool, name, hf, text, tmp_path, lossless):
    """Streams hf's ids for `text` through the C++ detokenizer; see the module
    docstring. `lossless`: decoding gives back the normalized text."""
    ids = hf.encode(text).ids
    ids_path = tmp_path / "ids.txt"
    ids_path.write_text(" ".join(map(str, ids)))
    out = run_tool(tool, "stream", name, ids_path)
    assert len(out) == len(ids) + 1  # one line per push, then Flush()
    pieces = [b"" if l == "-" else bytes.fromhex(l) for l in out]

    final = hf.decode(ids)
    assert "\ufffd" not in final
    if lossless:
        normalizer = hf.normalizer
        assert final == (normalizer.normalize_str(text) if normalizer else text)
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


@pytest.mark.parametrize("name", TOKENIZERS)
def test_streamed_text_equals_decode_of_every_complete_prefix(tool, name, tmp_path):
    # Special-token text stays text, so byte-level decoding gives the file
    # back (normalized); the Llama files' BOS is a special id the streamer
    # must skip.
    hf = hf_tokenizer(name, parse_special=False)
    check_stream(tool, name, hf, read_text(), tmp_path, lossless=name in BYTE_LEVEL)


def test_llama3_ids_depend_on_ignore_merges():
    # The premise of llama3_bpe.json's parity: some words of the text are
    # whole tokens that its merges would split, as in Llama 3's own vocabulary.
    data = json.loads(read_text("llama3_bpe.json"))
    assert data["model"]["ignore_merges"] is True
    whole = Tokenizer.from_str(json.dumps(data))
    data["model"]["ignore_merges"] = False
    merged = Tokenizer.from_str(json.dumps(data))
    lines = read_text().split("\n")
    assert sum(whole.encode(l).ids != merged.encode(l).ids for l in lines) >= 3


def test_neox_normalizer_is_nfc():
    # The C++ tests and the cases below rely on it.
    assert json.loads(read_text(NEOX))["normalizer"] == {"type": "NFC"}


def test_normalization_text_is_not_normalized():
    # An editor that normalizes on save would make the cases below vacuous.
    text = read_text("normalization.txt")
    for form in ("NFC", "NFD", "NFKC", "NFKD"):
        assert unicodedata.normalize(form, text) != text, form


@pytest.fixture(params=["NFC", "NFD", "NFKC", "NFKD"])
def normalizing_tokenizer(request, tmp_path):
    """(path, Hugging Face tokenizer) for neox_bpe.json with the given form."""
    if request.param == "NFC":
        path = DATA / NEOX
    else:
        data = json.loads(read_text(NEOX))
        data["normalizer"] = {"type": request.param}
        path = tmp_path / f"neox_{request.param.lower()}.json"
        path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    tok = Tokenizer.from_file(str(path))
    tok.encode_special_tokens = True
    return path, tok


def test_normalized_ids_match_line_by_line_and_whole_file(tool, normalizing_tokenizer):
    path, hf = normalizing_tokenizer
    text = read_text("normalization.txt")
    text_path = DATA / "normalization.txt"
    got_lines = [parse_ids(l) for l in run_tool(tool, "lines", path, text_path)]
    lines = text.split("\n")
    assert len(got_lines) == len(lines)
    for line, got in zip(lines, got_lines):
        want = hf.encode(line).ids
        assert got == want, (line, [hf.id_to_token(i) for i in want],
                             [hf.id_to_token(i) for i in got])
    whole = parse_ids(run_tool(tool, "encode", path, text_path)[0])
    assert whole == hf.encode(text).ids


def test_normalized_ids_match_on_random_strings(tool, normalizing_tokenizer, tmp_path):
    # Random sequences of the text's characters put combining marks and jamo
    # after every kind of character, and split added tokens from their marks.
    path, hf = normalizing_tokenizer
    text = read_text("normalization.txt")
    pool = sorted(set(text.replace("\n", ""))) + [" "] * 8 + ["<note>", "[[x]]"]
    rng = random.Random(11)
    lines = ["".join(rng.choice(pool) for _ in range(rng.randint(0, 30)))
             for _ in range(400)]
    lines_path = tmp_path / "random.txt"
    lines_path.write_bytes("\n".join(lines).encode("utf-8"))
    got_lines = [parse_ids(l) for l in run_tool(tool, "lines", path, lines_path)]
    assert len(got_lines) == len(lines)
    for line, got in zip(lines, got_lines):
        assert got == hf.encode(line).ids, repr(line)


def test_normalized_stream_equals_decode_of_every_complete_prefix(
        tool, normalizing_tokenizer, tmp_path):
    path, hf = normalizing_tokenizer
    check_stream(tool, path, hf, read_text("normalization.txt"), tmp_path,
                 lossless=True)


# ------------------------------------------------------- chat prompts (EncodeChat)

def chat_prompt(specials, content):
    """A prompt as a chat template renders one: the tokenizer's special tokens
    around turns, `content` (the client's text) in the middle."""
    open_, close = specials[0], specials[-1]
    head = f"{open_}system\nYou are helpful.{close}\n{open_}user\n"
    return head, head + content + f"{close}\n{open_}assistant\n"


def split_at_trusted_specials(text, specials, literal):
    """Hugging Face's first step with the client's text kept out of it: the
    pieces of `text` between special tokens found outside `literal` (leftmost,
    longest first); special tokens as their content, marked True."""
    b, e = literal
    pieces, plain, i = [], "", 0
    ordered = sorted(specials, key=len, reverse=True)
    while i < len(text):
        if b <= i < e:
            plain += text[i:e]
            i = e
            continue
        hit = next((s for s in ordered if text.startswith(s, i)
                    and not (i < e and i + len(s) > b)), None)
        if hit is None:
            plain += text[i]
            i += 1
            continue
        if plain:
            pieces.append((plain, False))
            plain = ""
        pieces.append((hit, True))
        i += len(hit)
    if plain:
        pieces.append((plain, False))
    return pieces


@pytest.mark.parametrize("name", ["llama3_bpe.json", "qwen2_bpe.json", "qwen3_5_bpe.json",
                                  "llama_bpe.json", "neox_bpe.json"])
def test_chat_prompt_ids_match_hugging_face(tool, name, tmp_path):
    hf = hf_tokenizer(name, parse_special=True)
    specials = sorted(t.content for t in hf.get_added_tokens_decoder().values() if t.special)
    lines = [l for l in read_text().split("\n") if l.strip()]
    content = f" {lines[0]} {specials[-1]}{specials[0]} {lines[3]}\n\n{specials[1]}x "
    head, text = chat_prompt(specials, content)
    path = tmp_path / "prompt.txt"
    path.write_bytes(text.encode("utf-8"))

    # Every special token parsed, no BOS added: encode(add_special_tokens=False).
    got = parse_ids(run_tool(tool, "chat", name, path)[0])
    assert got == hf.encode(text, add_special_tokens=False).ids

    # With the content literal, its special-token text is text.
    b = len(head.encode("utf-8"))
    e = b + len(content.encode("utf-8"))
    out = subprocess.run([str(tool), "chat", str(DATA / name), str(path), f"{b}:{e}"],
                         capture_output=True, check=True)
    got = parse_ids(out.stdout.decode("ascii").split("\n")[0])
    plain = hf_tokenizer(name, parse_special=False)
    want = []
    for piece, special in split_at_trusted_specials(text, specials, (len(head),
                                                                     len(head) + len(content))):
        want += [hf.token_to_id(piece)] if special else \
            plain.encode(piece, add_special_tokens=False).ids
    assert got == want
    special_ids = {hf.token_to_id(s) for s in specials}
    assert sum(i in special_ids for i in got) == 5  # the template's, not the content's


def test_qwen3_5_regex_keeps_marks_with_their_letters(tool, tmp_path):
    """The two Qwen families differ only in the split: a Devanagari word whose
    vowel signs and virama are marks is one pre-token for Qwen3.5 and several
    for Qwen2, so their ids differ; each matches its own Hugging Face file."""
    text = "नमस्ते दुनिया"
    path = tmp_path / "line.txt"
    path.write_bytes(text.encode("utf-8"))
    got = {n: parse_ids(run_tool(tool, "encode", n, path)[0])
           for n in ("qwen2_bpe.json", "qwen3_5_bpe.json")}
    for n, ids in got.items():
        assert ids == hf_tokenizer(n, False).encode(text).ids, n
    pieces = {n: hf_tokenizer(n, False).pre_tokenizer.pre_tokenize_str(text) for n in got}
    assert len(pieces["qwen3_5_bpe.json"]) < len(pieces["qwen2_bpe.json"])
