"""Client and AsyncClient: the TextGeneration service behind typed calls.

Both wrap one gRPC channel. A stream is cancelled on the server as soon as its
caller lets go of it: close() (or leaving its `with` block), breaking out of the
loop over it (the stream is closed when it is garbage collected, at once in
CPython), a deadline, or, for AsyncClient, cancelling the task that reads it.
The server then frees the request's slot at its next engine step.
"""

from __future__ import annotations

import asyncio
from typing import Any, Optional, Sequence, Tuple, Union

import grpc

from seqboat import errors
from seqboat.types import (Delta, GenerateNResult, GenerateResult, ModelInfo,
                           Tokenization, _Accumulator, _ChoicesAccumulator)
from seqboat.v1 import generate_pb2 as pb
from seqboat.v1 import generate_pb2_grpc as pb_grpc

Prompt = Union[str, Sequence[int]]
ChannelOptions = Sequence[Tuple[str, Any]]


def _set(message: Any, field: str, value: Any, param: str) -> None:
    try:
        setattr(message, field, value)
    except (TypeError, ValueError) as e:
        raise errors.InvalidArgument(f"{param}: {e}") from None


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
                  min_new_tokens: Optional[int] = None,
                  n: Optional[int] = None) -> pb.GenerateRequest:
    """The GenerateRequest for these arguments. Unset arguments stay unset, so
    the server applies its defaults; the server checks every value's range and
    answers INVALID_ARGUMENT naming the field. Here only types are checked."""
    r = pb.GenerateRequest()
    if isinstance(prompt, str):
        r.text = prompt
    elif isinstance(prompt, (bytes, bytearray)):
        raise TypeError("prompt: pass text as str (decoded) or a sequence of token ids")
    else:
        try:
            r.token_ids.ids.extend(prompt)
        except (TypeError, ValueError) as e:
            raise TypeError(f"prompt: not text nor a sequence of token ids: {e}") from None
    if request_id is not None:
        _set(r, "request_id", request_id, "request_id")
    for name, value in (("temperature", temperature), ("top_k", top_k),
                        ("top_p", top_p), ("min_p", min_p),
                        ("repetition_penalty", repetition_penalty),
                        ("presence_penalty", presence_penalty),
                        ("frequency_penalty", frequency_penalty), ("seed", seed)):
        if value is not None:
            _set(r.sampling, name, value, name)
    if max_tokens is not None:
        _set(r.stopping, "max_new_tokens", max_tokens, "max_tokens")
    if min_new_tokens is not None:
        _set(r.stopping, "min_new_tokens", min_new_tokens, "min_new_tokens")
    if n is not None:
        _set(r, "n", n, "n")
    if stop is not None:
        stops = [stop] if isinstance(stop, str) else list(stop)
        try:
            r.stopping.stop.extend(stops)
        except (TypeError, ValueError) as e:
            raise errors.InvalidArgument(f"stop: {e}") from None
    if stop_token_ids is not None:
        try:
            r.stopping.stop_token_ids.extend(stop_token_ids)
        except (TypeError, ValueError) as e:
            raise errors.InvalidArgument(f"stop_token_ids: {e}") from None
    r.stopping.ignore_eos = bool(ignore_eos)
    if logprobs is not None:
        r.logprobs.enabled = True
        _set(r.logprobs, "top_n", logprobs, "logprobs")
    return r


def _channel(target: str, credentials: Optional[grpc.ChannelCredentials],
             options: ChannelOptions, aio: bool) -> Any:
    module = grpc.aio if aio else grpc
    if credentials is not None:
        return module.secure_channel(target, credentials, options=options)
    return module.insecure_channel(target, options=options)


class Stream:
    """The deltas of one Generate call, as an iterator. close() cancels the call
    on the server; after it, iteration stops quietly."""

    def __init__(self, call: Any):
        self._call = call
        self._closed = False

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
            if self._closed:  # close() from another thread
                raise StopIteration from None
            self._closed = True
            raise errors.from_rpc_error(e) from e
        return Delta.from_pb(message)

    def close(self) -> None:
        """Cancels the call if it is still running; idempotent."""
        self._closed = True
        call = getattr(self, "_call", None)
        if call is not None:
            call.cancel()  # a no-op once the call has ended

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: nothing left to cancel
            pass


class Client:
    """A blocking client of one seqboat server (or a load balancer in front of
    several). `timeout` is the default deadline in seconds of every call (None:
    none); each call may pass its own. Thread-safe; close() when done, or use it
    as a context manager."""

    def __init__(self, target: str, *, timeout: Optional[float] = None,
                 credentials: Optional[grpc.ChannelCredentials] = None,
                 options: ChannelOptions = ()):
        self._channel = _channel(target, credentials, options, aio=False)
        self._stub = pb_grpc.TextGenerationStub(self._channel)
        self._timeout = timeout

    def _deadline(self, timeout: Optional[float]) -> Optional[float]:
        return self._timeout if timeout is None else timeout

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
               min_new_tokens: Optional[int] = None, n: Optional[int] = None,
               timeout: Optional[float] = None) -> Stream:
        """Starts generating and returns the stream of deltas. `prompt` is text
        or token ids; `max_tokens` caps the new tokens and `min_new_tokens`
        holds EOS, the stop ids and the stop strings back until that many;
        `logprobs` N asks for the chosen token's log probability and the N best
        (0: the chosen only). `n` samples n sequences from the prompt (sequence
        i seeded seed + i): their deltas interleave, each with its `index`, and
        each sequence's last one carries its finish reason and usage.
        Errors (a bad value, a full queue, the deadline) are raised while
        iterating, as SeqboatError subclasses."""
        request = build_request(
            prompt, max_tokens=max_tokens, temperature=temperature, top_k=top_k,
            top_p=top_p, min_p=min_p, repetition_penalty=repetition_penalty,
            presence_penalty=presence_penalty, frequency_penalty=frequency_penalty,
            seed=seed, stop=stop, stop_token_ids=stop_token_ids,
            ignore_eos=ignore_eos, logprobs=logprobs, request_id=request_id,
            min_new_tokens=min_new_tokens, n=n)
        return Stream(self._stub.Generate(request, timeout=self._deadline(timeout)))

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
                 min_new_tokens: Optional[int] = None,
                 timeout: Optional[float] = None) -> GenerateResult:
        """Generates to the end and returns the whole result (arguments as
        stream's; for n > 1 sequences, generate_n); `timeout` bounds the whole
        generation."""
        acc = _Accumulator()
        with self.stream(prompt, max_tokens=max_tokens, temperature=temperature,
                         top_k=top_k, top_p=top_p, min_p=min_p,
                         repetition_penalty=repetition_penalty,
                         presence_penalty=presence_penalty,
                         frequency_penalty=frequency_penalty, seed=seed,
                         stop=stop, stop_token_ids=stop_token_ids,
                         ignore_eos=ignore_eos, logprobs=logprobs,
                         request_id=request_id, min_new_tokens=min_new_tokens,
                         timeout=timeout) as s:
            for delta in s:
                acc.add(delta)
        return acc.result()

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
                   min_new_tokens: Optional[int] = None,
                   timeout: Optional[float] = None) -> GenerateNResult:
        """Samples n sequences from the prompt (read once by the server) and
        returns them all once the last one ended: choice i is what generate()
        seeded seed + i returns. Other arguments as generate's."""
        acc = _ChoicesAccumulator(n)
        with self.stream(prompt, max_tokens=max_tokens, temperature=temperature,
                         top_k=top_k, top_p=top_p, min_p=min_p,
                         repetition_penalty=repetition_penalty,
                         presence_penalty=presence_penalty,
                         frequency_penalty=frequency_penalty, seed=seed,
                         stop=stop, stop_token_ids=stop_token_ids,
                         ignore_eos=ignore_eos, logprobs=logprobs,
                         request_id=request_id, min_new_tokens=min_new_tokens,
                         n=n, timeout=timeout) as s:
            for delta in s:
                acc.add(delta)
        return acc.result()

    def tokenize(self, text: str, *, timeout: Optional[float] = None) -> Tokenization:
        try:
            r = self._stub.Tokenize(pb.TokenizeRequest(text=text),
                                    timeout=self._deadline(timeout))
        except grpc.RpcError as e:
            raise errors.from_rpc_error(e) from e
        return Tokenization(tuple(r.token_ids), tuple(r.pieces))

    def model_info(self, *, timeout: Optional[float] = None) -> ModelInfo:
        try:
            r = self._stub.GetModelInfo(pb.GetModelInfoRequest(),
                                        timeout=self._deadline(timeout))
        except grpc.RpcError as e:
            raise errors.from_rpc_error(e) from e
        return ModelInfo.from_pb(r)

    def close(self) -> None:
        """Closes the channel; calls still running are cancelled."""
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class AsyncStream:
    """The deltas of one Generate call, as an async iterator. Cancelling the
    task that reads it, or close(), cancels the call on the server; after
    close(), iteration stops quietly."""

    def __init__(self, call: Any):
        self._call = call
        self._closed = False

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
            if self._closed:
                raise StopAsyncIteration from None
            self._closed = True
            raise errors.from_rpc_error(e) from e
        if message is grpc.aio.EOF:
            self._closed = True
            raise StopAsyncIteration
        return Delta.from_pb(message)

    def close(self) -> None:
        """Cancels the call if it is still running; idempotent (not a coroutine,
        so it also works from a finally block of synchronous code)."""
        self._closed = True
        call = getattr(self, "_call", None)
        if call is not None:
            call.cancel()  # a no-op once the call has ended

    async def aclose(self) -> None:
        self.close()

    async def __aenter__(self) -> "AsyncStream":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # the event loop is gone: so is the call
            pass


class AsyncClient:
    """The asyncio client (grpc.aio); make it inside the event loop that uses
    it. Same calls and arguments as Client; stream() returns an AsyncStream,
    the others are coroutines. Close with `await client.close()` or use
    `async with`."""

    def __init__(self, target: str, *, timeout: Optional[float] = None,
                 credentials: Optional[grpc.ChannelCredentials] = None,
                 options: ChannelOptions = ()):
        self._channel = _channel(target, credentials, options, aio=True)
        self._stub = pb_grpc.TextGenerationStub(self._channel)
        self._timeout = timeout

    def _deadline(self, timeout: Optional[float]) -> Optional[float]:
        return self._timeout if timeout is None else timeout

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
               min_new_tokens: Optional[int] = None, n: Optional[int] = None,
               timeout: Optional[float] = None) -> AsyncStream:
        """As Client.stream; iterate with `async for`."""
        request = build_request(
            prompt, max_tokens=max_tokens, temperature=temperature, top_k=top_k,
            top_p=top_p, min_p=min_p, repetition_penalty=repetition_penalty,
            presence_penalty=presence_penalty, frequency_penalty=frequency_penalty,
            seed=seed, stop=stop, stop_token_ids=stop_token_ids,
            ignore_eos=ignore_eos, logprobs=logprobs, request_id=request_id,
            min_new_tokens=min_new_tokens, n=n)
        return AsyncStream(self._stub.Generate(request, timeout=self._deadline(timeout)))

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
                       min_new_tokens: Optional[int] = None,
                       timeout: Optional[float] = None) -> GenerateResult:
        """As Client.generate. Cancelling the awaiting task cancels the call."""
        acc = _Accumulator()
        async with self.stream(prompt, max_tokens=max_tokens, temperature=temperature,
                               top_k=top_k, top_p=top_p, min_p=min_p,
                               repetition_penalty=repetition_penalty,
                               presence_penalty=presence_penalty,
                               frequency_penalty=frequency_penalty, seed=seed,
                               stop=stop, stop_token_ids=stop_token_ids,
                               ignore_eos=ignore_eos, logprobs=logprobs,
                               request_id=request_id, min_new_tokens=min_new_tokens,
                               timeout=timeout) as s:
            async for delta in s:
                acc.add(delta)
        return acc.result()

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
                         min_new_tokens: Optional[int] = None,
                         timeout: Optional[float] = None) -> GenerateNResult:
        """As Client.generate_n. Cancelling the awaiting task cancels the call
        and frees all n slots."""
        acc = _ChoicesAccumulator(n)
        async with self.stream(prompt, max_tokens=max_tokens, temperature=temperature,
                               top_k=top_k, top_p=top_p, min_p=min_p,
                               repetition_penalty=repetition_penalty,
                               presence_penalty=presence_penalty,
                               frequency_penalty=frequency_penalty, seed=seed,
                               stop=stop, stop_token_ids=stop_token_ids,
                               ignore_eos=ignore_eos, logprobs=logprobs,
                               request_id=request_id, min_new_tokens=min_new_tokens,
                               n=n, timeout=timeout) as s:
            async for delta in s:
                acc.add(delta)
        return acc.result()

    async def tokenize(self, text: str, *,
                       timeout: Optional[float] = None) -> Tokenization:
        try:
            r = await self._stub.Tokenize(pb.TokenizeRequest(text=text),
                                          timeout=self._deadline(timeout))
        except grpc.RpcError as e:
            raise errors.from_rpc_error(e) from e
        return Tokenization(tuple(r.token_ids), tuple(r.pieces))

    async def model_info(self, *, timeout: Optional[float] = None) -> ModelInfo:
        try:
            r = await self._stub.GetModelInfo(pb.GetModelInfoRequest(),
                                              timeout=self._deadline(timeout))
        except grpc.RpcError as e:
            raise errors.from_rpc_error(e) from e
        return ModelInfo.from_pb(r)

    async def close(self) -> None:
        """Closes the channel; calls still running are cancelled."""
        await self._channel.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()
