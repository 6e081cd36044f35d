"""seqboat's Python client: typed sync and asyncio calls of the TextGeneration
gRPC service (proto/seqboat/v1/generate.proto), whose generated stubs are in
seqboat.v1.

    import seqboat
    with seqboat.Client("localhost:50051") as client:
        for delta in client.stream("Hello", max_tokens=20):
            print(delta.text, end="")
"""

from seqboat._client import (AsyncClient, AsyncStream, Client, Stream,
                             build_request)
from seqboat.errors import (Cancelled, DeadlineExceeded, FailedPrecondition,
                            Internal, InvalidArgument, NotFound,
                            ResourceExhausted, SeqboatError, Unauthenticated,
                            Unavailable, Unimplemented)
from seqboat.types import (Delta, FinishReason, GenerateNResult, GenerateResult,
                           ModelInfo, TokenLogprob, TokenLogprobs, Tokenization,
                           Usage)

__version__ = "0.1.0"

__all__ = [
    "AsyncClient", "AsyncStream", "Client", "Stream", "build_request",
    "Cancelled", "DeadlineExceeded", "FailedPrecondition", "Internal",
    "InvalidArgument", "NotFound", "ResourceExhausted", "SeqboatError",
    "Unauthenticated", "Unavailable", "Unimplemented",
    "Delta", "FinishReason", "GenerateNResult", "GenerateResult", "ModelInfo",
    "TokenLogprob", "TokenLogprobs", "Tokenization", "Usage",
]
