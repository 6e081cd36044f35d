"""Regenerates the small tokenizer.json files the tokenizer tests use.

Run from the repository root with the project venv:
  .venv/bin/python tests/data/tokenizers/make_tokenizers.py
Training is deterministic for a fixed `tokenizers` version (pinned in
weights/requirements.txt) and the same fortune files, so rerunning gives the
same files. Five tokenizers covering the families the C++ loader supports:
  byte_bpe.json    GPT-2 style: ByteLevel pre-tokenizer with the GPT-2
                   regex, ByteLevel decoder, merges in the "a b" form.
  neox_bpe.json    GPT-NeoX-20B style (the tokenizer of the Mamba and Mamba-2
                   checkpoints): byte_bpe.json's pipeline behind an NFC
                   normalizer, with <|endoftext|> and <|padding|> first and,
                   after the vocabulary, GPT-NeoX's added tokens for runs of
                   2 to 24 spaces (normalized, not special), written in the
                   older JSON form that file has (no use_regex, no
                   byte_fallback / ignore_merges). Its training text adds the
                   test texts, so composed characters get merged tokens and a
                   wrong normalization shows in the ids.
  llama3_bpe.json  Llama 3 style: Split(Llama 3 regex) + ByteLevel(no regex),
                   ignore_merges, a BOS template post-processor. As in
                   tiktoken-derived vocabularies, some words of the test text
                   are whole tokens that the merges do not build, so
                   ignore_merges changes their ids.
  qwen2_bpe.json   Qwen2 / Qwen2.5 style, as transformers' Qwen2Converter
                   builds it: NFC, Split(Qwen2 regex: digits one at a time) +
                   ByteLevel(no regex), BPE with empty affixes, no BOS;
                   <|endoftext|>, <|im_start|>, <|im_end|> special and
                   Qwen2.5's <tool_call> / </tool_call> not.
  qwen3_5_bpe.json Qwen3.5 style (MODELS.md 13.5): qwen2_bpe.json's pipeline
                   with Qwen3.5's regex, which keeps combining marks (\p{M})
                   with the letters before them, and Qwen3's added tokens
                   (<think>, <tool_call>, <tool_response> and their closings,
                   not special).
  llama_bpe.json   Llama 1/2 / Mistral style: SentencePiece-like BPE with
                   byte_fallback, Prepend/Replace normalizer, no pre-tokenizer,
                   Replace/ByteFallback/Fuse/Strip decoder, BOS template.
"""

import glob
import json
import os

from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models,
                        normalizers, pre_tokenizers, processors, trainers)

HERE = os.path.dirname(os.path.abspath(__file__))
LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
    r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# transformers' tokenization_qwen2.PRETOKENIZE_REGEX.
QWEN2_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
    r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


# Qwen3.5's (MODELS.md 13.5): Qwen2's with \p{M} beside \p{L} twice.
QWEN3_5_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}|"
    r" ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def training_text():
    """English text from the fortune files (sorted, so the order is fixed)."""
    lines = []
    for path in sorted(glob.glob("/usr/share/games/fortunes/*")):
        if path.endswith((".dat", ".u8")) or os.path.isdir(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            lines.extend(f.read().splitlines())
    return lines[:60000]


def add_test_tokens(tok):
    # A non-special added token matched in any text, and one that the
    # normalizer rewrites before matching (normalized=True).
    tok.add_tokens([AddedToken("<note>", normalized=False, special=False)])
    tok.add_tokens([AddedToken("[[x]]", normalized=True, special=False)])


def byte_bpe(lines):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=1000, special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False)
    tok.train_from_iterator(lines, trainer)
    add_test_tokens(tok)
    return tok


def test_text_lines():
    """The lines of the test texts, for training text that covers them."""
    extra = []
    for name in ("multilingual.txt", "normalization.txt"):
        with open(os.path.join(HERE, name), encoding="utf-8", newline="") as f:
            extra.extend(f.read().split("\n"))
    return extra


def neox_bpe(lines):
    extra = test_text_lines()
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=True)
    trainer = trainers.BpeTrainer(
        vocab_size=1000, special_tokens=["<|endoftext|>", "<|padding|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False)
    tok.train_from_iterator(lines + extra * 200, trainer)
    add_test_tokens(tok)
    # GPT-NeoX-20B ids 50254..50276: 24 spaces down to 2, matched before
    # pre-tokenization (normalized text, longest first).
    tok.add_tokens([AddedToken(" " * n, normalized=True, special=False)
                    for n in range(24, 1, -1)])
    return tok


def as_published_neox(data):
    """The key set of GPT-NeoX-20B's tokenizer.json, written before
    `tokenizers` had use_regex, byte_fallback and ignore_merges; readers must
    take their defaults (true, false, false)."""
    for part in ("pre_tokenizer", "post_processor", "decoder"):
        data[part].pop("use_regex", None)
    for key in ("byte_fallback", "ignore_merges"):
        data["model"].pop(key, None)
    return data


def qwen2_bpe(lines, pattern=QWEN2_PATTERN,
              plain=("<tool_call>", "</tool_call>")):
    trainer_tok = Tokenizer(models.BPE())
    trainer_tok.normalizer = normalizers.NFC()
    pre = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    trainer_tok.pre_tokenizer = pre
    trainer = trainers.BpeTrainer(
        vocab_size=1200, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False)
    trainer_tok.train_from_iterator(lines + test_text_lines() * 200, trainer)
    trained = json.loads(trainer_tok.to_str())["model"]
    # transformers' Qwen2Converter: the vocabulary and merges of the
    # tiktoken-style file, special tokens after them.
    tok = Tokenizer(models.BPE(
        vocab=trained["vocab"], merges=[tuple(m) for m in trained["merges"]],
        dropout=None, unk_token=None, continuing_subword_prefix="", end_of_word_suffix="",
        fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.add_special_tokens([AddedToken(t, normalized=False, special=True)
                            for t in ("<|endoftext|>", "<|im_start|>", "<|im_end|>")])
    tok.add_tokens([AddedToken(t, normalized=False, special=False) for t in plain])
    add_test_tokens(tok)
    return tok


def qwen3_5_bpe(lines):
    return qwen2_bpe(lines, QWEN3_5_PATTERN,
                     ("<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>",
                      "</tool_response>"))


# Words of multilingual.txt that llama3_bpe.json holds as whole tokens
# although its merges split them.
LLAMA3_WHOLE_WORDS = [" naïve", " résumé", " straße", "日本語のテキスト", " 텍스트",
                      " sentence", " leading"]


def llama3_bpe(lines):
    trainer_tok = Tokenizer(models.BPE())
    pre = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    trainer_tok.pre_tokenizer = pre
    trainer = trainers.BpeTrainer(
        vocab_size=1000,
        special_tokens=["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False)
    trainer_tok.train_from_iterator(lines, trainer)
    trained = json.loads(trainer_tok.to_str())["model"]
    vocab = dict(trained["vocab"])
    to_bytes = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    for word in LLAMA3_WHOLE_WORDS:
        (piece, _), = to_bytes.pre_tokenize_str(word)
        vocab.setdefault(piece, len(vocab))
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[tuple(m) for m in trained["merges"]],
                               ignore_merges=True))
    tok.pre_tokenizer = pre
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, normalized=False, special=True)
                            for t in ("<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>")])
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(
            single="<|begin_of_text|> $A",
            special_tokens=[("<|begin_of_text|>",
                             tok.token_to_id("<|begin_of_text|>"))]),
    ])
    add_test_tokens(tok)
    return tok


def llama_bpe(lines):
    """Built the way Hugging Face converts a SentencePiece Llama model:
    <unk> <s> </s> then the 256 <0xXX> byte tokens, then the merged pieces."""
    # Train words split at spaces (as SentencePiece does), with a small
    # alphabet so that rarer characters must fall back to bytes.
    trainer_tok = Tokenizer(models.BPE(unk_token="<unk>"))
    trainer_tok.normalizer = normalizers.Sequence(
        [normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    trainer_tok.pre_tokenizer = pre_tokenizers.Metaspace(
        replacement="▁", prepend_scheme="never")
    trainer = trainers.BpeTrainer(vocab_size=1000 - 259, limit_alphabet=80,
                                  special_tokens=["<unk>"],
                                  show_progress=False)
    trainer_tok.train_from_iterator(lines, trainer)
    trained = json.loads(trainer_tok.to_str())["model"]

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab["<0x%02X>" % b] = len(vocab)
    for piece, _ in sorted(trained["vocab"].items(), key=lambda kv: kv[1]):
        if piece not in vocab:
            vocab[piece] = len(vocab)
    merges = [tuple(m) for m in trained["merges"]]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>",
                               byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Sequence(
        [normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.decoder = decoders.Sequence([
        decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
        decoders.Strip(content=" ", left=1, right=0)])
    tok.add_special_tokens([
        AddedToken(t, normalized=False, special=True)
        for t in ("<unk>", "<s>", "</s>")])
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", special_tokens=[("<s>", 1)])
    add_test_tokens(tok)
    return tok


def save(tok, name, string_merges=False, edit=None):
    data = json.loads(tok.to_str())
    if edit is not None:
        data = edit(data)
    if string_merges:
        # The older "a b" form, still found in many published files.
        data["model"]["merges"] = [" ".join(m) for m in data["model"]["merges"]]
    path = os.path.join(HERE, name)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False, indent=1)
        f.write("\n")
    Tokenizer.from_file(path)  # the saved file must load back
    print("wrote", path)


def main(names=None):
    lines = training_text()
    if names:       # only these, e.g. a new family, leaving the others' bytes alone
        for name in names:
            save(globals()[name.removesuffix(".json")](lines), name)
        return
    save(byte_bpe(lines), "byte_bpe.json", string_merges=True)
    save(neox_bpe(lines), "neox_bpe.json", string_merges=True, edit=as_published_neox)
    save(llama3_bpe(lines), "llama3_bpe.json")
    save(qwen2_bpe(lines), "qwen2_bpe.json")
    save(llama_bpe(lines), "llama_bpe.json")


if __name__ == "__main__":
    import sys
    main(sys.argv[1:])
