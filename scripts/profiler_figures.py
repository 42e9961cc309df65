#!/usr/bin/env python3
"""Figures of torch_npu profiler CSVs read with Python's csv module, independently of memsight.

The expected values in crates/memsight-core/tests/profiler.rs come from:
    python3 scripts/profiler_figures.py ../shared/fixtures/profiler/*

Sizes in bytes (MB x 1048576, KB x 1024), cells stripped of the trailing tab.
"""
import collections
import csv
import glob
import os
import sys

UNIT = {"KB": 1024, "MB": 1024 ** 2, "GB": 1024 ** 3}


def rows(path):
    with open(path, newline="") as f:
        reader = csv.reader(f)
        header = [h.strip() for h in next(reader)]
        for r in reader:
            if not r or all(not c.strip() for c in r):
                continue
            yield {h: (r[i].strip() if i < len(r) else "") for i, h in enumerate(header)}


def col(row, base):
    for k, v in row.items():
        name, _, unit = k.partition("(")
        if name.strip() == base:
            return v, UNIT.get(unit.rstrip(")"), 1)
    return "", 1


def num(row, base):
    v, f = col(row, base)
    return float(v) * f if v else None


def main(folder):
    print(folder)
    for path in sorted(glob.glob(os.path.join(folder, "*.csv"))):
        name = os.path.basename(path)
        if name.startswith("memory_record"):
            per = collections.Counter()
            peak_reserved = collections.defaultdict(float)
            peak_allocated = collections.defaultdict(float)
            for r in rows(path):
                c = r["Component"]
                per[c] += 1
                res = num(r, "Total Reserved")
                alloc = num(r, "Total Allocated")
                if res is not None:
                    peak_reserved[c] = max(peak_reserved[c], res)
                if alloc is not None:
                    peak_allocated[c] = max(peak_allocated[c], alloc)
            print(f"  {name}: rows per component {dict(per)}")
            print(f"    peak reserved bytes {dict(peak_reserved)}")
            print(f"    peak allocated bytes {dict(peak_allocated)}")
            # APP reserved minus the latest PTA+GE reserved at or before each APP sample.
            recs = list(rows(path))
            ops = sorted((float(r["Timestamp(us)"]), num(r, "Total Reserved")) for r in recs if r["Component"] == "PTA+GE")
            gaps = []
            for r in recs:
                if r["Component"] != "APP":
                    continue
                t = float(r["Timestamp(us)"])
                before = [v for (ts, v) in ops if ts <= t]
                if before:
                    gaps.append(num(r, "Total Reserved") - before[-1])
            if gaps:
                print(f"    APP - PTA+GE reserved: {len(gaps)} samples, median {sorted(gaps)[len(gaps) // 2]:.0f}, max {max(gaps):.0f}")
            # The peak: the first PTA+GE sample with the highest allocated, and the operator
            # allocations alive then (allocated at or before it, released after it or never).
            samples = [(float(r["Timestamp(us)"]), num(r, "Total Allocated")) for r in recs
                       if r["Component"] == "PTA+GE" and num(r, "Total Allocated") is not None]
            if samples:
                t_peak, a_peak = max(samples, key=lambda s: (s[1], -s[0]))
                print(f"    PTA+GE peak allocated {a_peak:.0f} at {t_peak}")
                op_path = glob.glob(os.path.join(folder, "operator_memory*.csv"))
                alive = []
                for op in (rows(op_path[0]) if op_path else []):
                    size = num(op, "Size")
                    t_alloc = op.get("Allocation Time(us)", "")
                    t_rel = op.get("Release Time(us)", "")
                    if size is None or size <= 0 or not t_alloc:
                        continue
                    if float(t_alloc) <= t_peak and (not t_rel or float(t_rel) > t_peak):
                        alive.append((size, op["Name"]))
                alive.sort(reverse=True)
                print(f"    operator allocations alive at the peak: {len(alive)}, "
                      f"{sum(s for s, _ in alive):.0f} bytes, largest {[(n, int(s)) for s, n in alive[:2]]}")
        elif name.startswith("operator_memory"):
            all_rows = list(rows(path))
            sizes = sorted(((num(r, "Size"), r["Name"]) for r in all_rows), reverse=True)
            negative = sum(1 for s, _ in sizes if s < 0)
            print(f"  {name}: {len(all_rows)} rows, {negative} negative, "
                  f"{len(set(r['Name'] for r in all_rows))} names")
            print(f"    largest: {[(n, int(s)) for s, n in sizes[:3]]}")
            unreleased = sum(1 for r in all_rows if not r.get("Release Time(us)", "").strip())
            print(f"    without release time: {unreleased}")
        elif name.startswith("npu_module_mem"):
            per = collections.Counter()
            peak = collections.defaultdict(float)
            for r in rows(path):
                per[r["Component"]] += 1
                peak[r["Component"]] = max(peak[r["Component"]], num(r, "Total Reserved") or 0)
            nonzero = {k: int(v) for k, v in peak.items() if v > 0}
            print(f"  {name}: {len(per)} components, {sum(per.values())} rows, nonzero peaks {nonzero}")
        elif name.startswith("static_op_mem"):
            all_rows = list(rows(path))
            ops = [r for r in all_rows if r["Op Name"] != "TOTAL"]
            total = [num(r, "Size") for r in all_rows if r["Op Name"] == "TOTAL"]
            forever = sum(1 for r in ops if r["Node Index End"] == "4294967295")
            print(f"  {name}: {len(ops)} ops, TOTAL {total}, to the end {forever}, "
                  f"largest {max((num(r, 'Size'), r['Op Name']) for r in ops)}")


if __name__ == "__main__":
    for folder in sys.argv[1:]:
        main(folder)
