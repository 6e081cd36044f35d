"""The values the client returns: plain frozen dataclasses, no protobuf types."""

from __future__ import annotations

import dataclasses
import enum
from typing import Optional, Tuple

from seqboat.v1 import generate_pb2 as pb


class FinishReason(str, enum.Enum):
    """Why a stream ended (the proto's FinishReason)."""

    LENGTH = "length"            # max_tokens reached
    STOP_STRING = "stop_string"  # a stop string matched (see matched_stop)
    EOS = "eos"                  # the model's EOS or one of stop_token_ids
    CANCELLED = "cancelled"      # the server cancelled it (draining, say)

    @classmethod
    def from_pb(cls, value: int) -> Optional["FinishReason"]:
        return _FINISH_REASONS.get(value)


_FINISH_REASONS = {
    pb.FINISH_REASON_LENGTH: FinishReason.LENGTH,
    pb.FINISH_REASON_STOP_STRING: FinishReason.STOP_STRING,
    pb.FINISH_REASON_EOS: FinishReason.EOS,
    pb.FINISH_REASON_CANCELLED: FinishReason.CANCELLED,
}


@dataclasses.dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    generated_tokens: int
    # Of prompt_tokens, those restored from the server's prefix cache.
    cached_prompt_tokens: int

    @classmethod
    def from_pb(cls, u: pb.Usage) -> "Usage":
        return cls(u.prompt_tokens, u.generated_tokens, u.cached_prompt_tokens)


@dataclasses.dataclass(frozen=True)
class TokenLogprob:
    token_id: int
    logprob: float


@dataclasses.dataclass(frozen=True)
class TokenLogprobs:
    """The chosen token's log probability and the top alternatives, best first."""

    chosen: TokenLogprob
    top: Tuple[TokenLogprob, ...]

    @classmethod
    def from_pb(cls, lp: pb.TokenLogprobs) -> "TokenLogprobs":
        return cls(TokenLogprob(lp.chosen.token_id, lp.chosen.logprob),
                   tuple(TokenLogprob(t.token_id, t.logprob) for t in lp.top))


@dataclasses.dataclass(frozen=True)
class Delta:
    """One message of a stream: the tokens new since the last one and the
    complete UTF-8 text they finish (a token inside a character adds ids and no
    text until the character is whole). finish_reason and usage are set on the
    last delta only."""

    request_id: str
    text: str
    token_ids: Tuple[int, ...]
    logprobs: Tuple[TokenLogprobs, ...] = ()
    finish_reason: Optional[FinishReason] = None
    usage: Optional[Usage] = None
    matched_stop: Optional[str] = None

    @classmethod
    def from_pb(cls, m: pb.GenerateResponse) -> "Delta":
        return cls(
            request_id=m.request_id,
            text=m.text,
            token_ids=tuple(m.token_ids),
            logprobs=tuple(TokenLogprobs.from_pb(lp) for lp in m.logprobs),
            finish_reason=FinishReason.from_pb(m.finish_reason),
            usage=Usage.from_pb(m.usage) if m.HasField("usage") else None,
            matched_stop=m.matched_stop or None,
        )


@dataclasses.dataclass(frozen=True)
class GenerateResult:
    """A whole generation: the deltas of its stream joined."""

    request_id: str
    text: str
    token_ids: Tuple[int, ...]
    logprobs: Tuple[TokenLogprobs, ...]
    finish_reason: Optional[FinishReason]
    usage: Optional[Usage]
    matched_stop: Optional[str]


class _Accumulator:
    """Joins deltas into a GenerateResult."""

    def __init__(self) -> None:
        self.request_id = ""
        self.text: list = []
        self.token_ids: list = []
        self.logprobs: list = []
        self.last: Optional[Delta] = None

    def add(self, d: Delta) -> None:
        self.request_id = self.request_id or d.request_id
        self.text.append(d.text)
        self.token_ids.extend(d.token_ids)
        self.logprobs.extend(d.logprobs)
        self.last = d

    def result(self) -> GenerateResult:
        last = self.last
        return GenerateResult(
            request_id=self.request_id,
            text="".join(self.text),
            token_ids=tuple(self.token_ids),
            logprobs=tuple(self.logprobs),
            finish_reason=last.finish_reason if last else None,
            usage=last.usage if last else None,
            matched_stop=last.matched_stop if last else None,
        )


@dataclasses.dataclass(frozen=True)
class Tokenization:
    token_ids: Tuple[int, ...]
    # Raw bytes of each token (a token may hold part of a UTF-8 character).
    pieces: Tuple[bytes, ...]


@dataclasses.dataclass(frozen=True)
class ModelInfo:
    """The served model and the server's limits."""

    name: str
    layer_kinds: Tuple[str, ...]
    vocab_size: int
    eos_token_id: int
    max_slots: int
    max_queue: int
    max_new_tokens_limit: int
    max_prompt_tokens: int
    backend: str
    state_bytes_per_slot: int
    prefix_cache_bytes: int

    @classmethod
    def from_pb(cls, m: pb.ModelInfo) -> "ModelInfo":
        return cls(m.name, tuple(m.layer_kinds), m.vocab_size, m.eos_token_id,
                   m.max_slots, m.max_queue, m.max_new_tokens_limit,
                   m.max_prompt_tokens, m.backend, m.state_bytes_per_slot,
                   m.prefix_cache_bytes)
