"""clients/load/plot.py turns seqboat_load result files into a PNG."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PLOT = ROOT / "clients/load/plot.py"


def result(concurrency, tok_s, tpot_ms, ttft_ms):
    r = {"config": {"mode": "closed", "concurrency": concurrency,
                    "target": "127.0.0.1:1", "input_len": 8, "output_len": 16},
         "output_throughput": tok_s}
    for metric, v in (("tpot", tpot_ms), ("ttft", ttft_ms)):
        r[f"median_{metric}_ms"] = v
        r[f"p99_{metric}_ms"] = 2 * v
    return r


def test_writes_a_png_from_several_results(tmp_path):
    paths = []
    for c, tok, tpot, ttft in ((4, 300.0, 2.0, 10.0), (1, 100.0, 1.0, 5.0)):
        p = tmp_path / f"c{c}.json"
        p.write_text(json.dumps(result(c, tok, tpot, ttft)))
        paths.append(str(p))
    out = tmp_path / "sweep.png"
    run = subprocess.run([sys.executable, str(PLOT), "--out", str(out), *paths],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert out.stat().st_size > 5000


def test_points_are_ordered_by_load():
    sys.path.insert(0, str(PLOT.parent))
    import plot  # noqa: E402
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        paths = []
        for c in (16, 1, 4):
            p = Path(d) / f"c{c}.json"
            p.write_text(json.dumps(result(c, c * 10.0, 1.0, 1.0)))
            paths.append(str(p))
        (points,) = plot.load_points(paths).values()
    assert [p["config"]["concurrency"] for p in points] == [1, 4, 16]


def test_bad_input_is_an_error_not_a_crash(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    run = subprocess.run([sys.executable, str(PLOT), "--out",
                          str(tmp_path / "x.png"), str(bad)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert "plot.py" in run.stderr
