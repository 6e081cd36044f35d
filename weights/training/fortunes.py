"""Training text: Debian's `fortunes` package, one fortune per item.

Fortune files separate entries by lines holding only `%`. Only the plain text
files are read (not the .dat indexes or the .u8 links to the same files). The
held-out split is decided per fortune by a hash of its text, so it does not
depend on file order and duplicated fortunes always land on the same side.
"""

import os
import zlib
from typing import NamedTuple

import numpy as np

FORTUNE_DIR = "/usr/share/games/fortunes"
EOS = 256


def read_fortunes(directory=FORTUNE_DIR):
    """All fortunes as bytes, files in sorted order, surrounding blank lines stripped."""
    out = []
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if name.endswith((".dat", ".u8")) or os.path.islink(path) or not os.path.isfile(path):
            continue
        with open(path, "rb") as f:
            entry = []
            for line in f.read().split(b"\n") + [b"%"]:
                if line.strip() == b"%":
                    text = b"\n".join(entry).strip(b"\n")
                    if text.strip():
                        out.append(text)
                    entry = []
                else:
                    entry.append(line)
    return out


def is_held_out(text, percent=5):
    return zlib.crc32(text) % 100 < percent


def split(fortunes, percent=5):
    train = [t for t in fortunes if not is_held_out(t, percent)]
    held = [t for t in fortunes if is_held_out(t, percent)]
    return train, held


def to_stream(fortunes):
    """int64 token stream: EOS f0 EOS f1 EOS ... fn EOS (bytes are their own ids)."""
    parts = [np.array([EOS], dtype=np.int64)]
    for t in fortunes:
        parts.append(np.frombuffer(t, dtype=np.uint8).astype(np.int64))
        parts.append(np.array([EOS], dtype=np.int64))
    return np.concatenate(parts)


def unigram_bits(train_stream, eval_targets):
    """Bits per symbol of an add-one-smoothed byte+EOS unigram fitted on the train split."""
    counts = np.bincount(train_stream, minlength=EOS + 1).astype(np.float64) + 1.0
    logp = np.log2(counts / counts.sum())
    return float(-logp[eval_targets].mean())


class Corpus(NamedTuple):
    """The fortunes as both training scripts use them."""
    train: list              # fortunes trained on
    held: list               # held-out fortunes
    stream: np.ndarray       # to_stream(train)
    n_held_targets: int      # tokens predicted over the held-out fortunes
    unigram: float           # bits per held-out target of the unigram fitted on `stream`


def load_corpus(directory=FORTUNE_DIR):
    """Read, split and join the fortunes of `directory`; score the unigram baseline
    on the held-out targets (each held-out fortune read as EOS text -> text EOS)."""
    train, held = split(read_fortunes(directory))
    stream = to_stream(train)
    held_targets = np.concatenate([to_stream([t])[1:] for t in held])
    return Corpus(train, held, stream, len(held_targets), unigram_bits(stream, held_targets))
