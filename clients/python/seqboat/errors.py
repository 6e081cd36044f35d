"""Typed exceptions for the gRPC statuses a seqboat server answers.

Every exception the client raises for a failed RPC is a SeqboatError carrying
the status code and the server's message unchanged (it names the field or the
limit at fault). DeadlineExceeded is also a TimeoutError, so code that handles
timeouts generically catches it.
"""

from __future__ import annotations

from typing import Dict, Optional, Type

import grpc


class SeqboatError(Exception):
    """A failed RPC: `code` is the gRPC status code, `message` the server's text."""

    code: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(self, message: str, code: Optional[grpc.StatusCode] = None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        return f"{self.code.name}: {self.message}"


class InvalidArgument(SeqboatError, ValueError):
    """The request was refused before it started: a bad value, a prompt over the
    server's limits, or a request that could not be parsed."""

    code = grpc.StatusCode.INVALID_ARGUMENT


class ResourceExhausted(SeqboatError):
    """The server's queue is full; retry later or on another replica."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class Unavailable(SeqboatError):
    """The server cannot be reached, is draining, or failed the request with it."""

    code = grpc.StatusCode.UNAVAILABLE


class DeadlineExceeded(SeqboatError, TimeoutError):
    """The call's timeout passed before it finished; the server stopped it."""

    code = grpc.StatusCode.DEADLINE_EXCEEDED


class Cancelled(SeqboatError):
    """The RPC was cancelled by something other than this stream's close()."""

    code = grpc.StatusCode.CANCELLED


class NotFound(SeqboatError):
    code = grpc.StatusCode.NOT_FOUND


class FailedPrecondition(SeqboatError):
    code = grpc.StatusCode.FAILED_PRECONDITION


class Unimplemented(SeqboatError):
    """The server does not have this method (an older or a different server)."""

    code = grpc.StatusCode.UNIMPLEMENTED


class Internal(SeqboatError):
    code = grpc.StatusCode.INTERNAL


class Unauthenticated(SeqboatError):
    """The server wants an API key and got none of its keys (api_key, or the
    SEQBOAT_API_KEY environment variable)."""

    code = grpc.StatusCode.UNAUTHENTICATED


_BY_CODE: Dict[grpc.StatusCode, Type[SeqboatError]] = {
    cls.code: cls
    for cls in (InvalidArgument, ResourceExhausted, Unavailable, DeadlineExceeded,
                Cancelled, NotFound, FailedPrecondition, Unimplemented, Internal,
                Unauthenticated)
}


def from_rpc_error(error: grpc.RpcError) -> SeqboatError:
    """The typed exception for a failed call (sync or asyncio)."""
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    details = error.details() if hasattr(error, "details") else None
    cls = _BY_CODE.get(code, SeqboatError)
    return cls(details or "", code)
