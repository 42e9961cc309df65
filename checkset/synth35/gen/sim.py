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
                 seg_frames=True, driver=None):
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
        """Free every segment that is one inactive block (empty_cache and the retry path)."""
        for addr in sorted(self.segments):
            seg = self.segments[addr]
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
                return self.blocks[addr]
            i += 1
        return None

    def malloc(self, size, frames, stall_frames=None, cat=None):
        rounded = self.round_size(size)
        small = rounded <= SMALL_SIZE
        b = self._find_free(rounded, small)
        if b is None:
            asz = self.allocation_size(rounded)
            b = self._new_segment(asz, small, frames)
            if b is None:
                # free all cached blocks, then retry (the allocator stall)
                n0, r0 = len(self.trace), self.reserved
                self.release_cached(stall_frames if stall_frames is not None else frames)
                self.stalls.append((n0, len(self.trace) - n0, r0 - self.reserved, size))
                b = self._new_segment(asz, small, frames)
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
        if (small and remaining >= 512) or (not small and remaining > SMALL_SIZE):
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
        for addr in sorted(self.segments):
            s = self.segments[addr]
            blocks = []
            alloc_sz = act_sz = req_sz = 0
            for b in s.blocks:
                d = {"address": b.addr, "size": b.size, "requested_size": b.req,
                     "state": b.state, "frames": b.frames}
                blocks.append(d)
                if b.state == "active_allocated":
                    alloc_sz += b.size
                if b.state != "inactive":
                    act_sz += b.size
                    req_sz += b.req
            if self.npu:
                seg = {"device": self.device, "address": s.addr, "total_size": s.size,
                       "allocated_size": alloc_sz, "active_size": act_sz,
                       "requested_size": req_sz, "stream": s.stream,
                       "segment_pool_id": s.pool,
                       "segment_type": "small" if s.small else "large",
                       "is_expandable": s.expandable, "frames": s.frames, "blocks": blocks}
            else:
                seg = {"device": self.device, "address": s.addr, "total_size": s.size,
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
