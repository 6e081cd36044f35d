"""The queue bound of a real seqboat_server under bursts over gRPC: an idle
server of 64 slots and a queue of 256, sent 360 long requests at once from many
connections, accepts exactly 320 (64 run, 256 wait) and refuses the other 40
with RESOURCE_EXHAUSTED, burst after burst."""

import threading
import time

import grpc
import pytest

from live_server import start_server, stop_server
from seqboat.v1 import generate_pb2 as pb
from seqboat.v1 import generate_pb2_grpc as pb_grpc

SLOTS, QUEUE, BURST, CHANNELS, ROUNDS = 64, 256, 360, 12, 5
LONG = 1_000_000  # minutes of decoding: nothing ends on its own during a round


@pytest.fixture(scope="module")
def burst_server(tmp_path_factory):
    s = start_server(tmp_path_factory, "burst",
                     [f"--max_slots={SLOTS}", f"--max_queue={QUEUE}",
                      f"--max_new_tokens_limit={LONG}", "--prefix_cache_bytes=0"])
    yield s
    stop_server(s)


def gauge(server, name):
    return server.sample(f"seqboat_num_requests_{name}")


def burst(server):
    """Fires BURST requests at once, one thread each; returns (accepted,
    refused, other errors, running, waiting) once every refusal is in and the
    accepted ones run or wait."""
    channels = [grpc.insecure_channel(server.grpc) for _ in range(CHANNELS)]
    request = pb.GenerateRequest(
        text="The secret of happiness is",
        stopping=pb.StoppingCriteria(max_new_tokens=LONG, ignore_eos=True))
    stubs = [pb_grpc.TextGenerationStub(ch) for ch in channels]
    go = threading.Barrier(BURST)
    lock = threading.Lock()
    calls, refused, errors = [], [0], []

    def fire(i):
        go.wait()
        call = stubs[i % CHANNELS].Generate(request)
        with lock:
            calls.append(call)
        try:
            next(call)
        except grpc.RpcError as e:
            with lock:
                if e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
                    refused[0] += 1
                elif e.code() != grpc.StatusCode.CANCELLED:
                    errors.append(e)

    threads = [threading.Thread(target=fire, args=(i,)) for i in range(BURST)]
    for t in threads:
        t.start()
    # A refusal comes at once; the accepted either stream (running) or wait.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        time.sleep(0.2)
        with lock:
            answered = refused[0] + len(errors)
        if (gauge(server, "running") == SLOTS and
                answered + gauge(server, "waiting") + SLOTS >= BURST):
            break
    time.sleep(1.0)  # any late refusal would show now
    running, waiting = gauge(server, "running"), gauge(server, "waiting")
    with lock:
        accepted = BURST - refused[0] - len(errors)
        result = (accepted, refused[0], list(errors), running, waiting)
    with lock:
        for c in calls:
            c.cancel()
    for t in threads:
        t.join()
    for ch in channels:
        ch.close()
    return result


def test_bursts_never_get_past_slots_plus_queue(burst_server):
    for round_ in range(ROUNDS):
        accepted, refused, errors, running, waiting = burst(burst_server)
        assert not errors, errors[:3]
        assert (accepted, refused) == (SLOTS + QUEUE, BURST - SLOTS - QUEUE), round_
        assert (running, waiting) == (SLOTS, QUEUE), round_
        for name in ("running", "waiting"):
            burst_server.wait_for(f"seqboat_num_requests_{name}", lambda v: v == 0)
