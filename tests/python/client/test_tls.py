"""TLS on a real seqboat_server, with certificates made by openssl at test
time (tests/python/tls_certs.py): gRPC Generate and HTTPS /v1/completions,
/metrics and /healthz round trips; plaintext to each TLS port refused; under
mutual TLS a client without a certificate, or with one of another CA,
refused on every port; SIGHUP (the HTTP ports) and the file watcher (gRPC)
serve a new certificate while streams opened before go on; the C++ clients'
--tls_* flags."""

import asyncio
import json
import os
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request

import grpc
import pytest

import seqboat
import tls_certs
from live_server import MODEL, ROOT, start_server, stop_server


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("certs")
    ca = tls_certs.make_ca(folder, "ca")
    rogue = tls_certs.make_ca(folder, "rogue")
    c = {"folder": folder, "ca": ca, "rogue": rogue}
    c["server"] = tls_certs.make_cert(folder, "server", ca, server=True)
    c["client"] = tls_certs.make_cert(folder, "client", ca, server=False)
    c["rogue_client"] = tls_certs.make_cert(folder, "rogue_client", rogue, server=False)
    return c


def tls_args(certs, mutual):
    crt, key = certs["server"]
    args = [f"--tls_cert_file={crt}", f"--tls_key_file={key}"]
    return args + [f"--tls_client_ca_file={certs['ca']}"] if mutual else args


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory, certs):
    s = start_server(tmp_path_factory, "tls", tls_args(certs, mutual=False))
    yield s
    stop_server(s)


@pytest.fixture(scope="module")
def mtls_server(tmp_path_factory, certs):
    s = start_server(tmp_path_factory, "mtls", tls_args(certs, mutual=True))
    yield s
    stop_server(s)


def context(ca, client=None):
    ctx = ssl.create_default_context(cafile=str(ca))
    if client is not None:
        ctx.load_cert_chain(str(client[0]), str(client[1]))
    return ctx


def https(address, path, ctx, body=None):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(f"https://{address}{path}", data=data,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60, context=ctx) as r:
        return r.status, r.read().decode()


def completion(server, ctx):
    status, text = https(server.openai, "/v1/completions", ctx,
                         {"model": "seqboat-hybrid-bytes", "prompt": "Hi",
                          "max_tokens": 4, "ignore_eos": True})
    assert status == 200, text
    return json.loads(text)


def refused_over_http(address, path, ctx):
    """The request fails before any HTTP answer (no status comes back)."""
    with pytest.raises(OSError) as e:
        if ctx is None:
            urllib.request.urlopen(f"http://{address}{path}", timeout=30)
        else:
            https(address, path, ctx)
    assert not isinstance(e.value, urllib.error.HTTPError), e.value


def client(server, **tls):
    return seqboat.Client(server.grpc, timeout=30, **tls)


def test_tls_round_trips_on_every_port(tls_server, certs):
    ctx = context(certs["ca"])
    with client(tls_server, tls_ca_file=str(certs["ca"])) as c:
        assert c.generate("Hi", max_tokens=4, ignore_eos=True).usage.generated_tokens == 4
    assert completion(tls_server, ctx)["usage"]["completion_tokens"] == 4
    assert https(tls_server.http, "/healthz", ctx) == (200, "ok\n")
    assert "seqboat_num_requests_running" in https(tls_server.http, "/metrics", ctx)[1]


def test_the_async_client_over_tls_and_a_half_given_pair(tls_server, certs):
    async def generate():
        async with seqboat.AsyncClient(tls_server.grpc, timeout=30,
                                       tls_ca_file=str(certs["ca"])) as c:
            return await c.generate("Hi", max_tokens=3, ignore_eos=True)

    assert asyncio.run(generate()).usage.generated_tokens == 3
    with pytest.raises(ValueError, match="go together"):
        seqboat.Client(tls_server.grpc, tls_cert_file=str(certs["client"][0]))


def test_plaintext_to_a_tls_port_is_refused(tls_server, certs):
    with client(tls_server) as c:
        with pytest.raises(seqboat.Unavailable):
            c.generate("Hi", max_tokens=2)
    refused_over_http(tls_server.openai, "/v1/models", None)
    refused_over_http(tls_server.http, "/healthz", None)
    # Nor does a client trust the server without its CA.
    with client(tls_server, tls_ca_file=str(certs["rogue"])) as c:
        with pytest.raises(seqboat.Unavailable):
            c.model_info()
    refused_over_http(tls_server.openai, "/v1/models", context(certs["rogue"]))


def test_mutual_tls_round_trips_with_a_client_certificate(mtls_server, certs):
    crt, key = certs["client"]
    with client(mtls_server, tls_ca_file=str(certs["ca"]), tls_cert_file=str(crt),
                tls_key_file=str(key)) as c:
        assert c.generate("Hi", max_tokens=4, ignore_eos=True).usage.generated_tokens == 4
    ctx = context(certs["ca"], certs["client"])
    assert completion(mtls_server, ctx)["usage"]["completion_tokens"] == 4
    assert https(mtls_server.http, "/healthz", ctx) == (200, "ok\n")


def test_mutual_tls_refuses_clients_without_a_right_certificate(mtls_server, certs):
    rogue_crt, rogue_key = certs["rogue_client"]
    for tls in ({"tls_ca_file": str(certs["ca"])},
                {"tls_ca_file": str(certs["ca"]), "tls_cert_file": str(rogue_crt),
                 "tls_key_file": str(rogue_key)}):
        with client(mtls_server, **tls) as c:
            with pytest.raises(seqboat.Unavailable):
                c.generate("Hi", max_tokens=2)
    for ctx in (context(certs["ca"]), context(certs["ca"], certs["rogue_client"]), None):
        for address, path in ((mtls_server.openai, "/v1/models"),
                              (mtls_server.http, "/healthz")):
            refused_over_http(address, path, ctx)


def eventually(attempt, what, timeout=30):
    end = time.monotonic() + timeout
    while True:
        try:
            return attempt()
        except (OSError, seqboat.SeqboatError) as e:
            if time.monotonic() > end:
                raise AssertionError(f"{what}: {e}") from e
            time.sleep(0.2)


def test_new_certificates_are_served_while_open_streams_go_on(tmp_path_factory, certs):
    live = tmp_path_factory.mktemp("live")
    crt, key = live / "server.crt", live / "server.key"
    crt.write_bytes(certs["server"][0].read_bytes())
    key.write_bytes(certs["server"][1].read_bytes())
    s = start_server(tmp_path_factory, "reload",
                     [f"--tls_cert_file={crt}", f"--tls_key_file={key}",
                      "--tls_refresh_seconds=1", "--max_new_tokens_limit=1000000"])
    try:
        old_ctx = context(certs["ca"])
        old = client(s, tls_ca_file=str(certs["ca"]))
        grpc_stream = old.stream("Hi", max_tokens=1000000, ignore_eos=True, timeout=120)
        assert next(grpc_stream).token_ids
        request = urllib.request.Request(
            f"https://{s.openai}/v1/completions",
            data=json.dumps({"model": "seqboat-hybrid-bytes", "prompt": "Hi",
                             "max_tokens": 1000000, "ignore_eos": True,
                             "stream": True}).encode(),
            headers={"Content-Type": "application/json"})
        sse = urllib.request.urlopen(request, timeout=60, context=old_ctx)
        assert sse.readline().startswith(b"data: ")

        # A server certificate of another CA, key and certificate replaced
        # together (renamed into place), then SIGHUP for the HTTP ports.
        new_ca = tls_certs.make_ca(live, "new_ca")
        staged = tls_certs.make_cert(live, "staged", new_ca, server=True)
        os.replace(staged[1], key)
        os.replace(staged[0], crt)
        s.proc.send_signal(signal.SIGHUP)
        new_ctx = context(new_ca)
        eventually(lambda: https(s.openai, "/v1/models", new_ctx), "OpenAI port")
        eventually(lambda: https(s.http, "/healthz", new_ctx), "metrics port")
        with client(s, tls_ca_file=str(new_ca)) as new:
            eventually(lambda: new.model_info(), "gRPC port")
        # The old certificate is gone for new connections ...
        refused_over_http(s.openai, "/v1/models", old_ctx)
        with client(s, tls_ca_file=str(certs["ca"])) as stale:
            with pytest.raises(seqboat.Unavailable):
                stale.model_info()
        # ... and the streams opened under it still deliver.
        for _ in range(20):
            assert next(grpc_stream).token_ids
        for _ in range(20):
            line = sse.readline()
            while line == b"\n":
                line = sse.readline()
            assert line.startswith(b"data: {"), line
        grpc_stream.close()
        sse.close()
        old.close()
    finally:
        stop_server(s)


def test_cpp_clients_take_a_ca_and_a_client_certificate(mtls_server, certs):
    crt, key = certs["client"]
    flags = [f"--tls_ca_file={certs['ca']}", f"--tls_cert_file={crt}",
             f"--tls_key_file={key}"]
    cli = ROOT / "bazel-bin/clients/cli/seqboat_cli"
    load = ROOT / "bazel-bin/clients/load/seqboat_load"
    for binary in (cli, load):
        if not binary.exists():
            pytest.fail(f"{binary} is missing: bazel build //clients/cli:seqboat_cli "
                        "//clients/load:seqboat_load")
    ok = subprocess.run([str(cli), f"--server={mtls_server.grpc}", "--prompt=Hi",
                         "--max_new_tokens=3", *flags],
                        capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
    no_cert = subprocess.run([str(cli), f"--server={mtls_server.grpc}", "--prompt=Hi",
                              "--max_new_tokens=3", flags[0]],
                             capture_output=True, text=True, timeout=60)
    assert no_cert.returncode != 0
    run = subprocess.run([str(load), f"--target={mtls_server.grpc}", "--num_requests=4",
                          "--concurrency=2", "--input_len=4", "--output_len=3",
                          "--progress=false", *flags],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr


def test_the_probe_port_may_take_no_client_certificate(tmp_path_factory, certs):
    s = start_server(tmp_path_factory, "mtls_open_probes",
                     [*tls_args(certs, mutual=True), "--tls_http_port_client_certs=false",
                      "--log_level=info"])
    try:
        ctx = context(certs["ca"])  # kubelet's probes present no certificate
        assert https(s.http, "/healthz", ctx) == (200, "ok\n")
        assert https(s.http, "/readyz", ctx)[0] == 200
        refused_over_http(s.http, "/healthz", None)  # still TLS
        refused_over_http(s.openai, "/v1/models", ctx)
        with client(s, tls_ca_file=str(certs["ca"])) as c:
            with pytest.raises(seqboat.Unavailable):
                c.model_info()
        # SIGHUP rereads both HTTP ports' files and says so.
        s.proc.send_signal(signal.SIGHUP)
        end = time.monotonic() + 20
        while s.log_path.read_text().count("reloaded the HTTP ports' TLS files") < 2:
            assert time.monotonic() < end, s.log_path.read_text()
            time.sleep(0.1)
        assert "rereads them every 60 s" in s.log_path.read_text()
        assert https(s.http, "/healthz", ctx)[0] == 200
    finally:
        stop_server(s)


def test_bad_tls_files_stop_the_start_naming_them(certs, tmp_path):
    crt, key = certs["server"]
    not_pem = tmp_path / "not.pem"
    not_pem.write_text("hello\n")
    cases = [
        ([f"--tls_key_file={key}"], "--tls_cert_file and --tls_key_file go together"),
        ([f"--tls_cert_file={crt}", f"--tls_key_file={certs['client'][1]}"],
         "do not match"),
        ([f"--tls_cert_file={not_pem}", f"--tls_key_file={key}"],
         f"{not_pem} holds no PEM block"),
        ([f"--tls_cert_file={crt}", f"--tls_key_file={key}",
          f"--tls_client_ca_file={tmp_path / 'missing.crt'}"],
         f"{tmp_path / 'missing.crt'} cannot be read"),
        (["--prefix_cache_peers=127.0.0.1:1",
          "--prefix_cache_peer_tls_server_name=seqboat-replicas"],
         "--prefix_cache_peer_tls_server_name needs --prefix_cache_peer_tls_ca_file"),
    ]
    binary = ROOT / "bazel-bin/server/seqboat_server"
    for args, message in cases:
        r = subprocess.run([str(binary), f"--model_dir={MODEL}", "--port=0", *args],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 1, args
        assert message in r.stderr, (args, r.stderr)
