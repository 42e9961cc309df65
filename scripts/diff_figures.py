#!/usr/bin/env python3
"""Diff figures of two snapshot files, computed with Python's own pickle module, independently of memsight.

    python3 scripts/diff_figures.py A B [--device-a N --device-b N]

prints JSON. Conventions for allocated / active / reserved follow scripts/fixture_figures.py and
../shared/docs/snapshot-format.md (requested sizes; the state before the first event is the final
state minus every event's change). On top of that this script rebuilds block lifetimes from the
trace, finds the blocks alive at the peak-allocated moment and groups everything by call site.

Semantics, step by step:
1. Devices: per file, the ordinals whose trace is non-empty, ascending; the i-th of A is paired with
   the i-th of B. --device-a/--device-b (both together) select exactly one pair.
2. Peaks: the maximum over "before the first event" and "after each event"; the peak moment is the
   first moment it is reached (peak_event null = before the first event).
3. Blocks: trace events paired by address. alloc opens (closing a block still open at that address),
   free_requested marks, free_completed closes. A free at an address with nothing open is a block
   from before the trace (size and stack from that free event; already free-requested at the start
   when first seen by a free_completed and the trace has free_requested events). Blocks of the final
   segments that are not inactive and whose address has nothing open are alive from before the trace
   to the end (requested_size, their frames, free-requested iff active_pending_free).
4. Alive at the peak: open right after the peak-allocated moment and not free-requested by then; their
   requested sizes must add up to peak_allocated_bytes (alive_sum_bytes, alive_sum_matches).
5. Call site: the stack as (filename, name, line) tuples, innermost first as recorded, internal frames
   dropped (all kept if all are internal; backslashes read as slashes), consecutive duplicates collapsed. An empty stack is the
   call site "()" (shown as an empty frame list).
6. Per call site and side: bytes_at_peak, allocs, bytes_requested, largest_bytes (0 when the call site
   has no alloc event on that side); delta_at_peak_bytes = b - a; only_in = "a"/"b" when the other
   side has neither a block nor an alloc with that call site.
7. top: the 10 call sites with the largest |delta_at_peak_bytes|; ties by the larger of the two
   bytes_at_peak (descending), then by the frame text.
"""
import argparse
import collections
import json
import pickle
import sys

INTERNAL_SUFFIXES = (".cpp", ".cc", ".cu", ".h", ".hpp", ".c")


class PlainUnpickler(pickle.Unpickler):
    """Snapshots hold only plain containers and scalars: refuse any class or function reference."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"not a memory snapshot: it references {module}.{name}")


def load(path):
    with open(path, "rb") as f:
        data = PlainUnpickler(f).load()
    if isinstance(data, list):  # PyTorch <= 1.13: a bare list of segments, no traces
        data = {"segments": data, "device_traces": []}
    return data


def final_blocks(seg):
    """(address, requested size, state, frames) of each block of a segment, old layouts included."""
    out = []
    addr = seg.get("address", 0)
    for b in seg.get("blocks", []):
        hist = b.get("history") or [{}]  # early-2023 files: frames / requested size in history[0]
        req = b.get("requested_size", hist[0].get("real_size", b["size"]))
        frames = b.get("frames", hist[0].get("frames", []))
        out.append((b.get("address", addr), req, b["state"], frames or []))
        addr = b.get("address", addr) + b["size"]  # blocks tile their segment
    return out


def is_internal(filename):
    f = (filename or "").replace("\\", "/")  # Windows paths follow the same rules
    return (f == "??" or f == "" or f.endswith(INTERNAL_SUFFIXES) or f.startswith("<")
            or "/torch/" in f or f.startswith("torch/") or "site-packages/" in f
            or "/lib/python" in f)


def call_site(frames):
    """Hashable call site of a stack: user frames only (all if none), consecutive duplicates collapsed."""
    full = [(fr.get("filename", ""), fr.get("name", ""), fr.get("line", 0)) for fr in frames or []]
    user = [fr for fr in full if not is_internal(fr[0])] or full
    site = []
    for fr in user:
        if not site or site[-1] != fr:
            site.append(fr)
    return tuple(site)


def side_figures(data, dev):
    """Peaks, block lifetimes and the per-call-site table of one device of one file."""
    traces = data.get("device_traces", [])
    trace = traces[dev] if dev < len(traces) else []
    dsegs = [s for s in data.get("segments", []) if s.get("device", 0) == dev]
    fblocks = [b for s in dsegs for b in final_blocks(s)]
    has_free_requested = any(e["action"] == "free_requested" for e in trace)

    # --- Totals over time, exactly as fixture_figures.py ---
    final = {
        "reserved": sum(s["total_size"] for s in dsegs),
        "allocated": sum(r for _, r, st, _ in fblocks if st == "active_allocated"),
        "active": sum(r for _, r, st, _ in fblocks if st in ("active_allocated", "active_pending_free")),
    }
    requested = {}  # addr -> True once free_requested seen since the alloc
    deltas = []
    for e in trace:
        a, size, addr = e["action"], e["size"], e.get("addr")
        d = {"reserved": 0, "allocated": 0, "active": 0}
        if a == "alloc":
            d["allocated"] = d["active"] = size
            requested[addr] = False
        elif a == "free_requested":
            d["allocated"] = -size
            requested[addr] = True
        elif a == "free_completed":
            d["active"] = -size
            seen = requested.pop(addr, None)
            if seen is False or (seen is None and not has_free_requested):
                d["allocated"] = -size
        elif a in ("segment_alloc", "segment_map"):
            d["reserved"] = size
        elif a in ("segment_free", "segment_unmap"):
            d["reserved"] = -size
        deltas.append(d)
    cur = {k: final[k] - sum(d[k] for d in deltas) for k in final}
    peak = dict(cur)
    peak_event = None  # first moment of the allocated peak; None = before the first event
    for i, d in enumerate(deltas):
        for k in cur:
            cur[k] += d[k]
        for k in cur:
            if cur[k] > peak[k]:
                peak[k] = cur[k]
                if k == "allocated":
                    peak_event = i

    # --- Block lifetimes: open / close / free-requested event indices, -1 = before the first event ---
    blocks = []
    open_at = {}  # addr -> block currently open there

    def new_block(opened, size, frames, req=None):
        b = {"open": opened, "close": None, "req": req, "size": size, "site": call_site(frames)}
        blocks.append(b)
        return b

    for i, e in enumerate(trace):
        a, addr = e["action"], e.get("addr")
        if a == "alloc":
            old = open_at.pop(addr, None)
            if old is not None:
                old["close"] = i
            open_at[addr] = new_block(i, e["size"], e.get("frames"))
        elif a == "free_requested":
            b = open_at.get(addr)
            if b is None:  # allocated before the trace
                b = open_at[addr] = new_block(-1, e["size"], e.get("frames"))
            if b["req"] is None:
                b["req"] = i
        elif a == "free_completed":
            b = open_at.pop(addr, None)
            if b is None:  # allocated before the trace; its free_requested too if the file records them
                b = new_block(-1, e["size"], e.get("frames"), -1 if has_free_requested else None)
            b["close"] = i
    for addr, req, state, frames in fblocks:  # alive from before the trace to the end
        if state != "inactive" and addr not in open_at:
            open_at[addr] = new_block(-1, req, frames, -1 if state == "active_pending_free" else None)

    # --- Blocks alive right after the peak-allocated moment ---
    p = -1 if peak_event is None else peak_event

    def alive_at_peak(b):
        return (b["open"] <= p and (b["close"] is None or b["close"] > p)
                and (b["req"] is None or b["req"] > p))

    sites = collections.defaultdict(lambda: {"bytes_at_peak": 0, "allocs": 0, "bytes_requested": 0,
                                             "largest_bytes": 0})
    alive_sum = 0
    for b in blocks:
        s = sites[b["site"]]
        if alive_at_peak(b):
            s["bytes_at_peak"] += b["size"]
            alive_sum += b["size"]
        if b["open"] >= 0:  # opened by an alloc event of the trace
            s["allocs"] += 1
            s["bytes_requested"] += b["size"]
            s["largest_bytes"] = max(s["largest_bytes"], b["size"])

    counts = collections.Counter(e["action"] for e in trace)
    summary = {
        "peak_allocated_bytes": peak["allocated"],
        "peak_active_bytes": peak["active"],
        "peak_reserved_bytes": peak["reserved"],
        "peak_event": peak_event,
        "alive_sum_bytes": alive_sum,
        "alive_sum_matches": alive_sum == peak["allocated"],
        "allocs": counts["alloc"],
        "bytes_requested": sum(e["size"] for e in trace if e["action"] == "alloc"),
        "segment_allocs": counts["segment_alloc"] + counts["segment_map"],
        "segment_frees": counts["segment_free"] + counts["segment_unmap"],
    }
    return summary, dict(sites)


def frame_text(site):
    return [f"{name} ({filename}:{line})" for filename, name, line in site]


def diff_devices(da, dev_a, db, dev_b):
    sa, sites_a = side_figures(da, dev_a)
    sb, sites_b = side_figures(db, dev_b)
    empty = {"bytes_at_peak": 0, "allocs": 0, "bytes_requested": 0, "largest_bytes": 0}
    rows = []
    for site in set(sites_a) | set(sites_b):
        a, b = sites_a.get(site, empty), sites_b.get(site, empty)
        only_in = "a" if site not in sites_b else "b" if site not in sites_a else None
        rows.append({"frames": frame_text(site), "a": a, "b": b,
                     "delta_at_peak_bytes": b["bytes_at_peak"] - a["bytes_at_peak"], "only_in": only_in})
    rows.sort(key=lambda r: (-abs(r["delta_at_peak_bytes"]),
                             -max(r["a"]["bytes_at_peak"], r["b"]["bytes_at_peak"]), r["frames"]))
    return {
        "device_a": dev_a,
        "device_b": dev_b,
        "a": sa,
        "b": sb,
        "call_sites_total": len(rows),
        "call_sites_only_a": sum(r["only_in"] == "a" for r in rows),
        "call_sites_only_b": sum(r["only_in"] == "b" for r in rows),
        "call_sites_with_nonzero_delta": sum(r["delta_at_peak_bytes"] != 0 for r in rows),
        "sum_of_deltas_bytes": sum(r["delta_at_peak_bytes"] for r in rows),
        "top": rows[:10],
        "_all": rows,  # removed before printing; kept for callers importing this module
    }


def traced_devices(data):
    return [i for i, t in enumerate(data.get("device_traces", [])) if t]


def diff(path_a, path_b, device_a=None, device_b=None):
    da, db = load(path_a), load(path_b)
    if device_a is None:
        pairs = list(zip(traced_devices(da), traced_devices(db)))
    else:
        pairs = [(device_a, device_b)]
    return {"a": path_a, "b": path_b, "devices": [diff_devices(da, x, db, y) for x, y in pairs]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--device-a", type=int)
    ap.add_argument("--device-b", type=int)
    args = ap.parse_args()
    if (args.device_a is None) != (args.device_b is None):
        ap.error("--device-a and --device-b go together")
    out = diff(args.a, args.b, args.device_a, args.device_b)
    for d in out["devices"]:
        del d["_all"]
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
