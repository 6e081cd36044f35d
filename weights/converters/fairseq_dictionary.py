"""A fairseq `dict.txt` -> the tokenizer.json that gives its symbols fairseq's ids.

fairseq's Dictionary numbers `<s>` 0, `<pad>` 1, `</s>` 2, `<unk>` 3, then the
lines of dict.txt in order ("<symbol> <count> [#fairseq:overwrite]"; a symbol
may itself hold spaces, the count is the last field). Text becomes ids as
fairseq's `encode_line` and its language-model inference make them:

- words are split on runs of whitespace (`tokenize_line`); a word outside the
  dictionary is `<unk>`;
- a newline is `</s>`: the binarizer ends every line of the training text
  with it;
- the prompt starts with `</s>` (`<s>` when the model was trained with
  --add-bos-token): LanguageModelingTask.build_dataset_for_inference prepends
  it, and every training line follows one.

Id 1 (`<pad>`) is left out altogether, neither in the vocabulary nor an
added token, so no text can produce the padding id, whatever the tokenizer's
special-token parsing: training never fed it to the model. (Hugging Face
looks an added token up by its content in the vocabulary and numbers it anew
when it is not there, so `<pad>` cannot be an added token without being a
word too.) Generated words are joined with single spaces (the null decoder of
a WordLevel model), as fairseq's `Dictionary.string` joins them.

The file is Hugging Face's own format (model WordLevel, pre-tokenizer
WhitespaceSplit, a Replace normalizer, a TemplateProcessing post-processor),
so `tokenizers` reads it too.
"""

from weights.converters.convert_error import ConvertError

FILE_NAME = "dict.txt"
SPECIALS = ("<s>", "<pad>", "</s>", "<unk>")       # ids 0..3, fairseq's Dictionary order
BOS, PAD, EOS, UNK = range(4)
OVERWRITE = "#fairseq:overwrite"


def read_symbols(path):
    """The dictionary's symbols by id: the four specials, then dict.txt's lines.

    A repeated symbol is an error unless its line carries #fairseq:overwrite,
    as in fairseq. An overwritten symbol takes its new id for text, so its old
    id must be <s> or <pad>, which keep their ids (0 as a special token, 1 as
    a token no text produces); fairseq
    goes on using ids 2 and 3 for line ends and unknown words, which a text
    symbol </s> or <unk> with another id cannot express.
    """
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except UnicodeDecodeError as e:
        raise ConvertError(f"{path}: not UTF-8 text: {e}") from None
    symbols = list(SPECIALS)
    ids = {s: i for i, s in enumerate(symbols)}
    for n, line in enumerate(lines, 1):
        fields = line.rstrip().rsplit(" ", 1)
        overwrite = len(fields) == 2 and fields[1] == OVERWRITE
        if overwrite:
            fields = fields[0].rsplit(" ", 1)
        if len(fields) != 2 or not fields[0] or not _is_count(fields[1]):
            raise ConvertError(f"{path}:{n}: expected '<symbol> <count> [{OVERWRITE}]', "
                               f"got {line!r}")
        word = fields[0]
        if word in ids:
            if not overwrite:
                raise ConvertError(f"{path}:{n}: symbol {word!r} repeats id {ids[word]} "
                                   f"(fairseq refuses it without {OVERWRITE})")
            if ids[word] >= len(SPECIALS):
                raise ConvertError(f"{path}:{n}: symbol {word!r} overwrites id {ids[word]}, "
                                   "which would be left without a name")
            if ids[word] in (EOS, UNK):
                raise ConvertError(f"{path}:{n}: symbol {word!r} overwrites id {ids[word]}, "
                                   "which fairseq keeps for line ends and unknown words; "
                                   "unsupported")
        ids[word] = len(symbols)
        symbols.append(word)
    return symbols


def _is_count(field):
    try:
        int(field)
    except ValueError:
        return False
    return True


def tokenizer_json(symbols, bos=EOS):
    """The tokenizer.json dict for `symbols` (by id); `bos` is the id each
    prompt starts with."""
    vocab = {}
    for i, s in enumerate(symbols):
        if i != PAD:
            vocab[s] = i             # a later, overwriting id wins, as in fairseq
    added = [{"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True}
             for i, s in enumerate(SPECIALS) if i != PAD]
    start = SPECIALS[bos]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "Replace", "pattern": {"String": "\n"},
                       "content": f" {SPECIALS[EOS]} "},
        "pre_tokenizer": {"type": "WhitespaceSplit"},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": start, "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": start, "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {start: {"id": start, "ids": [bos], "tokens": [start]}},
        },
        "decoder": None,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": SPECIALS[UNK]},
    }
