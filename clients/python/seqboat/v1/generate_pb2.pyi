from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
FINISH_REASON_CANCELLED: FinishReason
FINISH_REASON_EOS: FinishReason
FINISH_REASON_LENGTH: FinishReason
FINISH_REASON_STOP_STRING: FinishReason
FINISH_REASON_UNSPECIFIED: FinishReason
SPECULATIVE_METHOD_DRAFT_MODEL: SpeculativeMethod
SPECULATIVE_METHOD_MTP: SpeculativeMethod
SPECULATIVE_METHOD_NONE: SpeculativeMethod
SPECULATIVE_METHOD_PROMPT_LOOKUP: SpeculativeMethod
SPECULATIVE_METHOD_UNSPECIFIED: SpeculativeMethod

class Choices(_message.Message):
    __slots__ = ["choices"]
    CHOICES_FIELD_NUMBER: _ClassVar[int]
    choices: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, choices: _Optional[_Iterable[str]] = ...) -> None: ...

class GenerateRequest(_message.Message):
    __slots__ = ["cache_salt", "logprobs", "n", "request_id", "sampling", "speculative", "stopping", "text", "token_ids"]
    CACHE_SALT_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    SAMPLING_FIELD_NUMBER: _ClassVar[int]
    SPECULATIVE_FIELD_NUMBER: _ClassVar[int]
    STOPPING_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    cache_salt: str
    logprobs: LogprobsOptions
    n: int
    request_id: str
    sampling: SamplingParams
    speculative: SpeculativeOptions
    stopping: StoppingCriteria
    text: str
    token_ids: TokenIds
    def __init__(self, request_id: _Optional[str] = ..., text: _Optional[str] = ..., token_ids: _Optional[_Union[TokenIds, _Mapping]] = ..., sampling: _Optional[_Union[SamplingParams, _Mapping]] = ..., stopping: _Optional[_Union[StoppingCriteria, _Mapping]] = ..., logprobs: _Optional[_Union[LogprobsOptions, _Mapping]] = ..., n: _Optional[int] = ..., cache_salt: _Optional[str] = ..., speculative: _Optional[_Union[SpeculativeOptions, _Mapping]] = ...) -> None: ...

class GenerateResponse(_message.Message):
    __slots__ = ["finish_reason", "index", "logprobs", "matched_stop", "request_id", "text", "token_ids", "usage"]
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    MATCHED_STOP_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    finish_reason: FinishReason
    index: int
    logprobs: _containers.RepeatedCompositeFieldContainer[TokenLogprobs]
    matched_stop: str
    request_id: str
    text: str
    token_ids: _containers.RepeatedScalarFieldContainer[int]
    usage: Usage
    def __init__(self, request_id: _Optional[str] = ..., index: _Optional[int] = ..., token_ids: _Optional[_Iterable[int]] = ..., text: _Optional[str] = ..., logprobs: _Optional[_Iterable[_Union[TokenLogprobs, _Mapping]]] = ..., finish_reason: _Optional[_Union[FinishReason, str]] = ..., usage: _Optional[_Union[Usage, _Mapping]] = ..., matched_stop: _Optional[str] = ...) -> None: ...

class GetModelInfoRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class JsonObject(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class LogprobsOptions(_message.Message):
    __slots__ = ["enabled", "top_n"]
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    TOP_N_FIELD_NUMBER: _ClassVar[int]
    enabled: bool
    top_n: int
    def __init__(self, enabled: bool = ..., top_n: _Optional[int] = ...) -> None: ...

class ModelInfo(_message.Message):
    __slots__ = ["backend", "eos_token_id", "layer_kinds", "max_new_tokens_limit", "max_prompt_tokens", "max_queue", "max_slots", "name", "prefix_cache_bytes", "state_bytes_per_slot", "vocab_size"]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    EOS_TOKEN_ID_FIELD_NUMBER: _ClassVar[int]
    LAYER_KINDS_FIELD_NUMBER: _ClassVar[int]
    MAX_NEW_TOKENS_LIMIT_FIELD_NUMBER: _ClassVar[int]
    MAX_PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MAX_QUEUE_FIELD_NUMBER: _ClassVar[int]
    MAX_SLOTS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PREFIX_CACHE_BYTES_FIELD_NUMBER: _ClassVar[int]
    STATE_BYTES_PER_SLOT_FIELD_NUMBER: _ClassVar[int]
    VOCAB_SIZE_FIELD_NUMBER: _ClassVar[int]
    backend: str
    eos_token_id: int
    layer_kinds: _containers.RepeatedScalarFieldContainer[str]
    max_new_tokens_limit: int
    max_prompt_tokens: int
    max_queue: int
    max_slots: int
    name: str
    prefix_cache_bytes: int
    state_bytes_per_slot: int
    vocab_size: int
    def __init__(self, name: _Optional[str] = ..., layer_kinds: _Optional[_Iterable[str]] = ..., vocab_size: _Optional[int] = ..., eos_token_id: _Optional[int] = ..., max_slots: _Optional[int] = ..., max_queue: _Optional[int] = ..., max_new_tokens_limit: _Optional[int] = ..., max_prompt_tokens: _Optional[int] = ..., backend: _Optional[str] = ..., state_bytes_per_slot: _Optional[int] = ..., prefix_cache_bytes: _Optional[int] = ...) -> None: ...

class SamplingParams(_message.Message):
    __slots__ = ["choice", "frequency_penalty", "grammar", "json_object", "json_schema", "min_p", "presence_penalty", "regex", "repetition_penalty", "seed", "temperature", "top_k", "top_p"]
    CHOICE_FIELD_NUMBER: _ClassVar[int]
    FREQUENCY_PENALTY_FIELD_NUMBER: _ClassVar[int]
    GRAMMAR_FIELD_NUMBER: _ClassVar[int]
    JSON_OBJECT_FIELD_NUMBER: _ClassVar[int]
    JSON_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    MIN_P_FIELD_NUMBER: _ClassVar[int]
    PRESENCE_PENALTY_FIELD_NUMBER: _ClassVar[int]
    REGEX_FIELD_NUMBER: _ClassVar[int]
    REPETITION_PENALTY_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    TOP_P_FIELD_NUMBER: _ClassVar[int]
    choice: Choices
    frequency_penalty: float
    grammar: str
    json_object: JsonObject
    json_schema: str
    min_p: float
    presence_penalty: float
    regex: str
    repetition_penalty: float
    seed: int
    temperature: float
    top_k: int
    top_p: float
    def __init__(self, temperature: _Optional[float] = ..., top_k: _Optional[int] = ..., top_p: _Optional[float] = ..., min_p: _Optional[float] = ..., repetition_penalty: _Optional[float] = ..., seed: _Optional[int] = ..., presence_penalty: _Optional[float] = ..., frequency_penalty: _Optional[float] = ..., json_schema: _Optional[str] = ..., json_object: _Optional[_Union[JsonObject, _Mapping]] = ..., regex: _Optional[str] = ..., choice: _Optional[_Union[Choices, _Mapping]] = ..., grammar: _Optional[str] = ...) -> None: ...

class SpeculativeOptions(_message.Message):
    __slots__ = ["method", "ngram_max", "ngram_min", "num_draft_tokens"]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    NGRAM_MAX_FIELD_NUMBER: _ClassVar[int]
    NGRAM_MIN_FIELD_NUMBER: _ClassVar[int]
    NUM_DRAFT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    method: SpeculativeMethod
    ngram_max: int
    ngram_min: int
    num_draft_tokens: int
    def __init__(self, method: _Optional[_Union[SpeculativeMethod, str]] = ..., num_draft_tokens: _Optional[int] = ..., ngram_min: _Optional[int] = ..., ngram_max: _Optional[int] = ...) -> None: ...

class StoppingCriteria(_message.Message):
    __slots__ = ["ignore_eos", "max_new_tokens", "min_new_tokens", "stop", "stop_token_ids"]
    IGNORE_EOS_FIELD_NUMBER: _ClassVar[int]
    MAX_NEW_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MIN_NEW_TOKENS_FIELD_NUMBER: _ClassVar[int]
    STOP_FIELD_NUMBER: _ClassVar[int]
    STOP_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    ignore_eos: bool
    max_new_tokens: int
    min_new_tokens: int
    stop: _containers.RepeatedScalarFieldContainer[str]
    stop_token_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, max_new_tokens: _Optional[int] = ..., stop: _Optional[_Iterable[str]] = ..., stop_token_ids: _Optional[_Iterable[int]] = ..., ignore_eos: bool = ..., min_new_tokens: _Optional[int] = ...) -> None: ...

class TokenIds(_message.Message):
    __slots__ = ["ids"]
    IDS_FIELD_NUMBER: _ClassVar[int]
    ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, ids: _Optional[_Iterable[int]] = ...) -> None: ...

class TokenLogprob(_message.Message):
    __slots__ = ["logprob", "token_id"]
    LOGPROB_FIELD_NUMBER: _ClassVar[int]
    TOKEN_ID_FIELD_NUMBER: _ClassVar[int]
    logprob: float
    token_id: int
    def __init__(self, token_id: _Optional[int] = ..., logprob: _Optional[float] = ...) -> None: ...

class TokenLogprobs(_message.Message):
    __slots__ = ["chosen", "top"]
    CHOSEN_FIELD_NUMBER: _ClassVar[int]
    TOP_FIELD_NUMBER: _ClassVar[int]
    chosen: TokenLogprob
    top: _containers.RepeatedCompositeFieldContainer[TokenLogprob]
    def __init__(self, chosen: _Optional[_Union[TokenLogprob, _Mapping]] = ..., top: _Optional[_Iterable[_Union[TokenLogprob, _Mapping]]] = ...) -> None: ...

class TokenizeRequest(_message.Message):
    __slots__ = ["text"]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    text: str
    def __init__(self, text: _Optional[str] = ...) -> None: ...

class TokenizeResponse(_message.Message):
    __slots__ = ["pieces", "token_ids"]
    PIECES_FIELD_NUMBER: _ClassVar[int]
    TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    pieces: _containers.RepeatedScalarFieldContainer[bytes]
    token_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, token_ids: _Optional[_Iterable[int]] = ..., pieces: _Optional[_Iterable[bytes]] = ...) -> None: ...

class Usage(_message.Message):
    __slots__ = ["cached_prompt_tokens", "generated_tokens", "prompt_tokens"]
    CACHED_PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    GENERATED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    cached_prompt_tokens: int
    generated_tokens: int
    prompt_tokens: int
    def __init__(self, prompt_tokens: _Optional[int] = ..., generated_tokens: _Optional[int] = ..., cached_prompt_tokens: _Optional[int] = ...) -> None: ...

class SpeculativeMethod(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class FinishReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
