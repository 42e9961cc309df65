#!/usr/bin/env python3
"""What the detectors should find in real snapshots, read with Python's pickle, independently of memsight.

The expected findings in crates/memsight-core/tests/fixtures.rs (detectors_on_real_files) come from:
    python3 scripts/detector_figures.py ../shared/fixtures/snapshots/*

Per busiest device it prints
- fragmentation: every segment_alloc made while the free bytes cached in the same stream and pool
  (small = 2 MiB segments, requests up to 1 MiB) covered its request (the first alloc inside the new
  segment within 8 events, padded by 32 bytes where the file names torch_npu, rounded up to 512
  bytes): count, first / last event, segment bytes. A block takes its rounded request, or in the
  large pool the whole free block it starts (up to the next live block or the segment's end) where
  cutting would leave at most 1 MiB: CUDACachingAllocator's should_split (remaining > kSmallSize);
- never freed: blocks allocated in the trace and never freed, grouped by call stack, for stacks with
  3 or more such blocks: count, bytes, first / last alloc event, innermost frame;
- segment_free bursts: runs of 3+ consecutive segment_free / segment_unmap;
- the largest single request.
"""
import collections
import pickle
import sys

SMALL_SEGMENT = 2 << 20
SMALL_REQUEST = 1 << 20


PAD = 0


def rounded(n):
    n += PAD
    return max(1, -(-n // 512)) * 512 if n else 512


def stack_key(e):
    return tuple((f["filename"], f["line"], f["name"]) for f in (e.get("frames") or []))


def main(path):
    global PAD
    with open(path, "rb") as f:
        raw = f.read()
    PAD = 32 if b"torch_npu" in raw else 0
    data = pickle.loads(raw)
    if isinstance(data, list):
        print(f"{path}: legacy list, no trace")
        return
    traces = data.get("device_traces", [])
    dev = max(range(len(traces)), key=lambda i: len(traces[i]), default=None)
    if dev is None or not traces[dev]:
        print(f"{path}: no trace")
        return
    trace = traces[dev]
    segs = [s for s in data.get("segments", []) if s.get("device", 0) == dev]
    print(f"{path}: device {dev}, {len(trace)} events")

    # State before the first event: the final state with every event undone, newest first.
    segments = {s["address"]: (s["total_size"], s["stream"]) for s in segs}
    live = {}
    for s in segs:
        for b in s["blocks"]:
            if b["state"] in ("active_allocated", "active_pending_free"):
                live[b["address"]] = b.get("requested_size", b["size"])
    for e in reversed(trace):
        a = e["action"]
        if a == "segment_alloc":
            segments.pop(e["addr"], None)
        elif a == "segment_free":
            segments[e["addr"]] = (e["size"], e["stream"])
        elif a == "alloc":
            live.pop(e["addr"], None)
        elif a == "free_completed":
            live[e["addr"]] = e["size"]

    # Forward: free bytes per (stream, small pool).
    mapped = any(e["action"] in ("segment_map", "segment_unmap") for e in trace)
    free = collections.Counter()
    starts = sorted(segments)

    def group_of(addr):
        import bisect
        i = bisect.bisect_right(starts, addr) - 1
        if i < 0:
            return None
        start = starts[i]
        size, stream = segments[start]
        return (stream, size == SMALL_SEGMENT) if addr < start + size else None

    def block_size(addr, need, live_sizes):
        # The block the allocator hands out at addr (see the module doc).
        i = bisect.bisect_right(starts, addr) - 1
        start = starts[i]
        size, _ = segments[start]
        if size == SMALL_SEGMENT:
            return need
        later = [a for a in live_sizes if addr < a < start + size]
        end = min(later) if later else start + size
        return end - addr if 0 <= end - addr - need <= SMALL_REQUEST else need

    import bisect
    sizes = {}
    for start, (size, stream) in segments.items():
        free[(stream, size == SMALL_SEGMENT)] += size
    for addr, req in live.items():
        g = group_of(addr)
        if g:
            sizes[addr] = block_size(addr, rounded(req), live)
            free[g] -= sizes[addr]
    growth = []
    for i, e in enumerate(trace):
        a, addr, size = e["action"], e.get("addr", 0), e["size"]
        if a == "segment_alloc":
            g = (e["stream"], size == SMALL_SEGMENT)
            for j in range(i + 1, min(len(trace), i + 9)):
                r = trace[j]
                if r["action"] == "alloc" and addr <= r["addr"] < addr + size:
                    need = rounded(r["size"])
                    if (need <= SMALL_REQUEST) == g[1] and max(free[g], 0) >= need:
                        growth.append((i, size))
                    break
            segments[addr] = (size, e["stream"])
            starts = sorted(segments)
            free[g] += size
        elif a == "segment_free":
            if addr in segments:
                s, stream = segments.pop(addr)
                starts = sorted(segments)
                free[(stream, s == SMALL_SEGMENT)] -= s
        elif a == "alloc":
            g = group_of(addr)
            if g:
                sizes[addr] = block_size(addr, rounded(size), sizes)
                free[g] -= sizes[addr]
        elif a == "free_completed":
            g = group_of(addr)
            if g:
                free[g] += sizes.pop(addr, rounded(size))
    if mapped:
        print("  fragmentation: expandable segments, not applicable")
    elif growth:
        print(f"  fragmentation: {len(growth)} segment_allocs, events {growth[0][0]}-{growth[-1][0]}, "
              f"{sum(s for _, s in growth)} segment bytes")
    else:
        print("  fragmentation: none")

    # Never freed, by stack.
    open_blocks = {}
    for i, e in enumerate(trace):
        if e["action"] == "alloc":
            open_blocks[e["addr"]] = (i, e["size"], stack_key(e))
        elif e["action"] in ("free_requested", "free_completed"):
            open_blocks.pop(e["addr"], None)
    by_stack = collections.defaultdict(list)
    for i, size, key in open_blocks.values():
        by_stack[key].append((i, size))
    for key, blocks in sorted(by_stack.items(), key=lambda kv: -sum(s for _, s in kv[1])):
        if len(blocks) >= 3 and key:
            events = sorted(i for i, _ in blocks)
            top = next((f for f in key if f[0].endswith(".py")), key[0])
            print(f"  never freed: {len(blocks)} blocks, {sum(s for _, s in blocks)} bytes, "
                  f"events {events[0]}-{events[-1]}, at {top[2]} ({top[0]}:{top[1]})")

    # Segment release bursts.
    run = []
    for i, e in enumerate(trace + [{"action": "end"}]):
        if e["action"] in ("segment_free", "segment_unmap"):
            run.append(i)
            continue
        if len(run) >= 3:
            print(f"  burst: {len(run)} segments released, events {run[0]}-{run[-1]}")
        run = []

    allocs = [(e["size"], i) for i, e in enumerate(trace) if e["action"] == "alloc"]
    if allocs:
        size, i = max(allocs)
        print(f"  largest request: {size} bytes at event {i}")


if __name__ == "__main__":
    for p in sys.argv[1:]:
        main(p)
