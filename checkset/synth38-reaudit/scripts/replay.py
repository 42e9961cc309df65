"""File-only replay of one device trace (imports nothing of the generator).

Rebuilds the state before the first event by undoing the trace from the final segments, replays
forwards, checks consistency, and gives the running figures.  Used by check.py."""


class Replay:
    def __init__(self, d, dev):
        self.d = d
        self.dev = dev
        self.T = d["device_traces"][dev] if dev < len(d["device_traces"]) else []
        self.segs = [s for s in d["segments"] if s["device"] == dev]
        self.problems = []
        self._run()

    def bad(self, m):
        self.problems.append("dev %d: %s" % (self.dev, m))

    def _run(self):
        T, segs = self.T, self.segs
        fin = {}
        self.pending_final = {}
        for s in segs:
            a = s["address"]
            alloc_sz = 0
            for b in s["blocks"]:
                if b["address"] != a:
                    self.bad("blocks do not tile segment %x" % s["address"])
                a += b["size"]
                if b["state"] == "active_allocated":
                    fin[b["address"]] = b
                elif b["state"] == "active_pending_free":
                    self.pending_final[b["address"]] = b
                if b["state"] == "active_allocated":
                    alloc_sz += b["size"]
            if a != s["address"] + s["total_size"]:
                self.bad("blocks do not fill segment %x" % s["address"])
            if alloc_sz != s["allocated_size"]:
                self.bad("allocated_size of segment %x" % s["address"])
        self.final_blocks = fin
        seg0 = {s["address"]: s["total_size"] for s in segs}
        for e in reversed(T):
            if e["action"] == "segment_alloc":
                if e["addr"] not in seg0:
                    self.bad("segment_alloc of a segment missing at the end")
                seg0.pop(e["addr"], None)
            elif e["action"] == "segment_free":
                seg0[e["addr"]] = e["size"]
        live = {}
        ghosts = {}
        first_free = set()
        for i, e in enumerate(T):
            a = e["action"]
            if a == "alloc":
                live[e["addr"]] = i
            elif a == "free_requested":
                if e["addr"] in live:
                    live.pop(e["addr"])
                elif e["addr"] not in ghosts:
                    ghosts[e["addr"]] = (e["size"], None)
            elif a == "free_completed" and i == 0 and e["addr"] not in live:
                first_free.add(e["addr"])
        for addr, b in fin.items():
            if addr not in live:
                ghosts[addr] = (b["requested_size"], b["frames"])
        self.ghosts = ghosts
        seg = dict(seg0)
        cur = {addr: (sz, -1) for addr, (sz, fr) in ghosts.items()}
        alloc_b = sum(v[0] for v in cur.values())
        res = sum(seg.values())
        self.allocated_at_start = alloc_b
        self.blocks_at_start = len(cur)
        self.reserved_at_start = res
        n = len(T)
        self.alloc_curve = [0] * n
        self.res_curve = [0] * n
        self.alloc_index = {}        # alloc event index -> free_requested index (or None)
        self.free_of = {}
        pending = set()
        self.oom = None
        for i, e in enumerate(T):
            a = e["action"]
            if a == "alloc":
                if e["addr"] in cur:
                    self.bad("ev %d: alloc on a live block" % i)
                if not any(sa <= e["addr"] < sa + sz for sa, sz in seg.items()):
                    self.bad("ev %d: alloc outside every segment" % i)
                cur[e["addr"]] = (e["size"], i)
                self.alloc_index[i] = None
                alloc_b += e["size"]
            elif a == "free_requested":
                if e["addr"] not in cur:
                    self.bad("ev %d: free of no live block" % i)
                else:
                    sz, ai = cur.pop(e["addr"])
                    if sz != e["size"]:
                        self.bad("ev %d: free size %d != %d" % (i, e["size"], sz))
                    if ai >= 0:
                        self.alloc_index[ai] = i
                        self.free_of[i] = ai
                    alloc_b -= sz
                    pending.add(e["addr"])
            elif a == "free_completed":
                if e["addr"] in pending:
                    pending.discard(e["addr"])
                elif not (i == 0 and e["addr"] in first_free):
                    self.bad("ev %d: free_completed without free_requested" % i)
            elif a == "segment_alloc":
                if e["addr"] in seg:
                    self.bad("ev %d: segment_alloc of a live segment" % i)
                seg[e["addr"]] = e["size"]
                res += e["size"]
            elif a == "segment_free":
                if seg.pop(e["addr"], None) is None:
                    self.bad("ev %d: segment_free of an unknown segment" % i)
                res -= e["size"]
            elif a == "oom":
                self.oom = dict(index=i, size=e["size"], device_free=e["device_free"],
                                allocated=alloc_b, reserved=res)
            self.alloc_curve[i] = alloc_b
            self.res_curve[i] = res
        if pending != set(self.pending_final):
            self.bad("%d free_requested without free_completed, %d blocks pending at the end" % (len(pending), len(self.pending_final)))
        self.pending_end = pending
        end = {k: v[0] for k, v in cur.items()}
        want = {k: b["requested_size"] for k, b in fin.items()}
        if end != want:
            self.bad("live blocks after replay (%d) differ from the final segments' (%d)" % (len(end), len(want)))
        if seg != {s["address"]: s["total_size"] for s in segs}:
            self.bad("segments after replay differ from the final segments")
        self.live_end = cur
        self.final_allocated = alloc_b
        self.final_reserved = res
        if n:
            pk = max(range(n), key=lambda i: (self.alloc_curve[i], -i))
            self.peak_index = pk
            self.peak_allocated = self.alloc_curve[pk]
            self.reserved_at_peak = self.res_curve[pk]
            self.peak_time_us = T[pk].get("time_us")
            self.max_reserved = max(max(self.res_curve), self.reserved_at_start)
        else:
            self.peak_index = None
            self.peak_allocated = self.final_allocated
            self.reserved_at_peak = self.final_reserved
            self.peak_time_us = None
            self.max_reserved = self.final_reserved

    def live_blocks_at(self, idx):
        """(size, frames, alloc_index) of every block live right after event idx."""
        T = self.T
        out = []
        freed_ghost = set()
        for i in range(0, idx + 1):
            e = T[i]
            if e["action"] == "free_requested" and i not in self.free_of:
                freed_ghost.add(e["addr"])
        for addr, (sz, fr) in self.ghosts.items():
            if addr not in freed_ghost:
                out.append((sz, fr if fr is not None else [], -1))
        for ai, fi in self.alloc_index.items():
            if ai <= idx and (fi is None or fi > idx):
                out.append((T[ai]["size"], T[ai].get("frames", []), ai))
        return out
