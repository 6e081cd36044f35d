"""What Client and AsyncClient share, whatever their transport (grpc or
grpc.aio): the request built from a call's arguments, the channel and the stub,
deadlines, the mapping of gRPC errors to SeqboatError, and the state of a
stream. _client.py holds the two clients as shells over this core."""

from __future__ import annotations

import contextlib
from typing import (Any, Dict, Iterator, NoReturn, Optional, Sequence, Tuple, Type,
                    Union)

import grpc

from seqboat import errors
from seqboat.types import Tokenization
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


@contextlib.contextmanager
def rpc_errors() -> Iterator[None]:
    """Raises a failed call's grpc.RpcError as its SeqboatError subclass."""
    try:
        yield
    except grpc.RpcError as e:
        raise errors.from_rpc_error(e) from e


def tokenization(r: pb.TokenizeResponse) -> Tokenization:
    return Tokenization(tuple(r.token_ids), tuple(r.pieces))


class ClientCore:
    """One channel to a server, its TextGeneration stub and the default
    deadline; the calls it starts are grpc's or grpc.aio's as `_aio` says."""

    _aio = False

    def __init__(self, target: str, *, timeout: Optional[float] = None,
                 credentials: Optional[grpc.ChannelCredentials] = None,
                 options: ChannelOptions = ()):
        module = grpc.aio if self._aio else grpc
        if credentials is not None:
            self._channel = module.secure_channel(target, credentials, options=options)
        else:
            self._channel = module.insecure_channel(target, options=options)
        self._stub = pb_grpc.TextGenerationStub(self._channel)
        self._timeout = timeout

    def _deadline(self, timeout: Optional[float]) -> Optional[float]:
        return self._timeout if timeout is None else timeout

    def _generate_call(self, arguments: Dict[str, Any]) -> Any:
        """The Generate call for the arguments of a public call (its locals():
        self, prompt, timeout and build_request's keyword arguments), so that
        each public call names its arguments once, in its signature."""
        options = {k: v for k, v in arguments.items()
                   if k not in ("self", "prompt", "timeout")}
        request = build_request(arguments["prompt"], **options)
        return self._stub.Generate(request, timeout=self._deadline(arguments["timeout"]))

    def _tokenize_call(self, text: str, timeout: Optional[float]) -> Any:
        return self._stub.Tokenize(pb.TokenizeRequest(text=text),
                                   timeout=self._deadline(timeout))

    def _model_info_call(self, timeout: Optional[float]) -> Any:
        return self._stub.GetModelInfo(pb.GetModelInfoRequest(),
                                       timeout=self._deadline(timeout))


class StreamCore:
    """A running Generate call and whether its reader is done with it."""

    def __init__(self, call: Any):
        self._call = call
        self._closed = False

    def _failed(self, e: grpc.RpcError, stop: Type[Exception]) -> NoReturn:
        """Raises `stop` (the end of iteration) when the call failed because
        close() cancelled it, else the call's SeqboatError."""
        if self._closed:  # close() from another thread or task
            raise stop from None
        self._closed = True
        raise errors.from_rpc_error(e) from e

    def close(self) -> None:
        """Cancels the call if it is still running; idempotent (not a coroutine,
        also on AsyncStream, so it also works from a finally block of
        synchronous code)."""
        self._closed = True
        call = getattr(self, "_call", None)
        if call is not None:
            call.cancel()  # a no-op once the call has ended

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown, or the event loop is gone: so is the call
            pass
