"""Replay the alloc/free sequence of real fixture traces through sim.Allocator.

The pre-trace state is rebuilt from the file alone (final segments, undo segment events, blocks
freed in the trace without their alloc are live at the start).  Segment addresses come from the
trace (the driver's choice); everything else (which free block serves a request, whether a new
segment is needed and how big, splitting) is the simulator's.  Prints, per fixture, how many
allocation addresses and segment_allocs the simulator reproduces, and whether its final pool
matches the file's segments block for block.
"""
import os
import pickle
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sim  # noqa: E402

FIX = "/work/shared/fixtures/snapshots"


def replay(name, npu, dev=0):
    d = pickle.load(open(os.path.join(FIX, name), "rb"))
    T = d["device_traces"][dev]
    fsegs = {s["address"]: s for s in d["segments"] if s["device"] == dev}
    # segments existing before the trace
    start = {a: (s["total_size"], s["segment_type"] == "small") for a, s in fsegs.items()}
    for e in reversed(T):
        if e["action"] == "segment_alloc":
            start.pop(e["addr"], None)
        elif e["action"] == "segment_free":
            start[e["addr"]] = (e["size"], e["size"] == sim.SMALL_BUFFER)
    # blocks live before the trace
    live, pre = {}, {}
    for e in T:
        a = e["action"]
        if a == "alloc":
            live[e["addr"]] = e["size"]
        elif a == "free_completed":
            if e["addr"] in live:
                del live[e["addr"]]
            elif e["addr"] not in pre:
                pre[e["addr"]] = (e["size"], None)
    for s in fsegs.values():
        for b in s["blocks"]:
            if b["state"] != "inactive" and b["address"] not in live:
                pre[b["address"]] = (b["requested_size"], b["size"])
    A = sim.Allocator(device=dev, npu=npu, capacity=1 << 50, time_us=False)
    A.stream = T[0]["stream"] if T else 0
    for sa in sorted(start):
        size, small = start[sa]
        seg = sim.Segment(sa, size, small, A.stream, [])
        A.segments[sa] = seg
        A.reserved += size
        inside = sorted(a for a in pre if sa <= a < sa + size)
        cur = sa
        for i, a in enumerate(inside):
            req, rsz = pre[a]
            if rsz is None:
                rsz = A.round_size(req)
                nxt = inside[i + 1] if i + 1 < len(inside) else sa + size
                rem = nxt - a - rsz
                if (small and rem < 512) or (not small and rem <= sim.SMALL_SIZE):
                    rsz = nxt - a
            if a > cur:
                fb = sim.Block(cur, a - cur, seg)
                seg.blocks.append(fb)
                A.blocks[cur] = fb
                A._add_free(fb)
            b = sim.Block(a, rsz, seg)
            b.state = "active_allocated"
            b.req = req
            seg.blocks.append(b)
            A.blocks[a] = b
            cur = a + rsz
        if cur < sa + size:
            fb = sim.Block(cur, sa + size - cur, seg)
            seg.blocks.append(fb)
            A.blocks[cur] = fb
            A._add_free(fb)
    pending = []

    def driver(size):
        if not pending:
            raise KeyError("simulator wants a segment the trace did not make")
        a, s = pending.pop(0)
        if s != size:
            raise KeyError("segment size %d != %d" % (size, s))
        return a

    A.driver = driver
    n_alloc = ok_alloc = n_seg = ok_seg = 0
    seg_err = 0
    for e in T:
        a = e["action"]
        if a == "segment_alloc":
            n_seg += 1
            pending.append((e["addr"], e["size"]))
        elif a == "alloc":
            n_alloc += 1
            before = len(pending)
            try:
                b = A.malloc(e["size"], [])
            except KeyError:
                seg_err += 1
                continue
            if before and not pending:
                ok_seg += 1
            elif before and pending:
                pending.clear()
            if b.addr == e["addr"]:
                ok_alloc += 1
        elif a == "free_completed":
            b = A.blocks.get(e["addr"])
            if b is not None and b.state == "active_allocated":
                A.free(b)
        elif a == "segment_free":
            seg = A.segments.get(e["addr"])
            if seg is not None and len(seg.blocks) == 1 and seg.blocks[0].state == "inactive":
                A._release_segment(seg, [])
    # final pool comparison
    same = 0
    mine = {s["address"]: s for s in A.segment_dicts()}
    for addr, s in fsegs.items():
        m = mine.get(addr)
        if m and m["total_size"] == s["total_size"] and \
                [(b["address"], b["size"], b["state"]) for b in m["blocks"]] == \
                [(b["address"], b["size"], b["state"]) for b in s["blocks"]]:
            same += 1
    return dict(file=name, allocs=n_alloc, addr_ok=ok_alloc, segment_allocs=n_seg,
                seg_ok=ok_seg, final_segments=len(fsegs), final_same=same,
                final_sim=len(mine))


if __name__ == "__main__":
    runs = [("cuda_ctx256_fullstep.pickle", False), ("npu_snapshot_with_empty_cache.pkl", True),
            ("npu_snapshot_1768383987920985470.pkl", True), ("cuda_hanmin.pickle", False),
            ("cuda_medium_128_inference.pickle", False),
            ("cuda_llama_retry_stalls.pickle", False), ("cuda_2023_no_time.pickle", False)]
    for name, npu in runs:
        print(replay(name, npu))
