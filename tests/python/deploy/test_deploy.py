"""Static checks of deploy/: Dockerfiles, the entrypoint, Kubernetes
manifests and the balancer's nginx config. Docker and a cluster are not
available here, so these parse the files and cross-check them against each
other and against the server's flags and metric names."""
import os
import re
import shlex
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
ENTRYPOINT_IN_IMAGE = "/opt/seqboat/deploy/entrypoint.sh"


# ---------------------------------------------------------------- Dockerfiles

def parse_dockerfile(path):
    """Instructions as (KEYWORD, argument) with continuations joined."""
    text = path.read_text()
    text = re.sub(r"\\\n", " ", text)
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, arg = line.partition(" ")
        out.append((keyword.upper(), arg.strip()))
    return out


def stages(instructions):
    """[(base, name, [instructions])] per FROM."""
    result = []
    for keyword, arg in instructions:
        if keyword == "FROM":
            parts = arg.split()
            name = parts[2] if len(parts) == 3 and parts[1].upper() == "AS" else None
            result.append((parts[0], name, []))
        elif result:
            result[-1][2].append((keyword, arg))
    return result


def args_of(instructions):
    return {k: v for k, v in (a.split("=", 1) for kw, a in instructions
                              if kw == "ARG" and "=" in a)}


@pytest.mark.parametrize("name,build_base,runtime_base", [
    ("Dockerfile", r"nvidia/cuda:[\d.]+-devel-ubuntu[\d.]+",
     r"nvidia/cuda:[\d.]+-runtime-ubuntu[\d.]+"),
    ("Dockerfile.cpu", r"debian:bookworm", r"debian:bookworm-slim"),
])
def test_dockerfile_stages_user_and_entrypoint(name, build_base, runtime_base):
    instructions = parse_dockerfile(DEPLOY / name)
    variables = args_of(instructions)
    st = stages(instructions)
    assert len(st) == 2, "one build and one runtime stage"

    def expand(s):
        return re.sub(r"\$\{(\w+)\}", lambda m: variables[m.group(1)], s)

    (b_base, b_name, b_body), (r_base, _, r_body) = st
    assert re.fullmatch(build_base, expand(b_base)), b_base
    assert re.fullmatch(runtime_base, expand(r_base)), r_base
    # The build installs the same packages as every checkout.
    assert any(kw == "RUN" and "deploy/setup.sh" in a for kw, a in b_body)
    assert any(kw == "RUN" and "bazel build" in a and "//server:seqboat_server" in a
               for kw, a in b_body)
    # The runtime copies from the build stage by name.
    assert any(kw == "COPY" and f"--from={b_name}" in a for kw, a in r_body)
    # Non-root, by number so Kubernetes' runAsNonRoot can verify it.
    users = [a for kw, a in r_body if kw == "USER"]
    assert users, "runtime stage sets USER"
    uid = users[-1].split(":")[0]
    assert uid.isdigit() and int(uid) != 0
    # The entrypoint is the script serve.sh uses, in exec form.
    entry = [a for kw, a in r_body if kw == "ENTRYPOINT"]
    assert entry and yaml.safe_load(entry[-1]) == [ENTRYPOINT_IN_IMAGE]
    # It is copied there from deploy/entrypoint.sh.
    build_runs = " ".join(a for kw, a in b_body if kw == "RUN")
    assert "cp deploy/entrypoint.sh /out/opt/seqboat/deploy/" in build_runs
    assert any(kw == "COPY" and "/opt/seqboat/" in a for kw, a in r_body)
    # Ports the image announces are the entrypoint's defaults.
    env = dict(re.findall(r"(SEQBOAT_\w+)=(\S+)",
                          " ".join(a for kw, a in r_body if kw == "ENV")))
    defaults = entrypoint_defaults()
    assert env["SEQBOAT_PORT"] == defaults["SEQBOAT_PORT"]
    assert env["SEQBOAT_HTTP_PORT"] == defaults["SEQBOAT_HTTP_PORT"]
    assert env["SEQBOAT_OPENAI_PORT"] == defaults["SEQBOAT_OPENAI_PORT"]
    exposed = " ".join(a for kw, a in r_body if kw == "EXPOSE").split()
    assert sorted(exposed) == sorted([env["SEQBOAT_PORT"], env["SEQBOAT_HTTP_PORT"],
                                      env["SEQBOAT_OPENAI_PORT"]])


@pytest.mark.parametrize("name", ["Dockerfile", "Dockerfile.cpu"])
def test_build_stage_has_what_setup_reads_before_running_it(name):
    """setup.sh runs before the tree is copied (so its layer is cached), so
    every file it reads must be copied ahead of it."""
    wanted = set(re.findall(r'\$root/([\w/.-]+\.txt)',
                            (DEPLOY / "setup.sh").read_text()))
    assert "weights/requirements.txt" in wanted
    copied = set()
    for keyword, arg in parse_dockerfile(DEPLOY / name):
        if keyword == "RUN" and "deploy/setup.sh" in arg:
            break
        if keyword == "COPY":
            copied.add(arg.split()[0])
    assert wanted <= copied, wanted - copied


def test_dockerignore_keeps_build_outputs_out():
    for name in ("Dockerfile", "Dockerfile.cpu"):
        ignored = (DEPLOY / f"{name}.dockerignore").read_text().split()
        assert "bazel-*" in ignored and ".venv" in ignored


# ------------------------------------------------------------- entry point

def entrypoint_defaults():
    text = (DEPLOY / "entrypoint.sh").read_text()
    return dict(re.findall(r"\$\{(SEQBOAT_\w+):-([^}]*)\}", text))


def server_flags():
    """The server's flags: main.cc's and those of the units that define their
    own (engine_flags.cc, peer_flags.cc)."""
    return set(re.findall(r"ABSL_FLAG\(\s*[\w:]+\s*,\s*(\w+)\s*,",
                          "".join((ROOT / "server" / f).read_text()
                                  for f in ("main.cc", "engine_flags.cc",
                                            "peer_flags.cc"))))


def test_scripts_parse_and_serve_uses_the_entrypoint():
    for script in ("entrypoint.sh", "serve.sh"):
        subprocess.run(["bash", "-n", str(DEPLOY / script)], check=True)
    assert os.stat(DEPLOY / "entrypoint.sh").st_mode & stat.S_IXUSR
    assert 'exec "$root/deploy/entrypoint.sh"' in (DEPLOY / "serve.sh").read_text()


def fake_server(tmp_path):
    """A stand-in binary that prints its arguments one per line."""
    fake = tmp_path / "seqboat_server"
    fake.write_text('#!/bin/sh\nfor a in "$@"; do echo "$a"; done\n')
    fake.chmod(0o755)
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    return fake, model


def run_entrypoint(tmp_path, env_extra, *args):
    fake, model = fake_server(tmp_path)
    env = {"PATH": os.environ["PATH"], "SEQBOAT_SERVER_BIN": str(fake),
           "SEQBOAT_MODEL_DIR": str(model), **env_extra}
    out = subprocess.run(["bash", str(DEPLOY / "entrypoint.sh"), *args],
                         env=env, capture_output=True, text=True, timeout=30)
    return out


def test_entrypoint_maps_environment_to_existing_server_flags(tmp_path):
    out = run_entrypoint(tmp_path, {"SEQBOAT_PORT": "6000",
                                    "SEQBOAT_DRAIN_GRACE_SECONDS": "12"},
                         "--max_queue=3")
    assert out.returncode == 0, out.stderr
    argv = out.stdout.split()
    assert "--port=6000" in argv
    assert "--http_port=8080" in argv
    assert "--openai_port=8000" in argv, "the OpenAI API is on in the container"
    assert "--drain_grace_seconds=12" in argv
    assert argv[-1] == "--max_queue=3", "extra arguments come last and win"
    flags = server_flags()
    for arg in argv:
        name = arg[2:].split("=", 1)[0]
        assert name in flags, f"entrypoint passes unknown flag --{name}"


def test_entrypoint_refuses_missing_model(tmp_path):
    out = run_entrypoint(tmp_path, {"SEQBOAT_MODEL_DIR": str(tmp_path / "none")})
    assert out.returncode == 1
    assert "no model" in out.stderr


# ----------------------------------------------------------- Kubernetes

def manifests():
    docs = []
    for path in sorted(K8S.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                docs.append(doc)
    return docs


def by_kind(kind):
    return [d for d in manifests() if d["kind"] == kind]


def workloads():
    """Deployments and StatefulSets: whatever runs pods from a template."""
    return by_kind("Deployment") + by_kind("StatefulSet")


def server_deployments():
    return [d for d in workloads()
            if d["spec"]["template"]["metadata"]["labels"].get(
                "app.kubernetes.io/component") == "server"]


def env_of(container):
    return {e["name"]: e["value"] for e in container.get("env", [])}


def test_kinds_and_apiversions():
    kinds = sorted((d["apiVersion"], d["kind"]) for d in manifests())
    assert kinds == sorted([
        ("apps/v1", "Deployment"), ("apps/v1", "Deployment"),
        ("apps/v1", "StatefulSet"), ("v1", "Service"), ("v1", "Service"),
        ("autoscaling/v2", "HorizontalPodAutoscaler")])
    for d in manifests():
        assert d["metadata"]["name"]


def test_selectors_match_template_labels():
    for d in workloads():
        selector = d["spec"]["selector"]["matchLabels"]
        labels = d["spec"]["template"]["metadata"]["labels"]
        assert selector.items() <= labels.items(), d["metadata"]["name"]
    templates = [d["spec"]["template"]["metadata"]["labels"]
                 for d in workloads()]
    for svc in by_kind("Service"):
        selector = svc["spec"]["selector"]
        matched = [t for t in templates if selector.items() <= t.items()]
        assert matched, f"Service {svc['metadata']['name']} selects no pods"


def test_service_target_ports_exist_on_selected_pods():
    for svc in by_kind("Service"):
        for d in workloads():
            labels = d["spec"]["template"]["metadata"]["labels"]
            if not svc["spec"]["selector"].items() <= labels.items():
                continue
            names = {p["name"] for c in d["spec"]["template"]["spec"]["containers"]
                     for p in c["ports"]}
            for port in svc["spec"]["ports"]:
                assert port["targetPort"] in names, (svc["metadata"]["name"], port)


@pytest.mark.parametrize("deployment", server_deployments(),
                         ids=lambda d: d["metadata"]["name"])
def test_probes_ports_and_grace_agree_with_server_flags(deployment):
    spec = deployment["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    env = env_of(container)
    defaults = entrypoint_defaults()
    grpc_port = int(env.get("SEQBOAT_PORT", defaults["SEQBOAT_PORT"]))
    http_port = int(env.get("SEQBOAT_HTTP_PORT", defaults["SEQBOAT_HTTP_PORT"]))
    openai_port = int(env.get("SEQBOAT_OPENAI_PORT", defaults["SEQBOAT_OPENAI_PORT"]))
    drain = int(env.get("SEQBOAT_DRAIN_GRACE_SECONDS",
                        defaults["SEQBOAT_DRAIN_GRACE_SECONDS"]))
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"grpc": grpc_port, "http": http_port, "openai": openai_port}

    ready = container["readinessProbe"]
    assert ready["grpc"]["port"] == grpc_port
    assert ready["grpc"]["service"] == "seqboat.v1.TextGeneration"
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz",
                                                     "port": http_port}
    assert container["startupProbe"]["httpGet"]["port"] == http_port
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert int(annotations["prometheus.io/port"]) == http_port

    # The kubelet's SIGKILL must not cut the drain short: preStop sleep,
    # then the drain grace, then the server's 5 s final flush.
    pre_stop = container["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop[0] == "sleep"
    assert spec["terminationGracePeriodSeconds"] >= int(pre_stop[1]) + drain + 5
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["runAsUser"] != 0


def test_gpu_variant_requests_a_gpu_and_cpu_variant_does_not():
    found = {}
    for d in server_deployments():
        (container,) = d["spec"]["template"]["spec"]["containers"]
        res = container["resources"]
        found[env_of(container)["SEQBOAT_BACKEND"]] = res
        assert "cpu" in res["requests"] and "memory" in res["requests"]
    assert found["cuda"]["requests"]["nvidia.com/gpu"] == 1
    assert found["cuda"]["limits"]["nvidia.com/gpu"] == 1
    assert "nvidia.com/gpu" not in found["cpu"]["requests"]
    assert "nvidia.com/gpu" not in found["cpu"].get("limits", {})


def test_hpa_targets_an_existing_deployment_on_an_exported_metric():
    (hpa,) = by_kind("HorizontalPodAutoscaler")
    ref = hpa["spec"]["scaleTargetRef"]
    names = {(d["kind"], d["metadata"]["name"]) for d in workloads()}
    assert (ref["kind"], ref["name"]) in names
    assert hpa["spec"]["minReplicas"] <= hpa["spec"]["maxReplicas"]
    (metric,) = hpa["spec"]["metrics"]
    name = metric["pods"]["metric"]["name"]
    assert name == "seqboat_num_requests_waiting"
    exported = (ROOT / "server/engine_gauges.cc").read_text()
    assert f'"{name}"' in exported


def test_gpu_replicas_keep_their_snapshots_on_their_own_volume():
    (sts,) = by_kind("StatefulSet")
    replicas = [s for s in by_kind("Service") if s["spec"].get("clusterIP") == "None"]
    assert sts["spec"]["serviceName"] in [s["metadata"]["name"] for s in replicas]
    (claim,) = sts["spec"]["volumeClaimTemplates"]
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    spec = sts["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    env = env_of(container)
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts[claim["metadata"]["name"]] == env["SEQBOAT_PREFIX_CACHE_DIR"]
    # The files' budget fits the volume, and the server's group may write it.
    size = claim["spec"]["resources"]["requests"]["storage"]
    assert size.endswith("Gi")
    assert int(env["SEQBOAT_PREFIX_CACHE_DISK_BYTES"]) < int(size[:-2]) << 30
    assert spec["securityContext"]["fsGroup"] == spec["securityContext"]["runAsGroup"]


def test_entrypoint_passes_the_disk_tier_when_set(tmp_path):
    out = run_entrypoint(tmp_path, {"SEQBOAT_PREFIX_CACHE_DIR": "/snap",
                                    "SEQBOAT_PREFIX_CACHE_DISK_BYTES": "1000"})
    assert out.returncode == 0, out.stderr
    argv = out.stdout.split()
    assert "--prefix_cache_dir=/snap" in argv
    assert "--prefix_cache_disk_bytes=1000" in argv
    (tmp_path / "unset").mkdir()
    out = run_entrypoint(tmp_path / "unset", {})
    assert out.returncode == 0, out.stderr
    assert not [a for a in out.stdout.split() if a.startswith("--prefix_cache_dir")]
    assert not [a for a in out.stdout.split() if a.startswith("--prefix_cache_peer")]


def test_entrypoint_passes_the_peers_when_set(tmp_path):
    out = run_entrypoint(tmp_path, {
        "SEQBOAT_PREFIX_CACHE_PEERS": "a:1,b:2",
        "SEQBOAT_PREFIX_CACHE_PEER_API_KEY_FILE": "/k",
        "SEQBOAT_PREFIX_CACHE_PEER_TLS_CA_FILE": "/ca",
        "SEQBOAT_PREFIX_CACHE_PEER_TLS_CERT_FILE": "/c",
        "SEQBOAT_PREFIX_CACHE_PEER_TLS_KEY_FILE": "/key",
        "SEQBOAT_PREFIX_CACHE_PEER_TLS_SERVER_NAME": "svc"})
    assert out.returncode == 0, out.stderr
    argv = out.stdout.split()
    for flag in ("--prefix_cache_peers=a:1,b:2",
                 "--prefix_cache_peer_api_key_file=/k",
                 "--prefix_cache_peer_tls_ca_file=/ca",
                 "--prefix_cache_peer_tls_cert_file=/c",
                 "--prefix_cache_peer_tls_key_file=/key",
                 "--prefix_cache_peer_tls_server_name=svc"):
        assert flag in argv
    flags = server_flags()
    for arg in argv:
        assert arg[2:].split("=", 1)[0] in flags, arg


def test_gpu_replicas_ask_every_replica_the_balancer_knows():
    (sts,) = by_kind("StatefulSet")
    (container,) = sts["spec"]["template"]["spec"]["containers"]
    peers = env_of(container)["SEQBOAT_PREFIX_CACHE_PEERS"].split(",")
    conf = (K8S / "nginx.conf").read_text()
    upstream = re.findall(r"server (seqboat-\d+\.seqboat-replicas:50051)", conf)
    assert peers == upstream


def test_kustomization_lists_existing_files_and_the_balancer_config():
    k = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    for r in k["resources"]:
        assert (K8S / r).is_file(), r
    (generator,) = k["configMapGenerator"]
    for f in generator["files"]:
        assert (K8S / f).is_file(), f
    (balancer,) = [d for d in by_kind("Deployment")
                   if d["metadata"]["name"] == "seqboat-balancer"]
    volumes = balancer["spec"]["template"]["spec"]["volumes"]
    assert generator["name"] in [v.get("configMap", {}).get("name") for v in volumes]
    # The balancer forwards to each replica of the StatefulSet by its own
    # name under the headless Service, every one the HPA may start, hashing
    # the conversation key consistently.
    conf = (K8S / "nginx.conf").read_text()
    (replicas,) = [s for s in by_kind("Service") if s["spec"].get("clusterIP") == "None"]
    grpc_port = next(p["port"] for p in replicas["spec"]["ports"] if p["name"] == "grpc")
    (sts,) = by_kind("StatefulSet")
    (hpa,) = by_kind("HorizontalPodAutoscaler")
    assert sts["spec"]["serviceName"] == replicas["metadata"]["name"]
    openai_port = next(p["port"] for p in replicas["spec"]["ports"]
                       if p["name"] == "openai")
    upstreams = re.findall(r"upstream (\w+) \{(.*?)\n  \}", conf, re.S)
    assert [name for name, _ in upstreams] == ["seqboat", "seqboat_openai"]
    for (_, body), port in zip(upstreams, (grpc_port, openai_port)):
        names = re.findall(r"server (\S+) resolve", body)
        assert names == [
            f"{sts['metadata']['name']}-{i}.{replicas['metadata']['name']}:{port}"
            for i in range(hpa["spec"]["maxReplicas"])]
        assert "hash $http_x_session_id consistent;" in body
    # The OpenAI port goes through the balancer too, by the same key.
    assert re.search(r"listen 8000;\s+location / \{\s+proxy_pass http://seqboat_openai;",
                     conf)
    ports = {p["name"]: p["containerPort"]
             for p in balancer["spec"]["template"]["spec"]["containers"][0]["ports"]}
    assert ports["openai"] == 8000
    listen = int(re.search(r"listen (\d+) http2;", conf).group(1))
    (container,) = balancer["spec"]["template"]["spec"]["containers"]
    assert container["ports"][0]["containerPort"] == listen


# ---------------------------------------------------------------- nginx

def local_nginx_conf(tmp_path):
    """The balancer's config as this machine's nginx can check it: the
    cluster's names do not resolve here (each replica's becomes a loopback
    port), Debian's nginx 1.22 lacks `resolve` on upstream servers (the
    image's 1.27 has it), and paths go to a temp prefix."""
    conf = (K8S / "nginx.conf").read_text()
    conf = re.sub(r"seqboat-(\d+)\.seqboat-replicas:\d+ resolve",
                  lambda m: f"127.0.0.1:{50051 + int(m.group(1))}", conf)
    conf = conf.replace("kube-dns.kube-system.svc.cluster.local", "127.0.0.1")
    return conf.replace("/tmp/", f"{tmp_path}/")


def test_balancer_config_passes_nginx_t(tmp_path):
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    assert os.access(nginx, os.X_OK), "nginx missing: run deploy/setup.sh"
    conf = local_nginx_conf(tmp_path)
    path = tmp_path / "nginx.conf"
    path.write_text(conf)
    out = subprocess.run([nginx, "-t", "-p", str(tmp_path), "-c", str(path)],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert "grpc_pass grpc://seqboat;" in conf
    assert re.search(r"listen \d+ http2;", conf)


def test_nginx_t_rejects_a_broken_config(tmp_path):
    """The check above can fail: a bad directive is caught."""
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    path = tmp_path / "nginx.conf"
    path.write_text(local_nginx_conf(tmp_path)
                    .replace("grpc_next_upstream error", "grpc_next_upstream bogus"))
    out = subprocess.run([nginx, "-t", "-p", str(tmp_path), "-c", str(path)],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode != 0


# ------------------------------------------------------------------ TLS

K8S_TLS = DEPLOY / "k8s-tls"


def test_entrypoint_maps_tls_environment_to_existing_server_flags(tmp_path):
    env = {"SEQBOAT_TLS_CERT_FILE": "/tls/tls.crt", "SEQBOAT_TLS_KEY_FILE": "/tls/tls.key",
           "SEQBOAT_TLS_CLIENT_CA_FILE": "/tls/ca.crt",
           "SEQBOAT_TLS_HTTP_PORT_CLIENT_CERTS": "false",
           "SEQBOAT_TLS_REFRESH_SECONDS": "30"}
    out = run_entrypoint(tmp_path, env)
    assert out.returncode == 0, out.stderr
    argv = out.stdout.split()
    for flag in ("--tls_cert_file=/tls/tls.crt", "--tls_key_file=/tls/tls.key",
                 "--tls_client_ca_file=/tls/ca.crt", "--tls_http_port_client_certs=false",
                 "--tls_refresh_seconds=30"):
        assert flag in argv
    flags = server_flags()
    for arg in argv:
        assert arg[2:].split("=", 1)[0] in flags, arg
    # A certificate without its key stops the start, naming the variable.
    (tmp_path / "again").mkdir()
    out = run_entrypoint(tmp_path / "again", {"SEQBOAT_TLS_CERT_FILE": "/tls/tls.crt"})
    assert out.returncode != 0 and "SEQBOAT_TLS_KEY_FILE" in out.stderr


def tls_patches():
    k = yaml.safe_load((K8S_TLS / "kustomization.yaml").read_text())
    assert k["resources"] == ["../k8s"]
    return k, {p["path"]: yaml.safe_load((K8S_TLS / p["path"]).read_text())
               for p in k["patches"]}


def mounts_of(deployment_patch):
    spec = deployment_patch["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    secrets = {v["name"]: v["secret"]["secretName"] for v in spec["volumes"]}
    return container, {m["mountPath"]: secrets[m["name"]]
                       for m in container["volumeMounts"]}


def test_tls_overlay_patches_existing_objects_and_mounts_the_secrets():
    k, patches = tls_patches()
    base = {(d["kind"], d["metadata"]["name"]) for d in manifests()}
    for patch in patches.values():
        assert (patch["kind"], patch["metadata"]["name"]) in base
    (replicas,) = [p for p in patches.values()
                   if p["kind"] == "StatefulSet" and p["metadata"]["name"] == "seqboat"]
    container, mounts = mounts_of(replicas)
    assert mounts == {"/etc/seqboat/tls": "seqboat-tls",
                      "/etc/seqboat/peer-tls": "seqboat-balancer-client"}
    env = env_of(container)
    for var in ("SEQBOAT_TLS_CERT_FILE", "SEQBOAT_TLS_KEY_FILE",
                "SEQBOAT_TLS_CLIENT_CA_FILE"):
        assert env[var].startswith("/etc/seqboat/tls/"), var
    # Snapshot fetches between replicas speak mutual TLS as the balancer
    # does: its client certificate, the replicas' CA and their shared name.
    for var in ("CA", "CERT", "KEY"):
        assert env[f"SEQBOAT_PREFIX_CACHE_PEER_TLS_{var}_FILE"].startswith(
            "/etc/seqboat/peer-tls/"), var
    conf = (K8S_TLS / "nginx.conf").read_text()
    assert "grpc_ssl_name seqboat-replicas;" in conf
    assert env["SEQBOAT_PREFIX_CACHE_PEER_TLS_SERVER_NAME"] == "seqboat-replicas"
    # kubelet's probes present no client certificate, and its gRPC probe
    # speaks no TLS: probes go to the HTTPS side port, which asks for none.
    assert env["SEQBOAT_TLS_HTTP_PORT_CLIENT_CERTS"] == "false"
    assert container["readinessProbe"]["grpc"] is None
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"]["scheme"] == "HTTPS", probe
    (balancer,) = [p for p in patches.values()
                   if p["metadata"]["name"] == "seqboat-balancer"]
    _, lb_mounts = mounts_of(balancer)
    conf = (K8S_TLS / "nginx.conf").read_text()
    files = re.findall(r"(?:ssl_certificate|ssl_certificate_key|"
                       r"ssl_trusted_certificate) (\S+);", conf)
    assert len(files) == 5
    for f in files:
        assert any(f.startswith(m + "/") for m in lb_mounts), f
    (generator,) = k["configMapGenerator"]
    assert generator["behavior"] == "replace" and generator["files"] == ["nginx.conf"]


def test_tls_balancer_config_passes_nginx_t(tmp_path):
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    ca_key, ca = tmp_path / "ca.key", tmp_path / "ca.crt"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-days", "1", "-subj", "/CN=t",
                    "-keyout", str(ca_key), "-out", str(ca)],
                   check=True, capture_output=True)
    conf = (K8S_TLS / "nginx.conf").read_text()
    assert "hash $http_x_session_id consistent;" in conf
    conf = re.sub(r"seqboat-(\d+)\.seqboat-replicas:\d+ resolve",
                  lambda m: f"127.0.0.1:{50051 + int(m.group(1))}", conf)
    conf = conf.replace("kube-dns.kube-system.svc.cluster.local", "127.0.0.1")
    conf = conf.replace("/tmp/", f"{tmp_path}/")
    for mount in ("/etc/seqboat-lb-tls", "/etc/seqboat-lb-replicas"):
        conf = conf.replace(mount + "/tls.crt", str(ca)).replace(mount + "/ca.crt", str(ca))
        conf = conf.replace(mount + "/tls.key", str(ca_key))
    path = tmp_path / "nginx.conf"
    path.write_text(conf)
    out = subprocess.run([nginx, "-t", "-p", str(tmp_path), "-c", str(path)],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert "grpc_pass grpcs://seqboat;" in conf and "listen 8443 ssl http2;" in conf
