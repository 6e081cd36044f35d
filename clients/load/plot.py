#!/usr/bin/env python3
"""Throughput vs latency from seqboat_load result files.

    plot.py --out sweep.png results/c1.json results/c2.json ...

Each file is one point (one concurrency or request rate); points of the same
target and prompt shape form one curve, ordered by concurrency or rate. The
figure has two panels: output tokens/s against TPOT (p50 and p99) and against
TTFT (p50 and p99), each point labelled with its concurrency or rate.
"""
import argparse
import json
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402


def load_points(paths):
    """{curve label: [result dicts]} ordered by load."""
    curves = defaultdict(list)
    for path in paths:
        with open(path) as f:
            r = json.load(f)
        c = r.get("config", {})
        label = c.get("label") or (
            f"{c.get('target', '?')} in={c.get('input_len')} out={c.get('output_len')}")
        curves[label].append(r)
    for points in curves.values():
        points.sort(key=load_of)
    return curves


def load_of(r):
    c = r.get("config", {})
    if c.get("mode") == "closed":
        return float(c.get("concurrency", 0))
    rate = c.get("request_rate", 0)
    return float("inf") if rate == "inf" else float(rate)


def load_label(r):
    c = r.get("config", {})
    if c.get("mode") == "closed":
        return f"c={c.get('concurrency')}"
    return f"r={c.get('request_rate')}"


def plot(curves, out, title):
    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    panels = [("tpot", "TPOT (ms)"), ("ttft", "TTFT (ms)")]
    for ax, (metric, ylabel) in zip(axes, panels):
        for label, points in curves.items():
            x = [p["output_throughput"] for p in points]
            for pct, style in (("median", "o-"), ("p99", "s--")):
                y = [p[f"{pct}_{metric}_ms"] for p in points]
                ax.plot(x, y, style, label=f"{label} {pct}")
            for p in points:
                ax.annotate(load_label(p), (p["output_throughput"],
                                            p[f"median_{metric}_ms"]),
                            textcoords="offset points", xytext=(4, 4),
                            fontsize=7)
        ax.set_xlabel("output tokens/s")
        ax.set_ylabel(ylabel)
        ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", help="seqboat_load --result_json files")
    parser.add_argument("--out", required=True, help="PNG to write")
    parser.add_argument("--title", default="seqboat: throughput vs latency")
    args = parser.parse_args(argv)
    try:
        curves = load_points(args.results)
    except (OSError, json.JSONDecodeError, KeyError) as e:
        print(f"plot.py: {e}", file=sys.stderr)
        return 2
    plot(curves, args.out, args.title)
    return 0


if __name__ == "__main__":
    sys.exit(main())
