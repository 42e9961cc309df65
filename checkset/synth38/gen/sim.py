"""A model of PyTorch's CUDACachingAllocator (and torch_npu's NPUCachingAllocator) that writes
snapshot dicts in the layout of torch.cuda.memory._snapshot().  Standard library only.

Modelled: 512-byte rounding (torch_npu: +32 bytes first), small pool (<= 1 MiB, 2 MiB segments),
large pool (20 MiB segments for requests below 10 MiB, else rounded up to 2 MiB), best fit by
(size, address) within pool and stream, block splitting (small: remainder >= 512 B; large:
remainder > 1 MiB), merging of free neighbours, cached free blocks, segment_alloc / segment_free,
empty_cache (frees every fully-free segment of the default pool), CUDA graph private pools
(segments tagged with a pool id, searched only while that pool is current, never released by
empty_cache or the retry path), the free-all-cached-and-retry path on a failed
cudaMalloc, oom events, free_requested / free_completed pairs, record_stream-style pending frees,
a per-process memory cap (set_per_process_memory_fraction) and a ring buffer applied when written.
Added for batch 36: max_split_size (oversize blocks are never split, a request below the limit never
takes an oversize block, a request at or above it takes a cached block at most 20 MiB larger, and the
release-available-oversize-blocks step before the free-everything retry), and expandable segments
(one virtual range per pool and stream, mapped in 2 MiB / 20 MiB pages with segment_map, unmapped by
empty_cache and the retry path with segment_unmap; each mapped run written as one segment).
"""
import bisect

KB = 1024
MB = 1024 * 1024
GB = 1024 * MB
SMALL_SIZE = 1 * MB
SMALL_BUFFER = 2 * MB
LARGE_BUFFER = 20 * MB
MIN_LARGE_ALLOC = 10 * MB
ROUND_LARGE = 2 * MB


class OOMError(Exception):
    def __init__(self, size, free):
        super().__init__(size)
        self.size = size
        self.free = free


class Block:
    __slots__ = ("addr", "size", "req", "state", "frames", "seg", "handle", "cat")

    def __init__(self, addr, size, seg):
        self.addr = addr
        self.size = size
        self.req = 0
        self.state = "inactive"
        self.frames = []
        self.seg = seg
        self.handle = None
        self.cat = None


class Segment:
    __slots__ = ("addr", "size", "small", "stream", "frames", "blocks", "expandable", "pool")

    def __init__(self, addr, size, small, stream, frames, expandable=False, pool=(0, 0)):
        self.addr = addr
        self.size = size
        self.small = small
        self.stream = stream
        self.frames = frames
        self.blocks = []
        self.expandable = expandable
        self.pool = pool


class Allocator:
    def __init__(self, device=0, stream=0, npu=False, base=0x7F2A00000000, capacity=80 * GB,
                 other_usage=0, mem_limit=None, clock=None, time_us=True, extra_keys=False,
                 seg_frames=True, driver=None, max_split=None, expandable=False):
        self.device = device
        self.stream = stream
        self.npu = npu
        self.capacity = capacity
        self.other = other_usage
        self.limit = mem_limit          # per-process cap (bytes) from set_per_process_memory_fraction
        self.clock = clock
        self.use_time = time_us
        self.extra = extra_keys
        self.seg_frames = seg_frames
        self.driver = driver            # optional callable(size) -> address (validation)
        self.segments = {}              # addr -> Segment
        self.free_small = []            # sorted (size, addr, stream) of inactive blocks
        self.free_large = []
        self.blocks = {}                # addr -> Block (all blocks)
        self.trace = []
        self.reserved = 0
        self.allocated = 0
        self.va_next = base
        self.va_free = []               # freed address ranges (addr, size), reused first fit
        self.n_handle = 0
        self.ev_cat = {}                # id(alloc event) -> category (generator bookkeeping)
        self.stalls = []                # (trace index, segment_frees, bytes released, request)
        self.free_us_per_gb = 0         # modelled cudaFree cost (advances the clock per segment_free)
        self.pool = (0, 0)              # current pool: (0, 0) default, (capture_id, 0) a graph's private pool
        self.max_split = max_split      # PYTORCH_CUDA_ALLOC_CONF max_split_size_mb (bytes) or None
        self.expandable = expandable    # expandable_segments:True
        self.exp = {}                   # (small, stream) -> ExpSeg
        self.exp_va = {True: None, False: None}   # optional fixed virtual bases (validation)

    # ------------------------------------------------------------------ helpers
    def round_size(self, size):
        if self.npu:
            size = size + 32
        if size < 512:
            return 512
        return (size + 511) // 512 * 512

    @staticmethod
    def allocation_size(rounded):
        if rounded <= SMALL_SIZE:
            return SMALL_BUFFER
        if rounded < MIN_LARGE_ALLOC:
            return LARGE_BUFFER
        return (rounded + ROUND_LARGE - 1) // ROUND_LARGE * ROUND_LARGE

    def _now(self):
        return self.clock.tick() if self.clock is not None else None

    def _event(self, action, addr, size, frames, extra=None, stream=None):
        e = {"action": action, "addr": addr, "size": size,
             "stream": self.stream if stream is None else stream}
        if extra:
            e.update(extra)
        if self.use_time:
            e["time_us"] = self._now()
        if self.extra:
            e["compile_context"] = "N/A"
            e["user_metadata"] = ""
        e["frames"] = frames
        self.trace.append(e)
        return e

    def _freelist(self, small):
        return self.free_small if small else self.free_large

    def _add_free(self, b):
        bisect.insort(self._freelist(b.seg.small), (b.size, b.addr, (b.seg.stream, b.seg.pool)))

    def _del_free(self, b):
        fl = self._freelist(b.seg.small)
        i = bisect.bisect_left(fl, (b.size, b.addr, (b.seg.stream, b.seg.pool)))
        assert fl[i][1] == b.addr
        del fl[i]

    def _va_alloc(self, size):
        if self.driver is not None:
            return self.driver(size)
        best = None
        for i, (a, s) in enumerate(self.va_free):
            if s >= size and (best is None or a < self.va_free[best][0]):
                best = i
        if best is not None:
            a, s = self.va_free.pop(best)
            if s > size:
                self.va_free.append((a + size, s - size))
            return a
        a = self.va_next
        self.va_next += size
        return a

    def device_free(self):
        return self.capacity - self.other - self.reserved

    def _cuda_malloc(self, size):
        if self.reserved + size + self.other > self.capacity:
            return None
        if self.limit is not None and self.reserved + size > self.limit:
            return None
        return True

    # ------------------------------------------------------------------ segments
    def _new_segment(self, alloc_size, small, frames):
        if self._cuda_malloc(alloc_size) is None:
            return None
        addr = self._va_alloc(alloc_size)
        seg = Segment(addr, alloc_size, small, self.stream, frames if self.seg_frames else [],
                      pool=self.pool)
        b = Block(addr, alloc_size, seg)
        seg.blocks.append(b)
        self.segments[addr] = seg
        self.blocks[addr] = b
        self._add_free(b)
        self.reserved += alloc_size
        self._event("segment_alloc", addr, alloc_size, frames)
        return b

    def _release_segment(self, seg, frames):
        b = seg.blocks[0]
        self._del_free(b)
        del self.blocks[b.addr]
        del self.segments[seg.addr]
        self.reserved -= seg.size
        if self.driver is None:
            self.va_free.append((seg.addr, seg.size))
        if self.clock is not None and self.free_us_per_gb:
            self.clock.wait(800 + seg.size * self.free_us_per_gb // GB)
        self._event("segment_free", seg.addr, seg.size, frames, stream=seg.stream)

    def release_cached(self, frames, small=None):
        """Free every segment that is one inactive block (empty_cache and the retry path); in
        expandable segments unmap the whole pages inside every free block."""
        for key in sorted(self.exp):
            if small is None or key[0] == small:
                self._exp_unmap_free(self.exp[key], frames)
        for addr in sorted(self.segments):
            seg = self.segments[addr]
            if seg.expandable:
                continue
            if len(seg.blocks) == 1 and seg.blocks[0].state == "inactive" and seg.pool == (0, 0):
                if small is None or seg.small == small:
                    self._release_segment(seg, frames)

    def empty_cache(self, frames):
        self.release_cached(frames)

    # ------------------------------------------------------------------ malloc / free
    def _find_free(self, rounded, small):
        fl = self._freelist(small)
        i = bisect.bisect_left(fl, (rounded, 0, (0, (0, 0))))
        tag = (self.stream, self.pool)
        while i < len(fl):
            size, addr, t = fl[i]
            if t == tag:
                b = self.blocks[addr]
                if b.seg.expandable:
                    # get_free_block: a free block followed by unmapped space counts as the size it
                    # can expand to; walk on while the next candidate's expandable size is smaller
                    def xs(blk):
                        bl = blk.seg.blocks
                        k = bl.index(blk)
                        return blk.size + (bl[k + 1].size if k + 1 < len(bl) and bl[k + 1].state == "unmapped" else 0)
                    cur = xs(b)
                    j = i + 1
                    while j < len(fl):
                        s2, a2, t2 = fl[j]
                        if t2 != tag:
                            j += 1
                            continue
                        b2 = self.blocks[a2]
                        if not b2.seg.expandable:
                            break
                        x2 = xs(b2)
                        if x2 < cur:
                            b, cur = b2, x2
                            j += 1
                        else:
                            break
                    return b
                if self.max_split is not None and not small:
                    # get_free_block: only the best-fit candidate is considered
                    if rounded < self.max_split and size >= self.max_split:
                        return None
                    if rounded >= self.max_split and size >= rounded + LARGE_BUFFER:
                        return None
                return self.blocks[addr]
            i += 1
        return None

    def _release_available(self, rounded, small, frames):
        """release_available_cached_blocks (only with max_split_size): free one oversize cached
        segment big enough for the request, else oversize ones from the largest down."""
        if self.max_split is None or small:
            return False
        fl = self.free_large
        tag = (self.stream, self.pool)
        key = max(rounded, self.max_split)
        cands = [(s, a) for (s, a, t) in fl if t == tag and not self.blocks[a].seg.expandable]
        big = [(s, a) for (s, a) in cands if s >= key]
        if big:
            s, a = big[0]
            self._release_segment(self.blocks[a].seg, frames)
            return True
        total = 0
        for s, a in sorted(cands, reverse=True):
            if total >= key or s < self.max_split:
                break
            seg = self.blocks[a].seg
            if len(seg.blocks) != 1:
                break
            self._release_segment(seg, frames)
            total += s
        return total >= key

    def malloc(self, size, frames, stall_frames=None, cat=None):
        rounded = self.round_size(size)
        small = rounded <= SMALL_SIZE
        b = self._find_free(rounded, small)
        if b is None:
            asz = self.allocation_size(rounded)
            grow = (lambda: self._exp_alloc(rounded, small, frames)) if (self.expandable and self.pool == (0, 0)) \
                else (lambda: self._new_segment(asz, small, frames))
            b = grow()
            if b is None and self.max_split is not None:
                n0, r0 = len(self.trace), self.reserved
                if self._release_available(rounded, small, stall_frames if stall_frames is not None else frames):
                    self.stalls.append((n0, len(self.trace) - n0, r0 - self.reserved, size))
                    b = grow()
            if b is None:
                # free all cached blocks, then retry (the allocator stall)
                n0, r0 = len(self.trace), self.reserved
                self.release_cached(stall_frames if stall_frames is not None else frames)
                self.stalls.append((n0, len(self.trace) - n0, r0 - self.reserved, size))
                b = grow()
                if b is None:
                    free = self.device_free()
                    if self.limit is not None:
                        free = min(free, self.limit - self.reserved)
                    e = {"action": "oom", "device_free": free, "size": size, "stream": self.stream}
                    if self.use_time:
                        e["time_us"] = self._now()
                    if self.extra:
                        e["compile_context"] = "N/A"
                        e["user_metadata"] = ""
                    e["frames"] = frames
                    self.trace.append(e)
                    raise OOMError(size, free)
        self._del_free(b)
        remaining = b.size - rounded
        if (small or b.seg.expandable) and remaining >= 512 or \
                (not small and not b.seg.expandable and remaining > SMALL_SIZE and
                 (self.max_split is None or rounded < self.max_split)):
            seg = b.seg
            nb = Block(b.addr + rounded, remaining, seg)
            nb.req = 0
            b.size = rounded
            seg.blocks.insert(seg.blocks.index(b) + 1, nb)
            self.blocks[nb.addr] = nb
            self._add_free(nb)
        b.state = "active_allocated"
        b.req = size
        b.frames = frames
        self.n_handle += 1
        b.handle = self.n_handle
        self.allocated += size
        b.cat = cat
        ev = self._event("alloc", b.addr, size, frames)
        self.ev_cat[id(ev)] = cat
        return b

    def free(self, b, frames=None, pending=False):
        assert b.state == "active_allocated", (hex(b.addr), b.state)
        fr = frames if frames is not None else b.frames
        self._event("free_requested", b.addr, b.req, fr, stream=b.seg.stream)
        self.allocated -= b.req
        if pending:
            b.state = "active_pending_free"
            return
        self._event("free_completed", b.addr, b.req, fr, stream=b.seg.stream)
        self._complete(b)

    def complete_pending(self, b, frames=None):
        assert b.state == "active_pending_free"
        self._event("free_completed", b.addr, b.req, frames if frames is not None else b.frames,
                    stream=b.seg.stream)
        self._complete(b)

    def _complete(self, b):
        b.state = "inactive"
        b.frames = []
        seg = b.seg
        i = seg.blocks.index(b)
        # merge with next
        if i + 1 < len(seg.blocks) and seg.blocks[i + 1].state == "inactive":
            nb = seg.blocks[i + 1]
            self._del_free(nb)
            del self.blocks[nb.addr]
            b.size += nb.size
            del seg.blocks[i + 1]
        if i > 0 and seg.blocks[i - 1].state == "inactive":
            pb = seg.blocks[i - 1]
            self._del_free(pb)
            del self.blocks[b.addr]
            pb.size += b.size
            del seg.blocks[i]
            b = pb
        self._add_free(b)

    # ------------------------------------------------------------------ expandable segments
    def _exp_get(self, small):
        key = (small, self.stream)
        es = self.exp.get(key)
        if es is None:
            vsize = 1 << 40 if not small else 1 << 36
            base = self.exp_va[small]
            if base is None:
                base = self._va_alloc(vsize)
            seg = Segment(base, vsize, small, self.stream, [], expandable=True)
            u = Block(base, vsize, seg)
            u.state = "unmapped"
            seg.blocks.append(u)
            self.segments[base] = seg
            es = self.exp[key] = seg
        return es

    def _exp_map(self, u, size, frames):
        """Map the first `size` bytes (rounded up to pages) of unmapped block u."""
        seg = u.seg
        page = SMALL_BUFFER if seg.small else LARGE_BUFFER
        msz = min(u.size, (size + page - 1) // page * page)
        if self._cuda_malloc(msz) is None:
            return None
        i = seg.blocks.index(u)
        if msz < u.size:
            rest = Block(u.addr + msz, u.size - msz, seg)
            rest.state = "unmapped"
            seg.blocks.insert(i + 1, rest)
        u.size = msz
        u.state = "inactive"
        self.blocks[u.addr] = u
        self.reserved += msz
        self._event("segment_map", u.addr, msz, frames)
        # merge with free mapped neighbours
        b = u
        if i + 1 < len(seg.blocks) and seg.blocks[i + 1].state == "inactive":
            nb = seg.blocks[i + 1]
            self._del_free(nb)
            del self.blocks[nb.addr]
            b.size += nb.size
            del seg.blocks[i + 1]
        if i > 0 and seg.blocks[i - 1].state == "inactive":
            pb = seg.blocks[i - 1]
            self._del_free(pb)
            del self.blocks[b.addr]
            pb.size += b.size
            del seg.blocks[i]
            b = pb
        self._add_free(b)
        return b

    def _exp_alloc(self, rounded, small, frames):
        """try_allocate_expandable_block: the lowest unmapped range (with the free block before it)
        that has room, mapped page by page; returns a free block of at least `rounded`."""
        seg = self._exp_get(small)
        bl = seg.blocks
        for i, u in enumerate(bl):
            if u.state != "unmapped":
                continue
            j = i - 1 if i > 0 and bl[i - 1].state == "inactive" else i
            room, k = 0, j
            while room < rounded and k < len(bl) and bl[k].state in ("inactive", "unmapped"):
                room += bl[k].size
                k += 1
            if room < rounded:
                continue
            c = bl[j]
            if c.state == "unmapped":
                c = self._exp_map(c, rounded, frames)
                if c is None:
                    return None
            while c.size < rounded:
                nxt = bl[bl.index(c) + 1]
                m = self._exp_map(nxt, rounded - c.size, frames)
                if m is None:
                    return None
                c = m
            return c
        return None

    def _exp_unmap_free(self, seg, frames):
        page = SMALL_BUFFER if seg.small else LARGE_BUFFER
        for b in [x for x in seg.blocks if x.state == "inactive"]:
            start = (b.addr - seg.addr + page - 1) // page * page + seg.addr
            end = (b.addr + b.size - seg.addr) // page * page + seg.addr
            if end <= start:
                continue
            self._del_free(b)
            del self.blocks[b.addr]
            i = seg.blocks.index(b)
            new = []
            if start > b.addr:
                f = Block(b.addr, start - b.addr, seg)
                new.append(f)
            u = Block(start, end - start, seg)
            u.state = "unmapped"
            new.append(u)
            if b.addr + b.size > end:
                new.append(Block(end, b.addr + b.size - end, seg))
            seg.blocks[i:i + 1] = new
            for x in new:
                if x.state == "inactive":
                    self.blocks[x.addr] = x
                    self._add_free(x)
            self.reserved -= end - start
            if self.clock is not None and self.free_us_per_gb:
                self.clock.wait(300 + (end - start) * self.free_us_per_gb // GB)
            self._event("segment_unmap", start, end - start, frames, stream=seg.stream)
            # merge neighbouring unmapped ranges
            k = seg.blocks.index(u)
            if k + 1 < len(seg.blocks) and seg.blocks[k + 1].state == "unmapped":
                u.size += seg.blocks[k + 1].size
                del seg.blocks[k + 1]
            if k > 0 and seg.blocks[k - 1].state == "unmapped":
                seg.blocks[k - 1].size += u.size
                del seg.blocks[k]

    # ------------------------------------------------------------------ misc events
    def snapshot_event(self):
        active = sum(bl.req for s in self.segments.values() for bl in s.blocks
                     if bl.state != "inactive")
        e = {"action": "snapshot", "addr": 0, "size": active, "stream": self.stream}
        if self.use_time:
            e["time_us"] = self._now()
        if self.extra:
            e["compile_context"] = "N/A"
            e["user_metadata"] = ""
        e["frames"] = []
        self.trace.append(e)

    # ------------------------------------------------------------------ output
    def segment_dicts(self):
        out = []
        runs = []
        for addr in sorted(self.segments):
            s = self.segments[addr]
            if not s.expandable:
                runs.append((s, s.addr, s.size, s.blocks))
                continue
            cur = []
            for b in s.blocks + [None]:
                if b is None or b.state == "unmapped":
                    if cur:
                        runs.append((s, cur[0].addr, sum(x.size for x in cur), cur))
                    cur = []
                else:
                    cur.append(b)
        for s, saddr, ssize, sblocks in runs:
            blocks = []
            alloc_sz = act_sz = req_sz = 0
            for b in sblocks:
                d = {"address": b.addr, "size": b.size, "requested_size": b.req,
                     "state": b.state, "frames": b.frames}
                blocks.append(d)
                if b.state == "active_allocated":
                    alloc_sz += b.size
                if b.state != "inactive":
                    act_sz += b.size
                    req_sz += b.req
            if self.npu:
                seg = {"device": self.device, "address": saddr, "total_size": ssize,
                       "allocated_size": alloc_sz, "active_size": act_sz,
                       "requested_size": req_sz, "stream": s.stream,
                       "segment_pool_id": s.pool,
                       "segment_type": "small" if s.small else "large",
                       "is_expandable": s.expandable, "frames": s.frames, "blocks": blocks}
            else:
                seg = {"device": self.device, "address": saddr, "total_size": ssize,
                       "allocated_size": alloc_sz, "active_size": act_sz,
                       "requested_size": req_sz, "stream": s.stream,
                       "segment_type": "small" if s.small else "large",
                       "segment_pool_id": s.pool, "is_expandable": s.expandable,
                       "frames": s.frames, "blocks": blocks}
            out.append(seg)
        return out


class Clock:
    """One clock for every device of a file: each event advances it a few microseconds."""

    def __init__(self, start, rng, step=(2, 9)):
        self.t = start
        self.rng = rng
        self.step = step

    def tick(self):
        self.t += self.rng.randint(*self.step)
        return self.t

    def wait(self, us):
        self.t += int(us)


CUDA_SETTINGS = {
    "PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1, "garbage_collection_threshold": 0.0,
    "expandable_segments": False, "pinned_num_register_threads": 1,
    "release_lock_on_cudamalloc": False, "pinned_use_cuda_host_register": False,
    "roundup_power2_divisions": {str(1 << i): 0 for i in range(16)},
}


def ring(trace, max_entries):
    return trace[-max_entries:] if max_entries and len(trace) > max_entries else trace
