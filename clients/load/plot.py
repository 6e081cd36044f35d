#!/usr/bin/env python3
"""Throughput vs latency, or TTFT per chat turn, from seqboat_load result files.

    plot.py --out sweep.png results/c1.json results/c2.json ...
    plot.py --out chat.png results/chat-cache-off.json results/chat-cache-on.json

Request results (the default workload): each file is one point (one
concurrency or request rate); points of the same target and prompt shape form
one curve, ordered by concurrency or rate. The figure has two panels: output
tokens/s against TPOT (p50 and p99) and against TTFT (p50 and p99), each point
labelled with its concurrency or rate.

Chat results (--workload=chat): each file is one curve over the turn index,
named by config.label (seqboat_load --label) and its history length and
concurrency. Two panels: TTFT (p50 solid, p90 dashed) and the mean cached
prompt tokens the server reported, against the turn.
"""
import argparse
import json
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402


def read_results(paths):
    results = []
    for path in paths:
        with open(path) as f:
            results.append(json.load(f))
    return results


def is_chat(r):
    return r.get("config", {}).get("workload") == "chat"


def load_points(paths):
    """{curve label: [result dicts]} ordered by load."""
    return group_points(read_results(paths))


def group_points(results):
    curves = defaultdict(list)
    for r in results:
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


def chat_label(r):
    c = r.get("config", {})
    shape = f"hist={c.get('history_len')} c={c.get('concurrency')}"
    return f"{c['label']} {shape}" if c.get("label") else f"{c.get('target', '?')} {shape}"


def chat_curves(results):
    """[(label, [turn dicts])], ordered by history length, concurrency, label."""
    def key(r):
        c = r.get("config", {})
        return (c.get("history_len", 0), c.get("concurrency", 0), chat_label(r))
    curves = []
    for r in sorted(results, key=key):
        turns = sorted(r["turns"], key=lambda t: t["turn"])
        curves.append((chat_label(r), [t for t in turns if t["completed"] > 0]))
    return curves


def plot_chat(curves, out, title):
    fig, (ax_ttft, ax_cached) = plt.subplots(1, 2, figsize=(13, 5))
    for label, turns in curves:
        x = [t["turn"] for t in turns]
        (line,) = ax_ttft.plot(x, [t["median_ttft_ms"] for t in turns], "o-",
                               label=f"{label} p50")
        ax_ttft.plot(x, [t["p90_ttft_ms"] for t in turns], "s--", color=line.get_color(),
                     label=f"{label} p90")
        ax_cached.plot(x, [t["mean_cached_prompt_tokens"] for t in turns], "o-",
                       color=line.get_color(), label=label)
    ax_ttft.set_ylabel("TTFT (ms)")
    ax_ttft.set_yscale("log")
    ax_cached.set_ylabel("cached prompt tokens (mean)")
    for ax in (ax_ttft, ax_cached):
        ax.set_xlabel("turn")
        ax.xaxis.get_major_locator().set_params(integer=True)
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
    parser.add_argument("--title", help="default: names the kind of plot")
    args = parser.parse_args(argv)
    try:
        results = read_results(args.results)
        chat = [r for r in results if is_chat(r)]
        if chat and len(chat) != len(results):
            raise ValueError("chat and request results do not share a plot")
        if chat:
            curves = chat_curves(chat)
        else:
            curves = group_points(results)
    except (OSError, json.JSONDecodeError, KeyError, ValueError) as e:
        print(f"plot.py: {e}", file=sys.stderr)
        return 2
    if chat:
        plot_chat(curves, args.out, args.title or "seqboat: TTFT per chat turn")
    else:
        plot(curves, args.out, args.title or "seqboat: throughput vs latency")
    return 0


if __name__ == "__main__":
    sys.exit(main())
