//! A model of the `PyTorch` caching allocator, good enough to produce the traces it writes.
//!
//! 512-byte rounding; a small pool (requests ≤ 1 MiB) of 2 MiB segments and a large pool of
//! 20 MiB segments (bigger requests get a segment of their own, rounded to 2 MiB); best fit per
//! stream with splitting and coalescing; optional expandable segments that grow by mapping pages;
//! `empty_cache`; and, when the device is full, the free-every-cached-segment-and-retry path
//! before an `oom`. `pad_bytes` is `torch_npu`'s padding of every request before the rounding
//! (`AddPadSize()`, 32 bytes, added in `round_size()` of `torch_npu/csrc/core/npu/
//! NPUCachingAllocator.cpp`, Ascend/pytorch 9e73e708, lines 161-174 and 2202-2215); the padded
//! size picks the pool and the segment size, the trace records the request.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::model::Action;

pub const SMALL_REQUEST_MAX_BYTES: u64 = 1 << 20;
pub const SMALL_SEGMENT_BYTES: u64 = 2 << 20;
pub const LARGE_SEGMENT_BYTES: u64 = 20 << 20;
/// Requests below this share 20 MiB segments; bigger ones get a segment of their own.
const LARGE_SHARED_MAX_BYTES: u64 = 10 << 20;
const ROUND_LARGE_SEGMENT_BYTES: u64 = 2 << 20;

/// The caching allocator's request rounding.
pub fn round_size(requested: u64) -> u64 {
    requested.max(1).div_ceil(512) * 512
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PoolKind {
    Small,
    Large,
}

/// One recorded trace entry.
#[derive(Clone, Debug)]
pub struct GenEvent {
    pub action: Action,
    pub addr: u64,
    pub size: u64,
    pub stream: i128,
    pub time_us: i64,
    /// Index into the scenario's stack library; `None`: no frames recorded.
    pub stack: Option<u32>,
    pub device_free: Option<u64>,
}

#[derive(Clone, Debug)]
pub struct GenBlock {
    pub size: u64,
    pub requested: u64,
    /// `None`: free (inactive).
    pub stack: Option<u32>,
    pub allocated: bool,
}

#[derive(Clone, Debug)]
pub struct GenSegment {
    pub size: u64,
    pub pool: PoolKind,
    pub stream: i128,
    pub expandable: bool,
    pub stack: Option<u32>,
    /// By address, tiling the segment.
    pub blocks: BTreeMap<u64, GenBlock>,
}

/// The allocator plus the ring buffer of what it recorded.
pub struct Allocator {
    pub segments: BTreeMap<u64, GenSegment>,
    /// Free blocks: (pool, stream, size, address).
    free: BTreeSet<(PoolKind, i128, u64, u64)>,
    next_address: u64,
    pub capacity_bytes: u64,
    pub reserved_bytes: u64,
    pub allocated_bytes: u64,
    pub expandable: bool,
    pub clock_us: i64,
    /// The newest `max_entries` events.
    pub trace: VecDeque<GenEvent>,
    pub max_entries: usize,
    /// Events recorded so far, including those the ring buffer dropped.
    pub recorded: u64,
    /// Events of the last free-and-retry: (first recorded index, last recorded index, reserved before, after).
    pub stalls: Vec<(u64, u64, u64, u64)>,
    /// Segments allocated although the free bytes cached in the same pool and stream covered the
    /// request, just not in one piece.
    pub fragmented_growth: Vec<FragmentedGrowth>,
    /// Events recorded so far, by kind (also those the ring buffer dropped).
    pub counts: ActionCounts,
    /// The most reserved at any time.
    pub peak_reserved_bytes: u64,
    /// Bytes added to every request before the rounding (`torch_npu`: 32; `CUDA`: 0).
    pub pad_bytes: u64,
}

/// How many segment events and OOMs the allocator recorded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ActionCounts {
    pub segment_alloc: u64,
    pub segment_free: u64,
    pub segment_map: u64,
    pub segment_unmap: u64,
    pub oom: u64,
}

/// One `segment_alloc` that fragmentation caused.
#[derive(Clone, Copy, Debug)]
pub struct FragmentedGrowth {
    /// Recorded index of the `segment_alloc`.
    pub event: u64,
    pub requested_bytes: u64,
    pub cached_free_bytes: u64,
    pub stack: Option<u32>,
}

impl Allocator {
    pub fn new(
        base_address: u64,
        capacity_bytes: u64,
        expandable: bool,
        max_entries: usize,
        start_us: i64,
    ) -> Self {
        Self {
            segments: BTreeMap::new(),
            free: BTreeSet::new(),
            next_address: base_address,
            capacity_bytes,
            reserved_bytes: 0,
            allocated_bytes: 0,
            expandable,
            clock_us: start_us,
            trace: VecDeque::with_capacity(max_entries.min(1 << 22)),
            max_entries,
            recorded: 0,
            stalls: Vec::new(),
            fragmented_growth: Vec::new(),
            counts: ActionCounts::default(),
            peak_reserved_bytes: 0,
            pad_bytes: 0,
        }
    }

    /// Puts a segment that already exists (the pool before a trace starts) at `addr`, in `pool`
    /// (`None`: the pool its size says): `blocks` are (address, size, requested bytes; 0 = free)
    /// tiling it, in address order. Segments the model makes later start above every seeded
    /// one. Records nothing.
    pub fn seed_segment(
        &mut self,
        addr: u64,
        size: u64,
        (stream, pool): (i128, Option<PoolKind>),
        expandable: bool,
        blocks: &[(u64, u64, u64)],
    ) {
        // A 2 MiB segment is the small pool's (large-pool segments are 20 MiB, or ≥ 10 MiB); an
        // expandable segment of either pool can have any size, so only the file can say.
        let pool = pool.unwrap_or(if size == SMALL_SEGMENT_BYTES && !expandable {
            PoolKind::Small
        } else {
            PoolKind::Large
        });
        let mut tiles = BTreeMap::new();
        for &(at, bytes, requested) in blocks {
            let allocated = requested > 0;
            tiles.insert(
                at,
                GenBlock {
                    size: bytes,
                    requested,
                    stack: None,
                    allocated,
                },
            );
            if allocated {
                self.allocated_bytes += requested;
            } else {
                self.free.insert((pool, stream, bytes, at));
            }
        }
        self.segments.insert(
            addr,
            GenSegment {
                size,
                pool,
                stream,
                expandable,
                stack: None,
                blocks: tiles,
            },
        );
        self.reserved_bytes += size;
        self.peak_reserved_bytes = self.peak_reserved_bytes.max(self.reserved_bytes);
        let end = (addr + size).div_ceil(SMALL_SEGMENT_BYTES) * SMALL_SEGMENT_BYTES;
        // An expandable segment reserves a large virtual range to grow into.
        let end = if expandable { addr + (1 << 40) } else { end };
        self.next_address = self.next_address.max(end);
    }

    pub fn record(
        &mut self,
        action: Action,
        addr: u64,
        size: u64,
        stream: i128,
        stack: Option<u32>,
        device_free: Option<u64>,
    ) {
        match action {
            Action::SegmentAlloc => self.counts.segment_alloc += 1,
            Action::SegmentFree => self.counts.segment_free += 1,
            Action::SegmentMap => self.counts.segment_map += 1,
            Action::SegmentUnmap => self.counts.segment_unmap += 1,
            Action::Oom => self.counts.oom += 1,
            _ => {}
        }
        if self.max_entries == 0 {
            self.recorded += 1;
            return;
        }
        if self.trace.len() == self.max_entries {
            self.trace.pop_front();
        }
        self.trace.push_back(GenEvent {
            action,
            addr,
            size,
            stream,
            time_us: self.clock_us,
            stack,
            device_free,
        });
        self.recorded += 1;
    }

    pub fn tick(&mut self, us: i64) {
        self.clock_us += us.max(1);
    }

    /// Hands out a block for `requested` bytes, or records an `oom` and returns `None`.
    pub fn malloc(&mut self, requested: u64, stream: i128, stack: Option<u32>) -> Option<u64> {
        let size = round_size(requested + self.pad_bytes);
        let pool = if size <= SMALL_REQUEST_MAX_BYTES {
            PoolKind::Small
        } else {
            PoolKind::Large
        };
        let addr = if let Some(addr) = self.best_fit(pool, stream, size) {
            addr
        } else {
            {
                if !self.grow_for(pool, stream, requested, stack) {
                    // Free every cached segment and retry: the allocator stall.
                    let before = self.reserved_bytes;
                    let first = self.recorded;
                    // The allocator records the waiting request's context on the releases.
                    self.release_cached(stack);
                    if self.reserved_bytes < before {
                        self.stalls.push((
                            first,
                            self.recorded.saturating_sub(1),
                            before,
                            self.reserved_bytes,
                        ));
                    }
                    if !self.grow_for(pool, stream, requested, stack) {
                        let device_free = self.capacity_bytes.saturating_sub(self.reserved_bytes);
                        self.record(Action::Oom, 0, requested, stream, stack, Some(device_free));
                        return None;
                    }
                }
                self.best_fit(pool, stream, size)?
            }
        };
        self.take_block(addr, pool, stream, size, requested, stack);
        self.allocated_bytes += requested;
        self.record(Action::Alloc, addr, requested, stream, stack, None);
        Some(addr)
    }

    /// Grows the pool for a request, noting when the cached free bytes would have covered it.
    fn grow_for(
        &mut self,
        pool: PoolKind,
        stream: i128,
        requested: u64,
        stack: Option<u32>,
    ) -> bool {
        let size = round_size(requested + self.pad_bytes);
        let cached_free_bytes: u64 = self
            .free
            .range((pool, stream, 0, 0)..=(pool, stream, u64::MAX, u64::MAX))
            .map(|&(_, _, size, _)| size)
            .sum();
        let event = self.recorded;
        let grew = self.grow(pool, stream, size, stack);
        if grew && !self.expandable && cached_free_bytes >= size {
            self.fragmented_growth.push(FragmentedGrowth {
                event,
                requested_bytes: requested,
                cached_free_bytes,
                stack,
            });
        }
        grew
    }

    fn best_fit(&self, pool: PoolKind, stream: i128, size: u64) -> Option<u64> {
        self.free
            .range((pool, stream, size, 0)..)
            .next()
            .filter(|&&(p, s, _, _)| p == pool && s == stream)
            .map(|&(_, _, _, a)| a)
    }

    fn segment_of(&self, addr: u64) -> Option<u64> {
        self.segments
            .range(..=addr)
            .next_back()
            .filter(|(s, seg)| addr < *s + seg.size)
            .map(|(&s, _)| s)
    }

    fn take_block(
        &mut self,
        addr: u64,
        pool: PoolKind,
        stream: i128,
        size: u64,
        requested: u64,
        stack: Option<u32>,
    ) {
        let Some(seg_addr) = self.segment_of(addr) else {
            return;
        };
        let Some(seg) = self.segments.get_mut(&seg_addr) else {
            return;
        };
        let Some(block) = seg.blocks.get_mut(&addr) else {
            return;
        };
        self.free.remove(&(pool, stream, block.size, addr));
        let remaining = block.size - size;
        let split = match pool {
            PoolKind::Small => remaining >= 512,
            PoolKind::Large => remaining > SMALL_REQUEST_MAX_BYTES,
        };
        if split {
            block.size = size;
            seg.blocks.insert(
                addr + size,
                GenBlock {
                    size: remaining,
                    requested: 0,
                    stack: None,
                    allocated: false,
                },
            );
            self.free.insert((pool, stream, remaining, addr + size));
        }
        let Some(block) = seg.blocks.get_mut(&addr) else {
            return;
        };
        block.requested = requested;
        block.stack = stack;
        block.allocated = true;
    }

    /// Adds memory for a request of `size`: a new segment, or more pages of an expandable one.
    fn grow(&mut self, pool: PoolKind, stream: i128, size: u64, stack: Option<u32>) -> bool {
        if self.expandable {
            return self.map_pages(pool, stream, size, stack);
        }
        let seg_size = match pool {
            PoolKind::Small => SMALL_SEGMENT_BYTES,
            PoolKind::Large if size < LARGE_SHARED_MAX_BYTES => LARGE_SEGMENT_BYTES,
            PoolKind::Large => size.div_ceil(ROUND_LARGE_SEGMENT_BYTES) * ROUND_LARGE_SEGMENT_BYTES,
        };
        if self.reserved_bytes + seg_size > self.capacity_bytes {
            return false;
        }
        let addr = self.next_address;
        self.next_address += seg_size.div_ceil(SMALL_SEGMENT_BYTES) * SMALL_SEGMENT_BYTES;
        self.tick(40 + (seg_size >> 20) as i64);
        self.record(Action::SegmentAlloc, addr, seg_size, stream, stack, None);
        let mut blocks = BTreeMap::new();
        blocks.insert(
            addr,
            GenBlock {
                size: seg_size,
                requested: 0,
                stack: None,
                allocated: false,
            },
        );
        self.segments.insert(
            addr,
            GenSegment {
                size: seg_size,
                pool,
                stream,
                expandable: false,
                stack,
                blocks,
            },
        );
        self.free.insert((pool, stream, seg_size, addr));
        self.reserved_bytes += seg_size;
        self.peak_reserved_bytes = self.peak_reserved_bytes.max(self.reserved_bytes);
        true
    }

    fn map_pages(&mut self, pool: PoolKind, stream: i128, size: u64, stack: Option<u32>) -> bool {
        let page = if pool == PoolKind::Small {
            SMALL_SEGMENT_BYTES
        } else {
            LARGE_SEGMENT_BYTES
        };
        let existing = self
            .segments
            .iter()
            .find(|(_, s)| s.expandable && s.pool == pool && s.stream == stream)
            .map(|(&a, _)| a);
        let seg_addr = existing.unwrap_or_else(|| {
            // Reserve a large virtual range for the segment to grow into.
            let addr = self.next_address;
            self.next_address += 1 << 40;
            self.segments.insert(
                addr,
                GenSegment {
                    size: 0,
                    pool,
                    stream,
                    expandable: true,
                    stack,
                    blocks: BTreeMap::new(),
                },
            );
            addr
        });
        let Some(seg) = self.segments.get(&seg_addr) else {
            return false;
        };
        let end = seg_addr + seg.size;
        let tail_free = seg
            .blocks
            .iter()
            .next_back()
            .filter(|(_, b)| !b.allocated)
            .map_or(0, |(_, b)| b.size);
        let map_bytes = (size - tail_free.min(size)).div_ceil(page) * page;
        if self.reserved_bytes + map_bytes > self.capacity_bytes {
            return false;
        }
        self.tick(20 + (map_bytes >> 21) as i64);
        self.record(Action::SegmentMap, end, map_bytes, stream, stack, None);
        self.reserved_bytes += map_bytes;
        self.peak_reserved_bytes = self.peak_reserved_bytes.max(self.reserved_bytes);
        let Some(seg) = self.segments.get_mut(&seg_addr) else {
            return false;
        };
        seg.size += map_bytes;
        let tail = seg
            .blocks
            .iter()
            .next_back()
            .filter(|(_, b)| !b.allocated)
            .map(|(&a, b)| (a, b.size));
        if let Some((addr, old)) = tail {
            self.free.remove(&(pool, stream, old, addr));
            if let Some(b) = seg.blocks.get_mut(&addr) {
                b.size += map_bytes;
            }
            self.free.insert((pool, stream, old + map_bytes, addr));
        } else {
            seg.blocks.insert(
                end,
                GenBlock {
                    size: map_bytes,
                    requested: 0,
                    stack: None,
                    allocated: false,
                },
            );
            self.free.insert((pool, stream, map_bytes, end));
        }
        true
    }

    /// The tensor at `addr` is freed: `free_requested`, then `free_completed`, then coalescing.
    pub fn free(&mut self, addr: u64) {
        let Some(seg_addr) = self.segment_of(addr) else {
            return;
        };
        let Some(seg) = self.segments.get_mut(&seg_addr) else {
            return;
        };
        let (pool, stream) = (seg.pool, seg.stream);
        let Some(block) = seg.blocks.get_mut(&addr) else {
            return;
        };
        if !block.allocated {
            return;
        }
        block.allocated = false;
        let (requested, stack) = (block.requested, block.stack.take());
        self.allocated_bytes -= requested;
        self.record(Action::FreeRequested, addr, requested, stream, stack, None);
        self.tick(1);
        self.record(Action::FreeCompleted, addr, requested, stream, stack, None);

        let Some(seg) = self.segments.get_mut(&seg_addr) else {
            return;
        };
        let mut start = addr;
        let mut size = seg.blocks.get(&addr).map_or(0, |b| b.size);
        if let Some((&next, nb)) = seg.blocks.range(addr + 1..).next()
            && !nb.allocated
            && next == addr + size
        {
            self.free.remove(&(pool, stream, nb.size, next));
            size += nb.size;
            seg.blocks.remove(&next);
        }
        if let Some((&prev, pb)) = seg.blocks.range(..addr).next_back()
            && !pb.allocated
            && prev + pb.size == addr
        {
            self.free.remove(&(pool, stream, pb.size, prev));
            size += pb.size;
            seg.blocks.remove(&addr);
            start = prev;
        }
        if let Some(b) = seg.blocks.get_mut(&start) {
            b.size = size;
            b.requested = 0;
        }
        self.free.insert((pool, stream, size, start));
    }

    /// Releases every cached segment that holds no live block (`torch.cuda.empty_cache()`); an
    /// expandable segment gives back its free pages at the end. The releases carry `context`
    /// (the `empty_cache()` call, or the request that waits for them), as `PyTorch` records them.
    pub fn release_cached(&mut self, context: Option<u32>) {
        let empty: Vec<u64> = self
            .segments
            .iter()
            .filter(|(_, s)| {
                !s.expandable && s.blocks.len() == 1 && s.blocks.values().all(|b| !b.allocated)
            })
            .map(|(&a, _)| a)
            .collect();
        for addr in empty {
            let Some(seg) = self.segments.remove(&addr) else {
                continue;
            };
            self.free.remove(&(seg.pool, seg.stream, seg.size, addr));
            self.reserved_bytes -= seg.size;
            // cudaFree synchronizes the device: slow.
            self.tick(800 + (seg.size >> 17) as i64);
            self.record(
                Action::SegmentFree,
                addr,
                seg.size,
                seg.stream,
                context.or(seg.stack),
                None,
            );
        }
        let expandable: Vec<u64> = self
            .segments
            .iter()
            .filter(|(_, s)| s.expandable)
            .map(|(&a, _)| a)
            .collect();
        for seg_addr in expandable {
            let Some(seg) = self.segments.get_mut(&seg_addr) else {
                continue;
            };
            let page = if seg.pool == PoolKind::Small {
                SMALL_SEGMENT_BYTES
            } else {
                LARGE_SEGMENT_BYTES
            };
            let Some((&tail_addr, tail)) = seg.blocks.iter().next_back() else {
                continue;
            };
            if tail.allocated {
                continue;
            }
            let seg_end = seg_addr + seg.size;
            let keep_from = seg_addr + (tail_addr - seg_addr).div_ceil(page) * page;
            if keep_from >= seg_end {
                continue;
            }
            let unmap = seg_end - keep_from;
            let (pool, stream, tail_size) = (seg.pool, seg.stream, tail.size);
            self.free.remove(&(pool, stream, tail_size, tail_addr));
            if keep_from > tail_addr {
                if let Some(b) = seg.blocks.get_mut(&tail_addr) {
                    b.size = keep_from - tail_addr;
                }
                self.free
                    .insert((pool, stream, keep_from - tail_addr, tail_addr));
            } else {
                seg.blocks.remove(&tail_addr);
            }
            seg.size -= unmap;
            let stack = context.or(seg.stack);
            self.reserved_bytes -= unmap;
            self.tick(300 + (unmap >> 18) as i64);
            self.record(Action::SegmentUnmap, keep_from, unmap, stream, stack, None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_and_coalesces_back_to_one_free_block() {
        let mut a = Allocator::new(1 << 40, 1 << 34, false, 1000, 0);
        let x = a.malloc(1000, 0, None).expect("fits");
        let y = a.malloc(3000, 0, None).expect("fits");
        assert_eq!(
            y,
            x + 1024,
            "1000 bytes round to 1024 and the next block follows"
        );
        a.free(x);
        a.free(y);
        let seg = a.segments.values().next().expect("one segment");
        assert_eq!(seg.blocks.len(), 1);
        assert_eq!(seg.size, SMALL_SEGMENT_BYTES);
    }

    #[test]
    fn full_device_frees_cache_then_reports_oom() {
        let mut a = Allocator::new(1 << 40, 60 << 20, false, 1000, 0);
        let big = a.malloc(40 << 20, 0, None).expect("fits");
        a.free(big);
        // 50 MiB does not fit next to the cached 40 MiB segment: release it and retry.
        assert!(a.malloc(50 << 20, 0, None).is_some());
        assert_eq!(a.stalls.len(), 1);
        assert!(a.malloc(30 << 20, 0, None).is_none());
        assert_eq!(a.trace.back().map(|e| e.action), Some(Action::Oom));
    }

    #[test]
    fn expandable_segment_maps_pages_and_unmaps_free_tail() {
        let mut a = Allocator::new(1 << 40, 1 << 34, true, 1000, 0);
        let x = a.malloc(30 << 20, 0, None).expect("fits");
        assert_eq!(a.reserved_bytes, 40 << 20);
        a.free(x);
        a.release_cached(None);
        assert_eq!(a.reserved_bytes, 0);
        let actions: Vec<Action> = a.trace.iter().map(|e| e.action).collect();
        assert!(actions.contains(&Action::SegmentMap) && actions.contains(&Action::SegmentUnmap));
    }
}
