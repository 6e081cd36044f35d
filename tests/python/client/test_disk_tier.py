"""The prefix cache's disk tier on a real seqboat_server: a conversation's
first turn on one server, a drain (SIGTERM) that writes its snapshot to
--prefix_cache_dir, and its second turn on a server restarted over the same
directory served from that snapshot (cached prompt tokens > 0), with the text
a cold computation gives; a stranger file in the directory is refused,
deleted and counted."""

import json
import urllib.request

import pytest

from live_server import start_server, stop_server

PROMPT = ("A conversation that outlives its server: the first turn is long "
          "enough that resuming from its snapshot is worth it")


def complete(server, prompt, salt=None, tokens=8):
    """Greedy over HTTP; returns (text, cached prompt tokens)."""
    body = {"prompt": prompt, "max_tokens": tokens, "temperature": 0,
            "ignore_eos": True}
    if salt is not None:
        body["cache_salt"] = salt
    request = urllib.request.Request(
        f"{server.base_url}/completions", data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as r:
        out = json.loads(r.read())
    return (out["choices"][0]["text"],
            out["usage"].get("prompt_tokens_details", {}).get("cached_tokens", 0))


def test_a_restarted_server_serves_the_next_turn_from_disk(tmp_path_factory):
    snapshots = tmp_path_factory.mktemp("snapshots")
    args = [f"--prefix_cache_dir={snapshots}", "--prefix_cache_disk_bytes=268435456"]
    first = start_server(tmp_path_factory, "disk_first", args)
    try:
        answer, cached = complete(first, PROMPT)
        assert cached == 0
    finally:
        stop_server(first)  # the drain writes the snapshots in memory
    files = sorted(p.name for p in snapshots.iterdir())
    assert files and all(f.endswith(".snap") for f in files), files
    (snapshots / "0000000000000000-4.snap").write_bytes(b"not a snapshot" * 8)

    second = start_server(tmp_path_factory, "disk_second", args)
    try:
        assert second.sample('seqboat_prefix_cache_disk_refused_total{reason="format"}') == 1
        assert not (snapshots / "0000000000000000-4.snap").exists()
        assert second.sample("seqboat_prefix_cache_disk_files") == len(files)
        turn = PROMPT + answer + " and then the second turn"
        text, cached = complete(second, turn)
        assert cached > 0
        assert second.sample("seqboat_prefix_cache_disk_hits_total") == 1
        assert second.sample("seqboat_prefix_cache_disk_hit_tokens_total") == cached
        # The same turn in another cache partition is computed cold: same text.
        cold, cold_cached = complete(second, turn, salt="cold")
        assert cold_cached == 0
        assert text == cold
    finally:
        stop_server(second)


def test_a_directory_without_a_budget_is_refused(tmp_path_factory):
    with pytest.raises(RuntimeError):
        start_server(tmp_path_factory, "disk_no_budget",
                     [f"--prefix_cache_dir={tmp_path_factory.mktemp('nb')}",
                      "--prefix_cache_disk_bytes=0"])
