#!/usr/bin/env python3
"""Figures of snapshot files computed with Python's own pickle module, independently of memsight.

The expected values in crates/memsight-core/tests/fixtures.rs come from this script:
    python3 scripts/fixture_figures.py ../shared/fixtures/snapshots/*

Semantics follow ../shared/docs/snapshot-format.md: reserved = sum of segment sizes; allocated =
alloc adds, free_requested subtracts (free_completed when the block had no free_requested);
active = alloc adds, free_completed subtracts; final blocks count by requested_size. The state
before the first event is the final state minus every event's change.
"""
import collections
import json
import pickle
import sys


def figures(path):
    with open(path, "rb") as f:
        data = pickle.load(f)
    if isinstance(data, list):
        data = {"segments": data, "device_traces": []}
    traces = data.get("device_traces", [])
    segs = data.get("segments", [])
    ordinals = sorted({i for i, t in enumerate(traces) if t} | {s.get("device", 0) for s in segs})
    out = []
    for dev in ordinals:
        trace = traces[dev] if dev < len(traces) else []
        dsegs = [s for s in segs if s.get("device", 0) == dev]
        blocks = [b for s in dsegs for b in s["blocks"]]
        req = lambda b: b.get("requested_size", b["size"])
        final = {
            "reserved": sum(s["total_size"] for s in dsegs),
            "allocated": sum(req(b) for b in blocks if b["state"] == "active_allocated"),
            "active": sum(req(b) for b in blocks if b["state"] in ("active_allocated", "active_pending_free")),
        }
        has_free_requested = any(e["action"] == "free_requested" for e in trace)
        requested = {}  # addr -> True once free_requested seen since alloc
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
                # No alloc in the trace: its free_requested (if the file has them) came earlier.
                if seen is False or (seen is None and not has_free_requested):
                    d["allocated"] = -size
            elif a in ("segment_alloc", "segment_map"):
                d["reserved"] = size
            elif a in ("segment_free", "segment_unmap"):
                d["reserved"] = -size
            deltas.append(d)
        cur = {k: final[k] - sum(d[k] for d in deltas) for k in final}
        peak = dict(cur)
        for d in deltas:
            for k in cur:
                cur[k] += d[k]
                peak[k] = max(peak[k], cur[k])
        out.append({
            "device": dev,
            "trace_events": len(trace),
            "actions": dict(sorted(collections.Counter(e["action"] for e in trace).items())),
            "segments": len(dsegs),
            "blocks": len(blocks),
            "reserved_bytes_final": final["reserved"],
            "allocated_bytes_final": final["allocated"],
            "active_bytes_final": final["active"],
            "peak_reserved_bytes": peak["reserved"],
            "peak_allocated_bytes": peak["allocated"],
            "peak_active_bytes": peak["active"],
        })
    return out


if __name__ == "__main__":
    for path in sys.argv[1:]:
        print(path)
        print(json.dumps(figures(path), indent=1))
