#!/usr/bin/env python3
"""ncu_summary.py CSV [--top N]: per-kernel time table of an `ncu --csv` log.

Reads the log of `ncu --csv --metrics gpu__time_duration.sum ... --log-file
CSV` (one row per kernel and metric), groups the kernels by name (template
arguments and parameters cut) and grid size, and prints, heaviest first:
total ms, share, launches, mean us. Lines that are not CSV rows (==PROF==
messages) are skipped."""
import csv
import re
import sys
from collections import defaultdict


def short(name):
    name = re.sub(r"\(.*$", "", name)
    depth, out = 0, []
    for ch in name:
        if ch == "<":
            depth += 1
            if depth == 1:
                out.append("<..>")
        elif ch == ">":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out).replace("void ", "")[:70]


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: ncu_summary.py CSV [--top N]")
    top = int(sys.argv[sys.argv.index("--top") + 1]) if "--top" in sys.argv else 40
    rows = [l for l in open(sys.argv[1], errors="replace") if l.startswith('"')]
    if not rows:
        sys.exit("ncu_summary: no CSV rows in " + sys.argv[1])
    rd = csv.DictReader(rows)
    agg = defaultdict(lambda: [0.0, 0])
    total = 0.0
    for r in rd:
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        v = float(r["Metric Value"].replace(",", ""))
        unit = r.get("Metric Unit", "ns")
        us = v / 1e3 if unit in ("nsecond", "ns") else v * 1e3 if unit in ("msecond", "ms") else v
        key = (short(r["Kernel Name"]), r.get("Grid Size", ""), r.get("Block Size", ""))
        agg[key][0] += us
        agg[key][1] += 1
        total += us
    print(f"{'ms':>9} {'share':>6} {'count':>6} {'mean us':>9}  kernel [grid] [block]")
    for (name, grid, block), (us, n) in sorted(agg.items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"{us / 1e3:9.3f} {100 * us / total:5.1f}% {n:6d} {us / n:9.2f}  {name} [{grid}] [{block}]")
    print(f"{total / 1e3:9.3f} total over {sum(n for _, n in agg.values())} launches")


if __name__ == "__main__":
    main()
