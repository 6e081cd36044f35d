"""Achieved memory bandwidth per kernel family, from an Nsight Compute run.

    ncu --csv --page raw --print-units base \\
        --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \\
        cuda_decode_bench ... | python3 bench/ncu_families.py

Reads ncu's raw CSV (one row per kernel launch; the lines around it, the
benchmark's own output, are skipped except its "copy bandwidth N GB/s" line)
and prints, per family (our kernels by name, Gemv for GemvKernel<1, true>;
every cuBLAS kernel as cuBLAS): launches, time, bytes moved to and from DRAM,
GB/s, and that as a share of the copy bandwidth the benchmark measured.
"""

import argparse
import csv
import re
import sys

TIME = "gpu__time_duration.sum"
READ = "dram__bytes_read.sum"
WRITE = "dram__bytes_write.sum"
SCALE = {"byte": 1, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9,
         "nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3, "second": 1.0}
# cuBLAS's kernels (lower case; ours are CamelCase, so GemvKernel is ours).
CUBLAS = re.compile(r"^(sm\d+_|cutlass|nvjet|gemv|gemm|ampere_|hopper_|xmma|cublas)")


def family(name):
    """GemvKernel<1, true>(GemvParams, int) -> Gemv; cuBLAS's by prefix."""
    base = re.sub(r"^void\s+", "", name.strip())
    base = re.split(r"[<(]", base, maxsplit=1)[0]
    base = base.rsplit("::", 1)[-1]
    if CUBLAS.match(base):
        return "cuBLAS"
    return re.sub(r"(_?[Kk]ernel)$", "", base) or base


def number(text, unit):
    value = float(text.replace(",", "")) if text.strip() else 0.0
    return value * SCALE.get(unit.strip().lower(), 1.0)


def families(lines):
    """(rows by family, copy GB/s or None) from ncu's output lines."""
    copy_gbs = None
    table = []
    for line in lines:
        m = re.search(r"copy bandwidth\s+([\d.]+)\s*GB/s", line)
        if m:
            copy_gbs = float(m.group(1))
        if line.startswith('"'):
            table.append(line)
    rows = list(csv.reader(table))
    header = next((i for i, r in enumerate(rows) if r and r[0] == "ID"), None)
    if header is None:
        raise ValueError("no ncu CSV table (run ncu with --csv --page raw)")
    names = rows[header]
    missing = [m for m in (TIME, READ, WRITE, "Kernel Name") if m not in names]
    if missing:
        raise ValueError(f"ncu CSV lacks {', '.join(missing)}")
    col = {n: names.index(n) for n in names}
    units = rows[header + 1]
    out = {}
    for r in rows[header + 2:]:
        if len(r) != len(names) or not r[0].strip():
            continue
        f = out.setdefault(family(r[col["Kernel Name"]]),
                           {"launches": 0, "seconds": 0.0, "bytes": 0.0})
        f["launches"] += 1
        f["seconds"] += number(r[col[TIME]], units[col[TIME]])
        f["bytes"] += (number(r[col[READ]], units[col[READ]]) +
                       number(r[col[WRITE]], units[col[WRITE]]))
    return out, copy_gbs


def report(out, copy_gbs):
    total = sum(f["seconds"] for f in out.values()) or 1.0
    lines = [f"{'family':<22} {'launches':>8} {'time us':>10} {'share':>6} {'MB':>9} "
             f"{'GB/s':>7} {'of copy':>7}"]
    for name, f in sorted(out.items(), key=lambda kv: -kv[1]["seconds"]):
        gbs = f["bytes"] / f["seconds"] / 1e9 if f["seconds"] > 0 else 0.0
        of_copy = f"{100 * gbs / copy_gbs:6.1f}%" if copy_gbs else "     -"
        lines.append(f"{name:<22} {f['launches']:>8} {f['seconds'] * 1e6:>10.1f} "
                     f"{100 * f['seconds'] / total:>5.1f}% {f['bytes'] / 1e6:>9.2f} "
                     f"{gbs:>7.0f} {of_copy:>7}")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("input", nargs="?", help="ncu's output (default: stdin)")
    ap.add_argument("--copy_gbs", type=float,
                    help="the device's copy bandwidth (default: the benchmark's line)")
    a = ap.parse_args(argv)
    lines = open(a.input).read().splitlines() if a.input else sys.stdin.read().splitlines()
    try:
        out, copy_gbs = families(lines)
    except ValueError as e:
        sys.exit(f"ncu_families: {e}")
    print(report(out, a.copy_gbs or copy_gbs))


if __name__ == "__main__":
    main()
