"""The Python client (clients/python) against a real seqboat_server: results
against the raw generated stubs, typed deltas, errors as typed exceptions with
the server's message, deadlines, and cancellation that frees the server's slot
(seen in its /metrics)."""

import asyncio
import pathlib
import subprocess
import threading

import grpc
import pytest

import seqboat
from seqboat.v1 import generate_pb2 as pb
from seqboat.v1 import generate_pb2_grpc as pb_grpc

ROOT = pathlib.Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "clients/python"
PROMPT = "The secret of happiness is"
# Far more tokens than any test waits for (minutes of decoding): a stream of
# this length that ends soon was ended by its cancellation.
LONG = 1_000_000


@pytest.fixture(scope="module")
def client(server):
    with seqboat.Client(server.grpc, timeout=120) as c:
        yield c


def running(server, n):
    server.wait_for("seqboat_num_requests_running", lambda v: v == n)


def assert_idle(server):
    """No request running or waiting, every slot free."""
    for series in ("seqboat_num_requests_running", "seqboat_num_requests_waiting",
                   "seqboat_state_slots_used"):
        server.wait_for(series, lambda v: v == 0)


def outcome(r):
    """What a result says of its sequence, less what differs between calls of
    the same request: the request id and how much of the prompt came from the
    prefix cache."""
    return (r.index, r.token_ids, r.text, r.logprobs, r.finish_reason, r.matched_stop,
            r.usage.prompt_tokens, r.usage.generated_tokens)


def raw_generate(server, request):
    """The same call through the generated stub alone."""
    with grpc.insecure_channel(server.grpc) as channel:
        return list(pb_grpc.TextGenerationStub(channel).Generate(request, timeout=120))


# ------------------------------------------------------------------ stubs

def test_committed_stubs_equal_a_fresh_generation(tmp_path):
    subprocess.run(["bash", str(PACKAGE / "gen_stubs.sh"), str(tmp_path)], check=True)
    for name in ("generate_pb2.py", "generate_pb2.pyi", "generate_pb2_grpc.py"):
        fresh = (tmp_path / "seqboat/v1" / name).read_bytes()
        committed = (PACKAGE / "seqboat/v1" / name).read_bytes()
        assert fresh == committed, (
            f"clients/python/seqboat/v1/{name} is stale: run clients/python/gen_stubs.sh")


# ------------------------------------------------------------------ sync

def test_generate_equals_the_raw_stub(server, client):
    r = client.generate(PROMPT, max_tokens=40, temperature=0.8, top_k=50, seed=11,
                        presence_penalty=0.5, frequency_penalty=0.25, ignore_eos=True)
    raw = raw_generate(server, pb.GenerateRequest(
        text=PROMPT, sampling=pb.SamplingParams(temperature=0.8, top_k=50, seed=11,
                                                presence_penalty=0.5,
                                                frequency_penalty=0.25),
        stopping=pb.StoppingCriteria(max_new_tokens=40, ignore_eos=True)))
    unpenalized = client.generate(PROMPT, max_tokens=40, temperature=0.8, top_k=50,
                                  seed=11, ignore_eos=True)
    assert unpenalized.token_ids != r.token_ids  # the penalties reached the server
    assert r.token_ids == tuple(t for m in raw for t in m.token_ids)
    assert r.text == "".join(m.text for m in raw)
    assert r.request_id and r.request_id != raw[0].request_id  # the server's, per call
    assert r.finish_reason is seqboat.FinishReason.LENGTH
    # The second call resumes from the first one's prompt in the prefix cache.
    assert (r.usage.prompt_tokens, r.usage.generated_tokens) == (
        raw[-1].usage.prompt_tokens, raw[-1].usage.generated_tokens)
    assert r.usage.prompt_tokens == len(client.tokenize(PROMPT).token_ids)
    assert len(r.token_ids) == 40


def test_stream_yields_typed_deltas_with_the_finish_on_the_last(client):
    deltas = list(client.stream(PROMPT, max_tokens=30, temperature=0.7, seed=3,
                                ignore_eos=True, request_id="client-stream-1"))
    assert len(deltas) >= 2
    assert all(isinstance(d, seqboat.Delta) for d in deltas)
    assert all(d.request_id == "client-stream-1" for d in deltas)
    assert all(isinstance(t, int) for d in deltas for t in d.token_ids)
    assert all(d.finish_reason is None and d.usage is None for d in deltas[:-1])
    last = deltas[-1]
    assert last.finish_reason is seqboat.FinishReason.LENGTH
    assert last.usage.generated_tokens == 30
    whole = client.generate(PROMPT, max_tokens=30, temperature=0.7, seed=3, ignore_eos=True)
    assert tuple(t for d in deltas for t in d.token_ids) == whole.token_ids
    assert "".join(d.text for d in deltas) == whole.text


def test_token_id_prompt_and_tokenize(client):
    tok = client.tokenize(PROMPT)
    assert b"".join(tok.pieces) == PROMPT.encode()
    assert len(tok.pieces) == len(tok.token_ids)
    by_text = client.generate(PROMPT, max_tokens=20, seed=5, ignore_eos=True)
    by_ids = client.generate(list(tok.token_ids), max_tokens=20, seed=5, ignore_eos=True)
    assert by_ids.token_ids == by_text.token_ids
    assert by_ids.usage.prompt_tokens == len(tok.token_ids)


def test_model_info(server, client):
    info = client.model_info()
    assert info.name == "seqboat-hybrid-bytes"  # weights/models/default's config
    assert (info.max_slots, info.max_queue) == (server.max_slots, server.max_queue)
    assert info.max_new_tokens_limit == LONG
    assert 0 <= info.eos_token_id < info.vocab_size
    assert info.layer_kinds and info.backend in ("cpu", "cuda")
    assert info.state_bytes_per_slot > 0


def test_stop_string(client):
    free = client.generate(PROMPT, max_tokens=60, temperature=0, ignore_eos=True)
    stop = free.text[12:15]
    assert len(stop) == 3
    r = client.generate(PROMPT, max_tokens=60, temperature=0, ignore_eos=True, stop=stop)
    assert r.finish_reason is seqboat.FinishReason.STOP_STRING
    assert r.matched_stop == stop
    assert r.text == free.text[:free.text.find(stop)]


def test_logprobs(client):
    r = client.generate(PROMPT, max_tokens=10, temperature=0, logprobs=3, ignore_eos=True)
    assert len(r.logprobs) == len(r.token_ids) == 10
    for token, lp in zip(r.token_ids, r.logprobs):
        assert lp.chosen.token_id == token and lp.chosen.logprob <= 0
        assert len(lp.top) == 3
        assert [t.logprob for t in lp.top] == sorted((t.logprob for t in lp.top), reverse=True)
        assert lp.top[0].token_id == token  # greedy: the best is the chosen one


@pytest.mark.parametrize("kwargs, field", [
    (dict(temperature=-1), "temperature"),
    (dict(top_p=2), "top_p"),
    (dict(presence_penalty=2.5), "presence_penalty"),
    (dict(frequency_penalty=-3), "frequency_penalty"),
    (dict(max_tokens=LONG + 1), "max_new_tokens"),
    (dict(logprobs=21), "top_n"),
    (dict(stop=["x"] * 17), "stop"),
])
def test_invalid_values_raise_invalid_argument_with_the_servers_message(client, kwargs, field):
    with pytest.raises(seqboat.InvalidArgument) as e:
        client.generate(PROMPT, **kwargs)
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert field in e.value.message
    assert isinstance(e.value, ValueError) and isinstance(e.value, seqboat.SeqboatError)
    assert str(e.value) == f"INVALID_ARGUMENT: {e.value.message}"


def test_min_new_tokens_holds_eos_back(server, client):
    """A stop id (an EOS to the server) the greedy text starts with ends the
    generation at once; with min_new_tokens it is never chosen before that
    many tokens, and the result is the raw stub's."""
    free = client.generate(PROMPT, max_tokens=12, temperature=0, ignore_eos=True)
    held = free.token_ids[0]
    at_once = client.generate(PROMPT, max_tokens=30, temperature=0,
                              stop_token_ids=[held])
    assert at_once.finish_reason is seqboat.FinishReason.EOS
    assert at_once.text == ""
    r = client.generate(PROMPT, max_tokens=30, temperature=0, stop_token_ids=[held],
                        min_new_tokens=8)
    raw = raw_generate(server, pb.GenerateRequest(
        text=PROMPT, sampling=pb.SamplingParams(temperature=0),
        stopping=pb.StoppingCriteria(max_new_tokens=30, min_new_tokens=8,
                                     stop_token_ids=[held])))
    assert r.token_ids == tuple(t for m in raw for t in m.token_ids)
    assert r.text == "".join(m.text for m in raw)
    assert r.usage.generated_tokens == raw[-1].usage.generated_tokens >= 8
    assert held not in r.token_ids[:8]
    assert r.finish_reason is (seqboat.FinishReason.EOS if r.usage.generated_tokens < 30
                               else seqboat.FinishReason.LENGTH)
    # The stream carries it too.
    deltas = list(client.stream(PROMPT, max_tokens=30, temperature=0,
                                stop_token_ids=[held], min_new_tokens=8))
    assert tuple(t for d in deltas for t in d.token_ids) == r.token_ids


def test_generate_n_equals_single_requests_seeded_seed_plus_index(server, client):
    """n = 3 reads the prompt once; sequence i is token for token the request of
    one sequence seeded seed + i, and stops by its own rules."""
    kwargs = dict(max_tokens=24, temperature=1.0, stop="e")
    prompt_series = 'seqboat_prompt_tokens_total{frontend="grpc"}'
    before = server.sample(prompt_series)
    r = client.generate_n(PROMPT, 3, seed=300, request_id="client-n-1", **kwargs)
    prompt_tokens = len(client.tokenize(PROMPT).token_ids)
    assert server.sample(prompt_series) - before == prompt_tokens  # counted once
    assert isinstance(r, seqboat.GenerateNResult)
    assert r.request_id == "client-n-1"
    assert [c.index for c in r.choices] == [0, 1, 2]
    singles = [client.generate(PROMPT, seed=300 + i, **kwargs) for i in range(3)]
    for choice, single in zip(r.choices, singles):
        assert (choice.token_ids, choice.text, choice.finish_reason) == (
            single.token_ids, single.text, single.finish_reason)
        assert choice.usage.generated_tokens == single.usage.generated_tokens
        assert choice.usage.prompt_tokens == prompt_tokens
        assert choice.request_id == "client-n-1"
    assert len({c.text for c in r.choices}) > 1, "the seeds differ"
    assert r.usage.prompt_tokens == prompt_tokens
    assert r.usage.generated_tokens == sum(s.usage.generated_tokens for s in singles)
    # n = 1 is one choice: generate()'s result.
    (one,) = client.generate_n(PROMPT, 1, seed=300, **kwargs).choices
    assert outcome(one) == outcome(singles[0])
    assert_idle(server)


def test_stream_n_deltas_carry_their_index(server, client):
    kwargs = dict(max_tokens=30, temperature=0.9, seed=41, logprobs=1, ignore_eos=True)
    whole = client.generate_n(PROMPT, 3, **kwargs)
    deltas = list(client.stream(PROMPT, n=3, **kwargs))
    tokens, finished = {}, {}
    for d in deltas:
        assert d.index not in finished, "a delta after its sequence's last"
        tokens.setdefault(d.index, []).extend(d.token_ids)
        assert len(d.logprobs) == len(d.token_ids)
        if d.finish_reason is not None:
            finished[d.index] = d
        else:
            assert d.usage is None
    assert sorted(tokens) == [0, 1, 2]
    for choice in whole.choices:
        assert tuple(tokens[choice.index]) == choice.token_ids
        last = finished[choice.index]
        assert last.finish_reason is choice.finish_reason is seqboat.FinishReason.LENGTH
        assert (last.usage.prompt_tokens, last.usage.generated_tokens) == (
            choice.usage.prompt_tokens, choice.usage.generated_tokens)
        assert last.usage.generated_tokens == 30
    # The plain request's deltas are all sequence 0.
    assert {d.index for d in client.stream(PROMPT, max_tokens=5)} == {0}
    assert_idle(server)


def test_n_and_min_new_tokens_out_of_range_raise_the_servers_message(client):
    with pytest.raises(seqboat.InvalidArgument) as e:
        client.generate_n(PROMPT, 4, max_tokens=5)  # more than the 3 slots
    assert e.value.message.endswith("n must be in [1, 3], got 4")
    for n in (0, 17):
        with pytest.raises(seqboat.InvalidArgument, match=f"n must be .*got {n}"):
            list(client.stream(PROMPT, n=n, max_tokens=5))
    with pytest.raises(seqboat.InvalidArgument) as e:
        client.generate(PROMPT, max_tokens=5, min_new_tokens=6)
    assert "stopping.min_new_tokens" in e.value.message
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    # Not representable: refused before sending.
    with pytest.raises(seqboat.InvalidArgument, match="^INVALID_ARGUMENT: n: "):
        client.stream(PROMPT, n=-1)
    with pytest.raises(seqboat.InvalidArgument, match="min_new_tokens"):
        client.stream(PROMPT, min_new_tokens="many")


def test_token_id_outside_the_vocabulary(client):
    vocab = client.model_info().vocab_size
    with pytest.raises(seqboat.InvalidArgument, match=str(vocab)):
        client.generate([1, vocab], max_tokens=2)


def test_bad_types_are_refused_before_sending(client):
    with pytest.raises(TypeError, match="prompt"):
        client.stream(b"bytes are not text")
    with pytest.raises(TypeError, match="prompt"):
        client.stream(["a", "b"])
    with pytest.raises(seqboat.InvalidArgument, match="max_tokens"):
        client.stream(PROMPT, max_tokens=-1)
    with pytest.raises(seqboat.InvalidArgument, match="temperature"):
        client.stream(PROMPT, temperature="hot")


def test_unreachable_server_is_unavailable():
    with seqboat.Client("127.0.0.1:1", timeout=10) as c:
        with pytest.raises(seqboat.Unavailable):
            c.model_info()
        with pytest.raises(seqboat.Unavailable):
            c.generate(PROMPT)


def test_deadline_raises_and_frees_the_slot(server, client):
    with pytest.raises(seqboat.DeadlineExceeded) as e:
        client.generate(PROMPT, max_tokens=LONG, ignore_eos=True, timeout=0.5)
    assert isinstance(e.value, TimeoutError)
    assert_idle(server)
    # A deadline passing mid-stream ends the iteration the same way, after deltas.
    seen = []
    with pytest.raises(seqboat.DeadlineExceeded):
        for d in client.stream(PROMPT, max_tokens=LONG, ignore_eos=True, timeout=1.0):
            seen.append(d)
    assert seen
    assert_idle(server)


def test_breaking_out_of_the_loop_cancels_on_the_server(server, client):
    for n, _ in enumerate(client.stream(PROMPT, max_tokens=LONG, ignore_eos=True)):
        if n == 0:
            running(server, 1)  # it holds a slot while we read it
        if n == 5:
            break
    assert_idle(server)


def test_close_and_with_cancel_on_the_server(server, client):
    s = client.stream(PROMPT, max_tokens=LONG, ignore_eos=True)
    next(s)
    running(server, 1)
    s.close()
    assert list(s) == []  # closed: iteration stops quietly
    assert_idle(server)
    s.close()  # idempotent
    with client.stream(PROMPT, max_tokens=LONG, ignore_eos=True) as s:
        next(s)
        running(server, 1)
    assert_idle(server)


def test_close_from_another_thread_ends_the_readers_loop(server, client):
    s = client.stream(PROMPT, max_tokens=LONG, ignore_eos=True)
    got, reading, ended = [], threading.Event(), threading.Event()

    def read():
        for d in s:
            got.append(d)
            reading.set()
        ended.set()

    reader = threading.Thread(target=read)
    reader.start()
    assert reading.wait(20)
    running(server, 1)
    s.close()
    assert ended.wait(20), "the reader's loop did not end"
    reader.join()
    assert got
    assert_idle(server)


def test_full_queue_raises_resource_exhausted(server, client):
    streams = [client.stream(PROMPT, max_tokens=LONG, ignore_eos=True)
               for _ in range(server.max_slots + server.max_queue)]
    try:
        running(server, server.max_slots)
        server.wait_for("seqboat_num_requests_waiting", lambda v: v == server.max_queue)
        with pytest.raises(seqboat.ResourceExhausted) as e:
            client.generate(PROMPT, max_tokens=5)
        assert e.value.message  # the server says which limit
    finally:
        for s in streams:
            s.close()
    assert_idle(server)


# ------------------------------------------------------------------ asyncio

def test_async_calls_equal_the_sync_ones(server, client):
    sync = client.generate(PROMPT, max_tokens=25, temperature=0.9, seed=21, ignore_eos=True)

    async def main():
        async with seqboat.AsyncClient(server.grpc, timeout=120) as c:
            whole = await c.generate(PROMPT, max_tokens=25, temperature=0.9, seed=21,
                                     ignore_eos=True)
            deltas = [d async for d in c.stream(PROMPT, max_tokens=25, temperature=0.9,
                                                seed=21, ignore_eos=True)]
            return whole, deltas, await c.tokenize(PROMPT), await c.model_info()

    whole, deltas, tok, info = asyncio.run(main())
    assert (whole.token_ids, whole.text, whole.finish_reason) == (
        sync.token_ids, sync.text, sync.finish_reason)
    assert whole.usage.generated_tokens == sync.usage.generated_tokens == 25
    assert tuple(t for d in deltas for t in d.token_ids) == sync.token_ids
    assert deltas[-1].finish_reason is seqboat.FinishReason.LENGTH
    assert deltas[-1].usage.generated_tokens == 25
    assert all(d.usage is None for d in deltas[:-1])
    assert tok == client.tokenize(PROMPT)
    assert info == client.model_info()


def test_async_errors_and_deadline(server):
    async def main():
        async with seqboat.AsyncClient(server.grpc) as c:
            with pytest.raises(seqboat.InvalidArgument, match="temperature"):
                await c.generate(PROMPT, temperature=-1)
            with pytest.raises(seqboat.DeadlineExceeded):
                await c.generate(PROMPT, max_tokens=LONG, ignore_eos=True, timeout=0.5)
        async with seqboat.AsyncClient("127.0.0.1:1", timeout=10) as c:
            with pytest.raises(seqboat.Unavailable):
                await c.model_info()

    asyncio.run(main())
    assert_idle(server)


def test_async_task_cancel_cancels_on_the_server(server):
    async def main():
        async with seqboat.AsyncClient(server.grpc) as c:
            task = asyncio.create_task(c.generate(PROMPT, max_tokens=LONG, ignore_eos=True))
            await asyncio.to_thread(running, server, 1)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await asyncio.to_thread(assert_idle, server)

    asyncio.run(main())


def test_async_break_and_close_cancel_on_the_server(server):
    async def main():
        async with seqboat.AsyncClient(server.grpc) as c:
            # Breaking out of the loop: the stream is dropped, which cancels it.
            async for _ in c.stream(PROMPT, max_tokens=LONG, ignore_eos=True):
                await asyncio.to_thread(running, server, 1)
                break
            await asyncio.to_thread(assert_idle, server)
            # Leaving an `async with` block.
            async with c.stream(PROMPT, max_tokens=LONG, ignore_eos=True) as s:
                await s.__anext__()
                await asyncio.to_thread(running, server, 1)
            await asyncio.to_thread(assert_idle, server)
            # close() while another task reads: its loop ends quietly.
            s = c.stream(PROMPT, max_tokens=LONG, ignore_eos=True)
            got = []

            async def read():
                async for d in s:
                    got.append(d)

            reader = asyncio.create_task(read())
            while not got:
                await asyncio.sleep(0.01)
            await asyncio.to_thread(running, server, 1)
            await s.aclose()
            await asyncio.wait_for(reader, 20)
            assert got
            await asyncio.to_thread(assert_idle, server)

    asyncio.run(main())


def test_async_n_and_min_new_tokens_equal_the_sync_ones(server, client):
    kwargs = dict(max_tokens=20, temperature=1.0, seed=77, min_new_tokens=15)
    sync = client.generate_n(PROMPT, 3, **kwargs)
    sync_one = client.generate(PROMPT, **kwargs)

    async def main():
        async with seqboat.AsyncClient(server.grpc, timeout=120) as c:
            whole = await c.generate_n(PROMPT, 3, **kwargs)
            one = await c.generate(PROMPT, **kwargs)
            deltas = [d async for d in c.stream(PROMPT, n=3, **kwargs)]
            with pytest.raises(seqboat.InvalidArgument, match="got 4"):
                await c.generate_n(PROMPT, 4)
            return whole, one, deltas

    whole, one, deltas = asyncio.run(main())
    assert [outcome(c) for c in whole.choices] == [outcome(c) for c in sync.choices]
    assert (whole.usage.prompt_tokens, whole.usage.generated_tokens) == (
        sync.usage.prompt_tokens, sync.usage.generated_tokens)
    assert outcome(one) == outcome(sync_one) == outcome(sync.choices[0])
    for choice in sync.choices:
        assert tuple(t for d in deltas if d.index == choice.index
                     for t in d.token_ids) == choice.token_ids
        assert choice.usage.generated_tokens >= 15
    assert_idle(server)
