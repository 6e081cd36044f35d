"""Client and AsyncClient: the TextGeneration service behind typed calls.

Both wrap one gRPC channel. A stream is cancelled on the server as soon as its
caller lets go of it: close() (or leaving its `with` block), breaking out of the
loop over it (the stream is closed when it is garbage collected, at once in
CPython), a deadline, or, for AsyncClient, cancelling the task that reads it.
The server then frees the request's slot at its next engine step.
"""

from __future__ import annotations

import asyncio
from typing import Any, Mapping, Optional, Sequence, Union

import grpc

# ChannelOptions: re-exported, as it was before the core moved out.
from seqboat._core import (ChannelOptions, ClientCore, Prompt, StreamCore,  # noqa: F401
                           request_from, rpc_errors, tokenization)
from seqboat.types import (Delta, GenerateNResult, GenerateResult, ModelInfo,
                           Tokenization, _Accumulator, _ChoicesAccumulator)
from seqboat.v1 import generate_pb2 as pb


def build_request(prompt: Prompt, *, max_tokens: Optional[int] = None,
                  temperature: Optional[float] = None, top_k: Optional[int] = None,
                  top_p: Optional[float] = None, min_p: Optional[float] = None,
                  repetition_penalty: Optional[float] = None,
                  presence_penalty: Optional[float] = None,
                  frequency_penalty: Optional[float] = None,
                  seed: Optional[int] = None,
                  stop: Union[str, Sequence[str], None] = None,
                  stop_token_ids: Optional[Sequence[int]] = None,
                  ignore_eos: bool = False, logprobs: Optional[int] = None,
                  request_id: Optional[str] = None,
                  cache_salt: Optional[str] = None,
                  speculative: Optional[Mapping[str, Any]] = None,
                  json_schema: Union[str, Mapping[str, Any], None] = None,
                  json_object: bool = False, regex: Optional[str] = None,
                  choice: Optional[Sequence[str]] = None,
                  grammar: Optional[str] = None,
                  min_new_tokens: Optional[int] = None,
                  n: Optional[int] = None) -> pb.GenerateRequest:
    """The GenerateRequest for these arguments. Unset arguments stay unset, so
    the server applies its defaults; the server checks every value's range and
    answers INVALID_ARGUMENT naming the field. Here only types are checked."""
    return request_from(locals())


class Stream(StreamCore):
    """The deltas of one Generate call, as an iterator. close() cancels the call
    on the server; after it, iteration stops quietly."""

    def __iter__(self) -> "Stream":
        return self

    def __next__(self) -> Delta:
        if self._closed:
            raise StopIteration
        try:
            message = next(self._call)
        except StopIteration:
            self._closed = True
            raise
        except grpc.RpcError as e:
            self._failed(e, StopIteration)
        return Delta.from_pb(message)

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _drain(stream: Stream, acc: Any) -> Any:
    with stream as s:
        for delta in s:
            acc.add(delta)
    return acc.result()


class Client(ClientCore):
    """A blocking client of one seqboat server (or a load balancer in front of
    several). `timeout` is the default deadline in seconds of every call (None:
    none); each call may pass its own. `api_key` (else $SEQBOAT_API_KEY) is sent
    on every call; `tls_ca_file` (and for mutual TLS `tls_cert_file` and
    `tls_key_file`, PEM) connect over TLS. Thread-safe; close() when done, or use
    it as a context manager."""

    def stream(self, prompt: Prompt, *, max_tokens: Optional[int] = None,
               temperature: Optional[float] = None, top_k: Optional[int] = None,
               top_p: Optional[float] = None, min_p: Optional[float] = None,
               repetition_penalty: Optional[float] = None,
               presence_penalty: Optional[float] = None,
               frequency_penalty: Optional[float] = None, seed: Optional[int] = None,
               stop: Union[str, Sequence[str], None] = None,
               stop_token_ids: Optional[Sequence[int]] = None,
               ignore_eos: bool = False, logprobs: Optional[int] = None,
               request_id: Optional[str] = None,
               cache_salt: Optional[str] = None,
               speculative: Optional[Mapping[str, Any]] = None,
               json_schema: Union[str, Mapping[str, Any], None] = None,
               json_object: bool = False, regex: Optional[str] = None,
               choice: Optional[Sequence[str]] = None,
               grammar: Optional[str] = None,
               min_new_tokens: Optional[int] = None, n: Optional[int] = None,
               timeout: Optional[float] = None) -> Stream:
        """Starts generating and returns the stream of deltas. `prompt` is text
        or token ids; `max_tokens` caps the new tokens and `min_new_tokens`
        holds EOS, the stop ids and the stop strings back until that many;
        `logprobs` N asks for the chosen token's log probability and the N best
        (0: the chosen only). `n` samples n sequences from the prompt (sequence
        i seeded seed + i): their deltas interleave, each with its `index`, and
        each sequence's last one carries its finish reason and usage.
        `cache_salt` partitions the server's prefix cache: a request resumes
        only from snapshots made under the same salt. `speculative`, e.g.
        {"method": "prompt_lookup", "num_draft_tokens": 4} or {"method":
        "none"}, overrides the server's speculative decoding default (the
        output is the same either way, only sooner or later). At most one of
        `json_schema` (a JSON Schema, as a mapping or its JSON text),
        `json_object` (any JSON), `regex`, `choice` (one of these strings) and
        `grammar` (EBNF in GBNF syntax, from rule `root`) constrains the
        output to the texts it matches.
        Errors (a bad value, a full queue, the deadline) are raised while
        iterating, as SeqboatError subclasses."""
        return Stream(self._generate_call(locals()))

    def generate(self, prompt: Prompt, *, max_tokens: Optional[int] = None,
                 temperature: Optional[float] = None, top_k: Optional[int] = None,
                 top_p: Optional[float] = None, min_p: Optional[float] = None,
                 repetition_penalty: Optional[float] = None,
                 presence_penalty: Optional[float] = None,
                 frequency_penalty: Optional[float] = None, seed: Optional[int] = None,
                 stop: Union[str, Sequence[str], None] = None,
                 stop_token_ids: Optional[Sequence[int]] = None,
                 ignore_eos: bool = False, logprobs: Optional[int] = None,
                 request_id: Optional[str] = None,
                 cache_salt: Optional[str] = None,
                 speculative: Optional[Mapping[str, Any]] = None,
                 json_schema: Union[str, Mapping[str, Any], None] = None,
                 json_object: bool = False, regex: Optional[str] = None,
                 choice: Optional[Sequence[str]] = None,
                 grammar: Optional[str] = None,
                 min_new_tokens: Optional[int] = None,
                 timeout: Optional[float] = None) -> GenerateResult:
        """Generates to the end and returns the whole result (arguments as
        stream's; for n > 1 sequences, generate_n); `timeout` bounds the whole
        generation."""
        return _drain(Stream(self._generate_call(locals())), _Accumulator())

    def generate_n(self, prompt: Prompt, n: int, *, max_tokens: Optional[int] = None,
                   temperature: Optional[float] = None, top_k: Optional[int] = None,
                   top_p: Optional[float] = None, min_p: Optional[float] = None,
                   repetition_penalty: Optional[float] = None,
                   presence_penalty: Optional[float] = None,
                   frequency_penalty: Optional[float] = None,
                   seed: Optional[int] = None,
                   stop: Union[str, Sequence[str], None] = None,
                   stop_token_ids: Optional[Sequence[int]] = None,
                   ignore_eos: bool = False, logprobs: Optional[int] = None,
                   request_id: Optional[str] = None,
                   cache_salt: Optional[str] = None,
                   speculative: Optional[Mapping[str, Any]] = None,
                   json_schema: Union[str, Mapping[str, Any], None] = None,
                   json_object: bool = False, regex: Optional[str] = None,
                   choice: Optional[Sequence[str]] = None,
                   grammar: Optional[str] = None,
                   min_new_tokens: Optional[int] = None,
                   timeout: Optional[float] = None) -> GenerateNResult:
        """Samples n sequences from the prompt (read once by the server) and
        returns them all once the last one ended: choice i is what generate()
        seeded seed + i returns. Other arguments as generate's."""
        return _drain(Stream(self._generate_call(locals())), _ChoicesAccumulator(n))

    def tokenize(self, text: str, *, timeout: Optional[float] = None) -> Tokenization:
        with rpc_errors():
            return tokenization(self._tokenize_call(text, timeout))

    def model_info(self, *, timeout: Optional[float] = None) -> ModelInfo:
        with rpc_errors():
            return ModelInfo.from_pb(self._model_info_call(timeout))

    def close(self) -> None:
        """Closes the channel; calls still running are cancelled."""
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class AsyncStream(StreamCore):
    """The deltas of one Generate call, as an async iterator. Cancelling the
    task that reads it, or close(), cancels the call on the server; after
    close(), iteration stops quietly."""

    def __aiter__(self) -> "AsyncStream":
        return self

    async def __anext__(self) -> Delta:
        if self._closed:
            raise StopAsyncIteration
        try:
            message = await self._call.read()
        except asyncio.CancelledError:
            if self._closed:  # how grpc.aio ends a read of a call close() cancelled
                raise StopAsyncIteration from None
            self._closed = True
            self._call.cancel()  # the reading task was cancelled
            raise
        except grpc.RpcError as e:
            self._failed(e, StopAsyncIteration)
        if message is grpc.aio.EOF:
            self._closed = True
            raise StopAsyncIteration
        return Delta.from_pb(message)

    async def aclose(self) -> None:
        self.close()

    async def __aenter__(self) -> "AsyncStream":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.close()


async def _adrain(stream: AsyncStream, acc: Any) -> Any:
    async with stream as s:
        async for delta in s:
            acc.add(delta)
    return acc.result()


class AsyncClient(ClientCore):
    """The asyncio client (grpc.aio); make it inside the event loop that uses
    it. Same calls and arguments as Client; stream() returns an AsyncStream,
    the others are coroutines. Close with `await client.close()` or use
    `async with`."""

    _aio = True

    def stream(self, prompt: Prompt, *, max_tokens: Optional[int] = None,
               temperature: Optional[float] = None, top_k: Optional[int] = None,
               top_p: Optional[float] = None, min_p: Optional[float] = None,
               repetition_penalty: Optional[float] = None,
               presence_penalty: Optional[float] = None,
               frequency_penalty: Optional[float] = None, seed: Optional[int] = None,
               stop: Union[str, Sequence[str], None] = None,
               stop_token_ids: Optional[Sequence[int]] = None,
               ignore_eos: bool = False, logprobs: Optional[int] = None,
               request_id: Optional[str] = None,
               cache_salt: Optional[str] = None,
               speculative: Optional[Mapping[str, Any]] = None,
               json_schema: Union[str, Mapping[str, Any], None] = None,
               json_object: bool = False, regex: Optional[str] = None,
               choice: Optional[Sequence[str]] = None,
               grammar: Optional[str] = None,
               min_new_tokens: Optional[int] = None, n: Optional[int] = None,
               timeout: Optional[float] = None) -> AsyncStream:
        """As Client.stream; iterate with `async for`."""
        return AsyncStream(self._generate_call(locals()))

    async def generate(self, prompt: Prompt, *, max_tokens: Optional[int] = None,
                       temperature: Optional[float] = None, top_k: Optional[int] = None,
                       top_p: Optional[float] = None, min_p: Optional[float] = None,
                       repetition_penalty: Optional[float] = None,
                       presence_penalty: Optional[float] = None,
                       frequency_penalty: Optional[float] = None,
                       seed: Optional[int] = None,
                       stop: Union[str, Sequence[str], None] = None,
                       stop_token_ids: Optional[Sequence[int]] = None,
                       ignore_eos: bool = False, logprobs: Optional[int] = None,
                       request_id: Optional[str] = None,
                       cache_salt: Optional[str] = None,
                       speculative: Optional[Mapping[str, Any]] = None,
                       json_schema: Union[str, Mapping[str, Any], None] = None,
                       json_object: bool = False, regex: Optional[str] = None,
                       choice: Optional[Sequence[str]] = None,
                       grammar: Optional[str] = None,
                       min_new_tokens: Optional[int] = None,
                       timeout: Optional[float] = None) -> GenerateResult:
        """As Client.generate. Cancelling the awaiting task cancels the call."""
        return await _adrain(AsyncStream(self._generate_call(locals())), _Accumulator())

    async def generate_n(self, prompt: Prompt, n: int, *,
                         max_tokens: Optional[int] = None,
                         temperature: Optional[float] = None,
                         top_k: Optional[int] = None, top_p: Optional[float] = None,
                         min_p: Optional[float] = None,
                         repetition_penalty: Optional[float] = None,
                         presence_penalty: Optional[float] = None,
                         frequency_penalty: Optional[float] = None,
                         seed: Optional[int] = None,
                         stop: Union[str, Sequence[str], None] = None,
                         stop_token_ids: Optional[Sequence[int]] = None,
                         ignore_eos: bool = False, logprobs: Optional[int] = None,
                         request_id: Optional[str] = None,
                         cache_salt: Optional[str] = None,
                         speculative: Optional[Mapping[str, Any]] = None,
                         json_schema: Union[str, Mapping[str, Any], None] = None,
                         json_object: bool = False, regex: Optional[str] = None,
                         choice: Optional[Sequence[str]] = None,
                         grammar: Optional[str] = None,
                         min_new_tokens: Optional[int] = None,
                         timeout: Optional[float] = None) -> GenerateNResult:
        """As Client.generate_n. Cancelling the awaiting task cancels the call
        and frees all n slots."""
        return await _adrain(AsyncStream(self._generate_call(locals())),
                             _ChoicesAccumulator(n))

    async def tokenize(self, text: str, *,
                       timeout: Optional[float] = None) -> Tokenization:
        with rpc_errors():
            return tokenization(await self._tokenize_call(text, timeout))

    async def model_info(self, *, timeout: Optional[float] = None) -> ModelInfo:
        with rpc_errors():
            return ModelInfo.from_pb(await self._model_info_call(timeout))

    async def close(self) -> None:
        """Closes the channel; calls still running are cancelled."""
        await self._channel.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()
