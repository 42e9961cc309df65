"""Replay the expandable-segment fixtures (torch_npu, expandable_segments:True) through sim.Allocator
with expandable=True.  The pre-trace state is rebuilt from the file alone: the final mapped runs,
minus the trace's segment_map, plus its segment_unmap; live blocks as in validate.py.  Every
allocation address, every segment_map / segment_unmap (address and size) and the final pool are
compared.  Runs of segment_unmap not caused by an allocation are replayed as empty_cache()."""
import os
import pickle
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sim  # noqa: E402

FIX = "/work/shared/fixtures/snapshots"


def replay(name, npu=True, dev=0):
    d = pickle.load(open(os.path.join(FIX, name), "rb"))
    T = d["device_traces"][dev]
    fsegs = [s for s in d["segments"] if s["device"] == dev]
    A = sim.Allocator(device=dev, npu=npu, capacity=1 << 50, time_us=False, expandable=True)
    A.stream = T[0]["stream"]
    out = {}
    for small in (True, False):
        page = sim.SMALL_BUFFER if small else sim.LARGE_BUFFER
        runs = [s for s in fsegs if (s["segment_type"] == "small") == small]
        base = min(s["address"] for s in runs)
        pages = set()
        for s in runs:
            for p in range(s["address"], s["address"] + s["total_size"], page):
                pages.add(p)
        for e in reversed(T):
            if e["action"] == "segment_map" and (e["size"] % page == 0) and (e["addr"] - base) % page == 0 and \
                    ((e["addr"] in pages) or (e["size"] == page and e["addr"] in pages)):
                if all(p in pages for p in range(e["addr"], e["addr"] + e["size"], page)):
                    for p in range(e["addr"], e["addr"] + e["size"], page):
                        pages.discard(p)
            elif e["action"] == "segment_unmap" and (e["addr"] - base) % page == 0 and base <= e["addr"] < base + (1 << 40):
                if not any(p in pages for p in range(e["addr"], e["addr"] + e["size"], page)) and \
                        ((e["addr"] - base) // page) < (1 << 30):
                    if (e["size"] % page == 0) and ((small and e["size"] % sim.LARGE_BUFFER != 0) or not small or True):
                        pass
        out[small] = (base, page, pages)
    # which pool a map/unmap event belongs to: the address range of the pool
    def pool_of(addr):
        bs = sorted(((v[0], k) for k, v in out.items()), reverse=True)
        for b, k in bs:
            if addr >= b:
                return k
        return None
    # redo the undo properly, with pool assignment
    pages = {k: set() for k in out}
    for s in fsegs:
        small = s["segment_type"] == "small"
        pg = out[small][1]
        for p in range(s["address"], s["address"] + s["total_size"], pg):
            pages[small].add(p)
    for e in reversed(T):
        if e["action"] in ("segment_map", "segment_unmap"):
            k = pool_of(e["addr"])
            pg = out[k][1]
            rng = range(e["addr"], e["addr"] + e["size"], pg)
            if e["action"] == "segment_map":
                for p in rng:
                    pages[k].discard(p)
            else:
                for p in rng:
                    pages[k].add(p)
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
    for s in fsegs:
        for b in s["blocks"]:
            if b["state"] != "inactive" and b["address"] not in live:
                pre[b["address"]] = (b["requested_size"], b["size"])
    for small in (True, False):
        base, pg, _ = out[small]
        A.exp_va[small] = base
        seg = A._exp_get(small)
        seg.blocks = []
        mapped = sorted(pages[small])
        top = (mapped[-1] + pg) if mapped else base
        cur = base
        # walk page runs
        i = 0
        while i < len(mapped):
            j = i
            while j + 1 < len(mapped) and mapped[j + 1] == mapped[j] + pg:
                j += 1
            rs, re_ = mapped[i], mapped[j] + pg
            if rs > cur:
                u = sim.Block(cur, rs - cur, seg)
                u.state = "unmapped"
                seg.blocks.append(u)
            A.reserved += re_ - rs
            inside = sorted(a for a in pre if rs <= a < re_)
            c = rs
            for k, a in enumerate(inside):
                req, rsz = pre[a]
                if rsz is None:
                    rsz = A.round_size(req)
                    nxt = inside[k + 1] if k + 1 < len(inside) else re_
                    rem = nxt - a - rsz
                    if rem < 512:   # expandable: every pool splits off remainders of 512 B and more
                        rsz = nxt - a
                if a > c:
                    fb = sim.Block(c, a - c, seg)
                    seg.blocks.append(fb)
                    A.blocks[c] = fb
                    A._add_free(fb)
                b = sim.Block(a, rsz, seg)
                b.state = "active_allocated"
                b.req = req
                seg.blocks.append(b)
                A.blocks[a] = b
                c = a + rsz
            if c < re_:
                fb = sim.Block(c, re_ - c, seg)
                seg.blocks.append(fb)
                A.blocks[c] = fb
                A._add_free(fb)
            cur = re_
            i = j + 1
        u = sim.Block(cur, base + seg.size - cur, seg)
        u.state = "unmapped"
        seg.blocks.append(u)
    n_alloc = ok_alloc = 0
    want_maps = [(e["action"], e["addr"], e["size"]) for e in T if e["action"] in ("segment_map", "segment_unmap")]
    A.trace = []
    for i, e in enumerate(T):
        a = e["action"]
        if a == "alloc":
            n_alloc += 1
            b = A.malloc(e["size"], [])
            ok_alloc += b.addr == e["addr"]
        elif a == "free_completed":
            b = A.blocks.get(e["addr"])
            if b is not None and b.state == "active_allocated":
                A.free(b)
        elif a == "segment_unmap" and (i == 0 or T[i - 1]["action"] != "segment_unmap"):
            A.empty_cache([])
    got_maps = [(e["action"], e["addr"], e["size"]) for e in A.trace if e["action"] in ("segment_map", "segment_unmap")]
    same_maps = sum(1 for x, y in zip(want_maps, got_maps) if x == y)
    mine = {s["address"]: s for s in A.segment_dicts()}
    same = 0
    for s in fsegs:
        m = mine.get(s["address"])
        if m and m["total_size"] == s["total_size"] and \
                [(b["address"], b["size"], b["state"]) for b in m["blocks"]] == \
                [(b["address"], b["size"], b["state"]) for b in s["blocks"]]:
            same += 1
    return dict(file=name, allocs=n_alloc, addr_ok=ok_alloc, map_events=len(want_maps), map_events_sim=len(got_maps),
                map_events_same_in_order=same_maps, final_segments=len(fsegs), final_same=same, final_sim=len(mine))


if __name__ == "__main__":
    for name in ("npu_snapshot_expandable.pkl", "npu_snapshot_with_empty_cache_expandable.pkl"):
        print(replay(name))
    for dev in (0, 1, 2):
        print(dev, replay("cuda_4gpu_expandable_oom.pickle", npu=False, dev=dev))
