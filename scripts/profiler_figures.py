#!/usr/bin/env python3
"""Figures of torch_npu profiler CSVs read with Python's csv module, independently of memsight.

The expected values in crates/memsight-core/tests/profiler.rs come from:
    python3 scripts/profiler_figures.py ../shared/fixtures/profiler/*

The expected values of the rank-vs-rank profiler diff come from (JSON on stdout):
    python3 scripts/profiler_figures.py --diff A_FOLDER B_FOLDER

Sizes in bytes (MB x 1048576, KB x 1024), cells stripped of the trailing tab.
"""
import collections
import csv
import glob
import json
import os
import sys
from decimal import Decimal

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


# --- --diff A B: operator peak, per-operator bytes at that peak and curve peaks, per rank ----------
#
# Sizes and times are read as Decimal: the timestamps have 16 digits before the point and three
# after, more than a float holds, so equal/ordered times are compared exactly.


def exact(row, base):
    """The cell of column `base` in bytes (or in the header's unit when not a size), None if empty."""
    v, f = col(row, base)
    return Decimal(v) * f if v else None


def as_json_number(d):
    """A Decimal as an int when it is whole, else a float; None stays None."""
    if d is None:
        return None
    return int(d) if d == d.to_integral_value() else float(d)


def csv_rows(folder, prefix):
    """Rows of all `prefix*.csv` files of a folder (slices merged, in name order)."""
    out = []
    for path in sorted(glob.glob(os.path.join(folder, prefix + "*.csv"))):
        out.extend(rows(path))
    return out


def operator_figures(folder):
    """The operator peak of operator_memory.csv and, per operator name, its bytes at that peak.

    Each row is one allocation. A row of size >= 0 adds its size at its allocation time and takes it
    off at its release time (if any). A row of negative size was allocated before the capture: it
    holds |size| from the start (the starting level) until its release. Sweep over time with
    releases before allocations at equal times (file order otherwise); the peak is the highest level,
    reached first at `peak_us` (None when the starting level is already the highest).
    """
    ops = csv_rows(folder, "operator_memory")
    events = []  # (time, 0 = release / 1 = allocation, row index): sorts releases first, then file order
    level = Decimal(0)
    skipped = set()  # rows that cannot be placed on the time axis
    for i, r in enumerate(ops):
        size = exact(r, "Size")
        t_alloc = exact(r, "Allocation Time")
        t_rel = exact(r, "Release Time")
        if size is None:
            skipped.add(i)
            continue
        if size < 0:
            level += -size  # alive from the start of the capture
        elif t_alloc is None:
            skipped.add(i)
            continue
        else:
            events.append((t_alloc, 1, i))
        if t_rel is not None:
            events.append((t_rel, 0, i))
    events.sort()

    start = level
    peak, peak_at = level, None  # peak_at: index into events of the change that first reached it
    for k, (t, kind, i) in enumerate(events):
        size = abs(exact(ops[i], "Size"))
        level += size if kind == 1 else -size
        if level > peak:
            peak, peak_at = level, k

    # Rows alive right after the peak change: negative rows from the start, and replay the events
    # up to and including the peak change.
    alive = {i for i, r in enumerate(ops) if i not in skipped and exact(r, "Size") < 0}
    if peak_at is not None:
        for t, kind, i in events[:peak_at + 1]:
            (alive.add if kind == 1 else alive.discard)(i)

    per = {}
    for i, r in enumerate(ops):
        name = r.get("Name", "")  # the empty name (rows from before the capture) is a name too
        o = per.setdefault(name, {"bytes_at_peak": Decimal(0), "count": 0, "total_bytes": Decimal(0),
                                  "largest_bytes": None})
        size = exact(r, "Size")
        if i in alive:
            o["bytes_at_peak"] += abs(size)
        if size is not None and size > 0:
            o["count"] += 1
            o["total_bytes"] += size
            o["largest_bytes"] = size if o["largest_bytes"] is None else max(o["largest_bytes"], size)

    peak_row = ops[events[peak_at][2]] if peak_at is not None else None
    at_peak = sum((o["bytes_at_peak"] for o in per.values()), Decimal(0))
    return {
        "rows": len(ops),
        "rows_skipped": len(skipped),
        "starting_bytes": as_json_number(start),
        "operator_peak_bytes": as_json_number(peak),
        "operator_peak_us": float(events[peak_at][0]) if peak_at is not None else None,
        # The exact text of that time (a float loses the last digits of these timestamps).
        "operator_peak_us_exact": str(events[peak_at][0]) if peak_at is not None else None,
        "operator_peak_row": {"name": peak_row.get("Name", ""),
                              "size_bytes": as_json_number(exact(peak_row, "Size")),
                              # The allocator's own total then: it includes what was allocated
                              # before the capture without a row here.
                              "allocation_total_allocated_bytes":
                                  as_json_number(exact(peak_row, "Allocation Total Allocated"))}
        if peak_row else None,
        "rows_alive_at_peak": len(alive),
        "per_operator_sum_bytes": as_json_number(at_peak),
        "per_operator_adds_up": at_peak == peak,  # the names' bytes at the peak make up the peak
        "operators": {n: {k: as_json_number(v) if k != "count" else v for k, v in o.items()}
                      for n, o in sorted(per.items())},
    }


def curve_figures(folder):
    """Per component of memory_record.csv its peak allocated / reserved bytes, and the memory outside
    the allocator: APP's peak reserved minus the reserved of the last PTA+GE sample at or before the
    (first) APP peak."""
    recs = csv_rows(folder, "memory_record")
    # Stable sort by time: rank0 files are not written in time order.
    recs = sorted(enumerate(recs), key=lambda ir: (exact(ir[1], "Timestamp"), ir[0]))
    recs = [r for _, r in recs]
    comps = {}
    for r in recs:
        c = comps.setdefault(r["Component"], {"samples": 0, "peak_allocated_bytes": None,
                                              "peak_reserved_bytes": None, "peak_reserved_us": None})
        c["samples"] += 1
        a, res = exact(r, "Total Allocated"), exact(r, "Total Reserved")
        if a is not None and (c["peak_allocated_bytes"] is None or a > c["peak_allocated_bytes"]):
            c["peak_allocated_bytes"] = a
        if res is not None and (c["peak_reserved_bytes"] is None or res > c["peak_reserved_bytes"]):
            c["peak_reserved_bytes"], c["peak_reserved_us"] = res, exact(r, "Timestamp")

    outside, pta_ge_reserved = None, None
    app = comps.get("APP")
    if app and app["peak_reserved_bytes"] is not None:
        before = [r for r in recs if r["Component"] == "PTA+GE" and exact(r, "Total Reserved") is not None
                  and exact(r, "Timestamp") <= app["peak_reserved_us"]]
        if before:
            pta_ge_reserved = exact(before[-1], "Total Reserved")
            outside = app["peak_reserved_bytes"] - pta_ge_reserved
    return {
        "components": {n: {k: (float(v) if k.endswith("_us") and v is not None else
                               v if k == "samples" else as_json_number(v)) for k, v in c.items()}
                       for n, c in sorted(comps.items())},
        "pta_ge_reserved_at_app_peak_bytes": as_json_number(pta_ge_reserved),
        "outside_allocator_bytes": as_json_number(outside),
    }


def diff(a_folder, b_folder):
    """Both ranks' figures and, per operator name, b's bytes at the peak minus a's."""
    a = {"folder": a_folder, **operator_figures(a_folder), **curve_figures(a_folder)}
    b = {"folder": b_folder, **operator_figures(b_folder), **curve_figures(b_folder)}
    empty = {"bytes_at_peak": 0, "count": 0, "total_bytes": 0, "largest_bytes": None}

    def present(o):  # a side "has" a name when it allocated under it or holds bytes of it at its peak
        return o["count"] > 0 or o["bytes_at_peak"] > 0

    ops = []
    for name in sorted(set(a["operators"]) | set(b["operators"])):
        oa, ob = a["operators"].get(name, empty), b["operators"].get(name, empty)
        only = "a" if present(oa) and not present(ob) else "b" if present(ob) and not present(oa) else None
        ops.append({"name": name, "delta_at_peak_bytes": ob["bytes_at_peak"] - oa["bytes_at_peak"],
                    "only_in": only, "a": oa, "b": ob})
    # Largest |delta| first; ties: the larger total_bytes of either side, then the name.
    ops.sort(key=lambda o: (-abs(o["delta_at_peak_bytes"]),
                            -max(o["a"]["total_bytes"], o["b"]["total_bytes"]), o["name"]))
    return {"a": a, "b": b, "operators": ops,
            "only_in_a": sum(o["only_in"] == "a" for o in ops),
            "only_in_b": sum(o["only_in"] == "b" for o in ops)}


if __name__ == "__main__":
    if sys.argv[1:2] == ["--diff"]:
        if len(sys.argv) != 4:
            sys.exit("usage: profiler_figures.py --diff A_FOLDER B_FOLDER")
        print(json.dumps(diff(sys.argv[2], sys.argv[3]), indent=1))
        sys.exit(0)
    for folder in sys.argv[1:]:
        main(folder)
