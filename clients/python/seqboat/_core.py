"""What Client and AsyncClient share, whatever their transport (grpc or
grpc.aio): the request built from a call's arguments, the channel and the stub,
deadlines, the mapping of gRPC errors to SeqboatError, and the state of a
stream. _client.py holds the two clients as shells over this core."""

from __future__ import annotations

import contextlib
import json
import os
from typing import (Any, Iterator, Mapping, NoReturn, Optional, Sequence, Tuple, Type,
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


_METHODS = {"prompt_lookup": pb.SPECULATIVE_METHOD_PROMPT_LOOKUP,
            "draft_model": pb.SPECULATIVE_METHOD_DRAFT_MODEL,
            "mtp": pb.SPECULATIVE_METHOD_MTP,
            "none": pb.SPECULATIVE_METHOD_NONE}


def _set_speculative(message: Any, options: Mapping[str, Any]) -> None:
    """{"method": "prompt_lookup" | "draft_model" | "mtp" | "none", "num_draft_tokens", "ngram_min",
    "ngram_max"} into SpeculativeOptions; unknown keys and methods are refused
    here, the ranges by the server."""
    if not isinstance(options, Mapping):
        raise errors.InvalidArgument("speculative: a mapping of options")
    for key, value in options.items():
        if key == "method":
            if value not in _METHODS:
                raise errors.InvalidArgument(
                    f"speculative.method: one of {sorted(_METHODS)}, got {value!r}")
            message.method = _METHODS[value]
        elif key in ("num_draft_tokens", "ngram_min", "ngram_max"):
            _set(message, key, value, f"speculative.{key}")
        else:
            raise errors.InvalidArgument(f"speculative.{key} is not an option")


_CONSTRAINTS = ("json_schema", "json_object", "regex", "choice", "grammar")


def _set_constraint(sampling: Any, get: Any) -> None:
    """The constraint oneof of SamplingParams: at most one of json_schema (a
    mapping, sent as its JSON text, or the text), json_object (True), regex,
    choice (a sequence of strings) and grammar. What they hold is the
    server's to check."""
    given = [name for name in _CONSTRAINTS
             if get(name) is not None and get(name) is not False]
    if len(given) > 1:
        raise errors.InvalidArgument(
            f"{given[0]} and {given[1]}: at most one constraint per request")
    if not given:
        return
    name = given[0]
    value = get(name)
    if name == "json_schema":
        if isinstance(value, Mapping):
            value = json.dumps(value)
        _set(sampling, "json_schema", value, "json_schema")
    elif name == "json_object":
        if value is not True:
            raise errors.InvalidArgument("json_object: True or False")
        sampling.json_object.SetInParent()
    elif name == "choice":
        if isinstance(value, (str, bytes)):
            raise errors.InvalidArgument("choice: a sequence of strings")
        try:
            sampling.choice.choices.extend(value)
        except (TypeError, ValueError) as e:
            raise errors.InvalidArgument(f"choice: {e}") from None
        sampling.choice.SetInParent()
    else:
        _set(sampling, name, value, name)


def request_from(arguments: Mapping[str, Any]) -> pb.GenerateRequest:
    """The GenerateRequest for the arguments of build_request or of a client's
    call (their locals(): `prompt` and the keyword arguments they declare; the
    others, such as `self` and `timeout`, are not read). Unset arguments stay
    unset, so the server applies its defaults; the server checks every value's
    range and answers INVALID_ARGUMENT naming the field. Here only types are
    checked."""
    get = arguments.get
    prompt = arguments["prompt"]
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
    if get("request_id") is not None:
        _set(r, "request_id", get("request_id"), "request_id")
    if get("cache_salt") is not None:
        _set(r, "cache_salt", get("cache_salt"), "cache_salt")
    if get("speculative") is not None:
        _set_speculative(r.speculative, get("speculative"))
    for name in ("temperature", "top_k", "top_p", "min_p", "repetition_penalty",
                 "presence_penalty", "frequency_penalty", "seed"):
        if get(name) is not None:
            _set(r.sampling, name, get(name), name)
    _set_constraint(r.sampling, get)
    if get("max_tokens") is not None:
        _set(r.stopping, "max_new_tokens", get("max_tokens"), "max_tokens")
    if get("min_new_tokens") is not None:
        _set(r.stopping, "min_new_tokens", get("min_new_tokens"), "min_new_tokens")
    if get("n") is not None:
        _set(r, "n", get("n"), "n")
    stop = get("stop")
    if stop is not None:
        stops = [stop] if isinstance(stop, str) else list(stop)
        try:
            r.stopping.stop.extend(stops)
        except (TypeError, ValueError) as e:
            raise errors.InvalidArgument(f"stop: {e}") from None
    if get("stop_token_ids") is not None:
        try:
            r.stopping.stop_token_ids.extend(get("stop_token_ids"))
        except (TypeError, ValueError) as e:
            raise errors.InvalidArgument(f"stop_token_ids: {e}") from None
    r.stopping.ignore_eos = bool(get("ignore_eos", False))
    if get("logprobs") is not None:
        r.logprobs.enabled = True
        _set(r.logprobs, "top_n", get("logprobs"), "logprobs")
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


def tls_credentials(ca_file: Optional[str], cert_file: Optional[str],
                    key_file: Optional[str]) -> grpc.ChannelCredentials:
    """TLS to a server started with --tls_cert_file: its CA from `ca_file`
    (None: the system's roots), and for mutual TLS this client's PEM
    certificate chain and key."""
    if bool(cert_file) != bool(key_file):
        raise ValueError("tls_cert_file and tls_key_file go together")

    def read(path: Optional[str]) -> Optional[bytes]:
        if not path:
            return None
        with open(path, "rb") as f:
            return f.read()

    return grpc.ssl_channel_credentials(root_certificates=read(ca_file),
                                        private_key=read(key_file),
                                        certificate_chain=read(cert_file))


class ClientCore:
    """One channel to a server, its TextGeneration stub and the default
    deadline; the calls it starts are grpc's or grpc.aio's as `_aio` says."""

    _aio = False

    def __init__(self, target: str, *, timeout: Optional[float] = None,
                 credentials: Optional[grpc.ChannelCredentials] = None,
                 options: ChannelOptions = (), api_key: Optional[str] = None,
                 tls_ca_file: Optional[str] = None, tls_cert_file: Optional[str] = None,
                 tls_key_file: Optional[str] = None):
        module = grpc.aio if self._aio else grpc
        if credentials is None and (tls_ca_file or tls_cert_file or tls_key_file):
            credentials = tls_credentials(tls_ca_file, tls_cert_file, tls_key_file)
        # A server started with --api_keys_file wants `authorization: Bearer
        # KEY` on every call; the key comes from SEQBOAT_API_KEY unless given.
        if api_key is None:
            api_key = os.environ.get("SEQBOAT_API_KEY") or None
        self._metadata = (("authorization", f"Bearer {api_key}"),) if api_key else None
        if credentials is not None:
            self._channel = module.secure_channel(target, credentials, options=options)
        else:
            self._channel = module.insecure_channel(target, options=options)
        self._stub = pb_grpc.TextGenerationStub(self._channel)
        self._timeout = timeout

    def _deadline(self, timeout: Optional[float]) -> Optional[float]:
        return self._timeout if timeout is None else timeout

    def _generate_call(self, arguments: Mapping[str, Any]) -> Any:
        """The Generate call for the arguments of a public call (its locals(),
        so that each public call names its arguments once, in its signature)."""
        return self._stub.Generate(request_from(arguments),
                                   timeout=self._deadline(arguments["timeout"]),
                                   metadata=self._metadata)

    def _tokenize_call(self, text: str, timeout: Optional[float]) -> Any:
        return self._stub.Tokenize(pb.TokenizeRequest(text=text),
                                   timeout=self._deadline(timeout),
                                   metadata=self._metadata)

    def _model_info_call(self, timeout: Optional[float]) -> Any:
        return self._stub.GetModelInfo(pb.GetModelInfoRequest(),
                                       timeout=self._deadline(timeout),
                                       metadata=self._metadata)


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
