//! The model of the `PyTorch` caching allocator: the generator's (it writes the traces the
//! allocator would) and the what-if replay's (`whatif`), one model for both.
//!
//! The rules, each as `c10/cuda/CUDACachingAllocator.cpp` has it (ARCHITECTURE.md's table gives
//! the source lines): requests rounded to 512 bytes, or to a power-of-two division with
//! `roundup_power2_divisions`; a small pool (requests ≤ 1 MiB) of 2 MiB segments and a large pool
//! of 20 MiB segments (requests of 10 MiB and more get a segment of their own, rounded to 2 MiB);
//! best fit per pool by (stream, size, address), where a block of `max_split_size_mb` or more is
//! neither split nor handed to a much smaller request; splitting when the remainder is ≥ 512 bytes
//! (small pool, expandable segments) or > 1 MiB (large pool); coalescing on free; expandable
//! segments, one per pool and stream, growing by mapping pages; `empty_cache`; and, when the
//! device is full, garbage collection by age (`garbage_collection_threshold`, with a memory
//! fraction), freeing oversize cached blocks (`max_split_size_mb`), then freeing every cached
//! segment and retrying (the stall), before an `oom`.
//!
//! `torch_npu`'s allocator is a port: `pad_bytes` is its padding of every request before the
//! rounding (`AddPadSize()`, 32 bytes, added in `round_size()` of `torch_npu/csrc/core/npu/
//! NPUCachingAllocator.cpp`, Ascend/pytorch 9e73e708, lines 161-174 and 2202-2215); the padded
//! size picks the pool and the segment size, the trace records the request.
//!
//! `align_large_bytes` is `torch_npu`'s 16 KiB start of large blocks in expandable segments.
//!
//! Expandable segments, with the holes `empty_cache` leaves in them, are in
//! `allocator/expandable.rs`.
//!
//! Not modelled: private pools (CUDA graphs). ARCHITECTURE.md lists the rest.

mod expandable;

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use rustc_hash::FxHashMap;

use crate::model::Action;

/// `kMinBlockSize`: every block is a multiple of this.
pub const MIN_BLOCK_BYTES: u64 = 512;
/// `kSmallSize`: the small pool's largest request.
pub const SMALL_REQUEST_MAX_BYTES: u64 = 1 << 20;
/// `kSmallBuffer`: the small pool's segments.
pub const SMALL_SEGMENT_BYTES: u64 = 2 << 20;
/// `kLargeBuffer`: the large pool's shared segments.
pub const LARGE_SEGMENT_BYTES: u64 = 20 << 20;
/// `kMinLargeAlloc`: requests below this share 20 MiB segments; bigger ones get their own.
const LARGE_SHARED_MAX_BYTES: u64 = 10 << 20;
/// `kRoundLarge`: a segment of its own is rounded to this.
const ROUND_LARGE_SEGMENT_BYTES: u64 = 2 << 20;
/// Requests above this (1 PiB) fail at once: no device holds them, and the sizes stay far from
/// overflowing.
const MAX_REQUEST_BYTES: u64 = 1 << 50;
/// `roundup_power2_divisions` has one value per power-of-two interval from 1 MiB to 64 GiB.
pub const ROUNDUP_INTERVALS: usize = 16;

/// The caching allocator's plain request rounding (to 512 bytes).
pub fn round_size(requested: u64) -> u64 {
    requested
        .max(1)
        .div_ceil(MIN_BLOCK_BYTES)
        .saturating_mul(MIN_BLOCK_BYTES)
}

/// The next of `divisions` equal steps between the powers of two around `size`
/// (`roundup_power2_next_division`); a power of two stays as it is.
fn roundup_power2_next_division(size: u64, divisions: u64) -> u64 {
    if size.is_power_of_two() {
        return size;
    }
    let floor = 1u64 << size.ilog2();
    let step = floor >> divisions.ilog2();
    if step == 0 {
        return floor << 1;
    }
    let rounded_down = size & !(step - 1);
    if rounded_down == size {
        size
    } else {
        rounded_down + step
    }
}

/// The `PYTORCH_CUDA_ALLOC_CONF` / `PYTORCH_NPU_ALLOC_CONF` settings the model follows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Config {
    pub expandable_segments: bool,
    /// `max_split_size_mb`, in bytes; `None`: not set (no limit).
    pub max_split_size_bytes: Option<u64>,
    /// `roundup_power2_divisions` per interval (1 MiB, 2 MiB, … 32 GiB and up); 0 or 1: plain
    /// 512-byte rounding.
    pub roundup_power2_divisions: [u32; ROUNDUP_INTERVALS],
    /// `garbage_collection_threshold` (a fraction of the capacity); `None`: off. It acts only
    /// where a memory fraction is set (`set_fraction`), which the model takes to be when the
    /// capacity is known.
    pub garbage_collection_threshold: Option<f64>,
    /// Bytes added to every request before the rounding (`torch_npu`: 32; `CUDA`: 0).
    pub pad_bytes: u64,
    /// `torch_npu` with expandable segments starts every block of 2 MiB or more at a multiple
    /// of this (`base_addr_aligned_kb`, 16 KiB by default; `malloc`, `NPUCachingAllocator.cpp`
    /// lines 1396-1422), giving the bytes before it back to the pool; 0: `CUDA`, which does not.
    pub align_large_bytes: u64,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            expandable_segments: false,
            max_split_size_bytes: None,
            roundup_power2_divisions: [0; ROUNDUP_INTERVALS],
            garbage_collection_threshold: None,
            pad_bytes: 0,
            align_large_bytes: 0,
        }
    }
}

impl Config {
    /// The block size for a request (`round_size`).
    pub fn round(&self, requested: u64) -> u64 {
        let size = requested.saturating_add(self.pad_bytes);
        if size < MIN_BLOCK_BYTES {
            return MIN_BLOCK_BYTES;
        }
        let interval = size.ilog2().saturating_sub(20) as usize;
        let divisions =
            u64::from(self.roundup_power2_divisions[interval.min(ROUNDUP_INTERVALS - 1)]);
        if divisions > 1 && size > MIN_BLOCK_BYTES * divisions {
            roundup_power2_next_division(size, divisions)
        } else {
            round_size(size)
        }
    }

    fn max_split_bytes(&self) -> u64 {
        self.max_split_size_bytes.unwrap_or(u64::MAX)
    }
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

impl GenBlock {
    /// A free block of `size` bytes.
    fn free(size: u64) -> Self {
        Self {
            size,
            requested: 0,
            stack: None,
            allocated: false,
        }
    }
}

#[derive(Clone, Debug)]
pub struct GenSegment {
    /// Bytes from the segment's address to its end: for an expandable segment, the end of its
    /// highest mapped page, holes included ([`GenSegment::mapped_bytes`] leaves them out).
    pub size: u64,
    pub pool: PoolKind,
    pub stream: i128,
    pub expandable: bool,
    pub stack: Option<u32>,
    /// By address, tiling the segment's mapped pages.
    pub blocks: BTreeMap<u64, GenBlock>,
    /// An expandable segment's unmapped ranges below its end (address → bytes), where
    /// `empty_cache` unmapped free pages; empty for the others.
    pub holes: BTreeMap<u64, u64>,
}

impl GenSegment {
    /// Whether the segment is one free block (`!is_split()` in the allocator).
    fn is_whole_and_free(&self) -> bool {
        self.blocks.len() == 1 && self.blocks.values().all(|b| !b.allocated)
    }
}

/// A free block's key: (pool, stream, size, address), the allocator's best-fit order.
type FreeKey = (PoolKind, i128, u64, u64);

/// Where a segment belongs: (stream, pool).
type SegmentPlace = (i128, PoolKind);

/// The free blocks of both pools, and what garbage collection needs to know of their age.
#[derive(Clone, Default)]
struct FreeBlocks {
    set: BTreeSet<FreeKey>,
    /// Per block address: `get_free_blocks_call_count` when it became free (`gc_count_base`).
    since: FxHashMap<u64, u64>,
    /// `get_free_blocks_call_count` per pool (small, large): counted only with garbage collection.
    calls: [u64; 2],
    track_age: bool,
}

impl FreeBlocks {
    fn insert(&mut self, key: FreeKey) {
        self.set.insert(key);
        if self.track_age {
            self.since.insert(key.3, self.calls[key.0 as usize]);
        }
    }

    fn remove(&mut self, key: &FreeKey) {
        self.set.remove(key);
    }

    /// How many searches of its pool the block at `addr` has sat through free (`gc_count()`).
    fn age(&self, pool: PoolKind, addr: u64) -> u64 {
        self.calls[pool as usize] - self.since.get(&addr).copied().unwrap_or(0)
    }

    /// The free blocks of `pool` and `stream` of at least `size` bytes, smallest first.
    fn at_least(
        &self,
        pool: PoolKind,
        stream: i128,
        size: u64,
    ) -> std::collections::btree_set::Range<'_, FreeKey> {
        self.set
            .range((pool, stream, size, 0)..=(pool, stream, u64::MAX, u64::MAX))
    }
}

/// The allocator plus the ring buffer of what it recorded.
#[derive(Clone)]
pub struct Allocator {
    pub segments: BTreeMap<u64, GenSegment>,
    free: FreeBlocks,
    next_address: u64,
    pub capacity_bytes: u64,
    pub reserved_bytes: u64,
    pub allocated_bytes: u64,
    pub config: Config,
    pub clock_us: i64,
    /// The newest `max_entries` events.
    pub trace: VecDeque<GenEvent>,
    pub max_entries: usize,
    /// Events recorded so far, including those the ring buffer dropped.
    pub recorded: u64,
    /// Each time a failed device allocation made the allocator free cached segments and retry.
    pub stalls: Vec<Stall>,
    /// Segments allocated although the free bytes cached in the same pool and stream covered the
    /// request, just not in one piece.
    pub fragmented_growth: Vec<FragmentedGrowth>,
    /// Events recorded so far, by kind (also those the ring buffer dropped).
    pub counts: ActionCounts,
    /// The most reserved at any time.
    pub peak_reserved_bytes: u64,
    /// Recorded index of the latest `segment_free` / `segment_unmap`.
    last_release_event: u64,
    /// Bytes given back to the device so far.
    released_bytes: u64,
}

/// One free-and-retry: the releases a failed device allocation caused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stall {
    /// Recorded index of the first release.
    pub first_event: u64,
    /// Recorded index of the last release.
    pub last_event: u64,
    pub reserved_before_bytes: u64,
    pub reserved_after_bytes: u64,
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
        Self::with_config(
            base_address,
            capacity_bytes,
            Config {
                expandable_segments: expandable,
                ..Config::default()
            },
            max_entries,
            start_us,
        )
    }

    pub fn with_config(
        base_address: u64,
        capacity_bytes: u64,
        config: Config,
        max_entries: usize,
        start_us: i64,
    ) -> Self {
        let free = FreeBlocks {
            track_age: config.garbage_collection_threshold.is_some(),
            ..FreeBlocks::default()
        };
        Self {
            segments: BTreeMap::new(),
            free,
            next_address: base_address,
            capacity_bytes,
            reserved_bytes: 0,
            allocated_bytes: 0,
            config,
            clock_us: start_us,
            trace: VecDeque::with_capacity(max_entries.min(1 << 22)),
            max_entries,
            recorded: 0,
            stalls: Vec::new(),
            fragmented_growth: Vec::new(),
            counts: ActionCounts::default(),
            peak_reserved_bytes: 0,
            last_release_event: 0,
            released_bytes: 0,
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
        // A snapshot lists each run of an expandable segment's mapped pages as a segment: one
        // above another of its pool and stream is taken to be the same segment past a hole.
        let joined = expandable && self.join_expandable(addr, size, (stream, pool));
        if let Some(seg) = self.segment_at_mut(addr).filter(|_| joined) {
            seg.blocks.append(&mut tiles);
        } else {
            self.segments.insert(
                addr,
                GenSegment {
                    size,
                    pool,
                    stream,
                    expandable,
                    stack: None,
                    blocks: tiles,
                    holes: BTreeMap::new(),
                },
            );
        }
        self.reserved_bytes += size;
        self.peak_reserved_bytes = self.peak_reserved_bytes.max(self.reserved_bytes);
        let end = addr
            .saturating_add(size)
            .div_ceil(SMALL_SEGMENT_BYTES)
            .saturating_mul(SMALL_SEGMENT_BYTES);
        // An expandable segment reserves a large virtual range to grow into.
        let end = if expandable {
            addr.saturating_add(expandable::VIRTUAL_RANGE_BYTES)
        } else {
            end
        };
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
            Action::SegmentFree | Action::SegmentUnmap => {
                self.last_release_event = self.recorded;
                self.released_bytes += size;
                if action == Action::SegmentFree {
                    self.counts.segment_free += 1;
                } else {
                    self.counts.segment_unmap += 1;
                }
            }
            Action::SegmentMap => self.counts.segment_map += 1,
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

    /// Hands out a block for `requested` bytes, or records an `oom` and returns `None`
    /// (`DeviceCachingAllocator::malloc`).
    pub fn malloc(&mut self, requested: u64, stream: i128, stack: Option<u32>) -> Option<u64> {
        if requested > MAX_REQUEST_BYTES {
            // No device holds it (an odd file's size): out of memory, before any arithmetic.
            self.record(Action::Oom, 0, requested, stream, stack, Some(0));
            return None;
        }
        let size = self.config.round(requested);
        let pool = if size <= SMALL_REQUEST_MAX_BYTES {
            PoolKind::Small
        } else {
            PoolKind::Large
        };
        let addr = if let Some(addr) = self.get_free_block(pool, stream, size) {
            addr
        } else {
            let before = (self.reserved_bytes, self.released_bytes, self.recorded);
            if self.garbage_collects() {
                self.garbage_collect(stack);
            }
            // A new segment; else free the oversize cached blocks and retry; else free every
            // cached segment and retry; else out of memory.
            let grown = self.grow_for(pool, stream, requested, size, stack);
            let grown = grown.or_else(|| {
                self.release_available(pool, stream, size, stack)
                    .then(|| self.grow_for(pool, stream, requested, size, stack))
                    .flatten()
            });
            let grown = grown.or_else(|| {
                self.release_cached(stack);
                self.grow_for(pool, stream, requested, size, stack)
            });
            // Whatever this request released (collected, oversize or everything), it waited
            // for: one stall, as a recorded trace shows one burst.
            self.note_stall(before);
            let Some(addr) = grown else {
                let device_free = self.capacity_bytes.saturating_sub(self.reserved_bytes);
                self.record(Action::Oom, 0, requested, stream, stack, Some(device_free));
                return None;
            };
            addr
        };
        let addr = self.take_block(addr, pool, stream, size, (requested, stack));
        self.allocated_bytes += requested;
        self.record(Action::Alloc, addr, requested, stream, stack, None);
        Some(addr)
    }

    /// Notes a stall when the request that began at `(reserved, released bytes, recorded
    /// events)` made the allocator release segments: each release synchronizes the device
    /// (`cudaFree`). The stall's reserved bytes after are those right after its releases.
    fn note_stall(
        &mut self,
        (reserved_before_bytes, released_before, first_event): (u64, u64, u64),
    ) {
        let released = self.released_bytes - released_before;
        if released > 0 {
            self.stalls.push(Stall {
                first_event,
                last_event: self.last_release_event,
                reserved_before_bytes,
                reserved_after_bytes: reserved_before_bytes - released,
            });
        }
    }

    /// Whether garbage collection runs: a threshold is set, and so is a memory fraction (the
    /// allocator collects only under `allowed_memory_maximum`, which
    /// `set_per_process_memory_fraction` below 1 sets; the model takes a bounded capacity for
    /// that cap).
    fn garbage_collects(&self) -> bool {
        self.config.garbage_collection_threshold.is_some() && self.capacity_bytes < u64::MAX / 8
    }

    /// Grows the pool for a request, noting when the cached free bytes would have covered it;
    /// the address of the free block the request then takes.
    fn grow_for(
        &mut self,
        pool: PoolKind,
        stream: i128,
        requested: u64,
        size: u64,
        stack: Option<u32>,
    ) -> Option<u64> {
        let cached_free_bytes: u64 = self.free.at_least(pool, stream, 0).map(|k| k.2).sum();
        let event = self.recorded;
        let grew = self.grow(pool, stream, size, stack);
        if grew.is_some() && !self.config.expandable_segments && cached_free_bytes >= size {
            self.fragmented_growth.push(FragmentedGrowth {
                event,
                requested_bytes: requested,
                cached_free_bytes,
                stack,
            });
        }
        grew
    }

    /// The cached block a request of `size` takes, if one may (`get_free_block`): the best fit
    /// by (stream, size, address), where a block of an expandable segment counts as what it can
    /// grow to (its size plus the unmapped bytes after it, so a segment's growing end goes last),
    /// a block of `max_split_size` or more goes to no request below it, and a request of
    /// `max_split_size` or more takes no block 20 MiB (`kLargeBuffer`) larger than itself.
    fn get_free_block(&mut self, pool: PoolKind, stream: i128, size: u64) -> Option<u64> {
        if self.free.track_age {
            self.free.calls[pool as usize] += 1;
        }
        let mut fits = self.free.at_least(pool, stream, size);
        let mut best = *fits.next()?;
        // In an expandable segment, a block counts as what it can grow to.
        for &next in fits {
            if !self.segment_at(best.3).is_some_and(|(_, s)| s.expandable)
                || self.expandable_size(next) >= self.expandable_size(best)
            {
                break;
            }
            best = next;
        }
        let max_split = self.config.max_split_bytes();
        let block_size = best.2;
        if size < max_split && block_size >= max_split {
            return None;
        }
        if size >= max_split && block_size >= size.saturating_add(LARGE_SEGMENT_BYTES) {
            return None;
        }
        Some(best.3)
    }

    fn segment_of(&self, addr: u64) -> Option<u64> {
        self.segment_at(addr).map(|(s, _)| s)
    }

    /// The segment that holds `addr`, with its address.
    fn segment_at(&self, addr: u64) -> Option<(u64, &GenSegment)> {
        self.segments
            .range(..=addr)
            .next_back()
            .filter(|(s, seg)| addr < s.saturating_add(seg.size))
            .map(|(&s, seg)| (s, seg))
    }

    fn segment_at_mut(&mut self, addr: u64) -> Option<&mut GenSegment> {
        self.segments
            .range_mut(..=addr)
            .next_back()
            .filter(|(s, seg)| addr < s.saturating_add(seg.size))
            .map(|(_, seg)| seg)
    }

    /// Gives the free block at `addr` to a request of `size` (`alloc_found_block`), split as
    /// `shouldSplit` says; the address the request gets (`torch_npu` may align it).
    fn take_block(
        &mut self,
        addr: u64,
        pool: PoolKind,
        stream: i128,
        size: u64,
        (requested, stack): (u64, Option<u32>),
    ) -> u64 {
        let max_split = self.config.max_split_bytes();
        let expandable = self.config.expandable_segments;
        let align = self.config.align_large_bytes;
        let Some(seg) = self
            .segment_of(addr)
            .and_then(|s| self.segments.get_mut(&s))
        else {
            return addr;
        };
        let Some(block) = seg.blocks.get_mut(&addr) else {
            return addr;
        };
        self.free.remove(&(pool, stream, block.size, addr));
        let mut addr = addr;
        if expandable
            && align > 0
            && size >= ROUND_LARGE_SEGMENT_BYTES
            && !addr.is_multiple_of(align)
        {
            let offset = align - addr % align;
            if offset + size <= block.size {
                let rest = block.size - offset;
                block.size = offset;
                self.free.insert((pool, stream, offset, addr));
                addr += offset;
                seg.blocks.insert(
                    addr,
                    GenBlock {
                        size: rest,
                        requested: 0,
                        stack: None,
                        allocated: false,
                    },
                );
            }
        }
        let Some(block) = seg.blocks.get_mut(&addr) else {
            return addr;
        };
        let remaining = block.size - size;
        // `shouldSplit`.
        let split = if pool == PoolKind::Small || expandable {
            remaining >= MIN_BLOCK_BYTES
        } else {
            size < max_split && remaining > SMALL_REQUEST_MAX_BYTES
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
            return addr;
        };
        block.requested = requested;
        block.stack = stack;
        block.allocated = true;
        addr
    }

    /// Adds memory for a request of `size`: a new segment, or more pages of an expandable one;
    /// the free block the request takes, or `None` when the device has no room.
    fn grow(&mut self, pool: PoolKind, stream: i128, size: u64, stack: Option<u32>) -> Option<u64> {
        if self.config.expandable_segments {
            return self.map_pages(pool, stream, size, stack);
        }
        // `get_allocation_size`.
        let seg_size = match pool {
            PoolKind::Small => SMALL_SEGMENT_BYTES,
            PoolKind::Large if size < LARGE_SHARED_MAX_BYTES => LARGE_SEGMENT_BYTES,
            PoolKind::Large => size
                .div_ceil(ROUND_LARGE_SEGMENT_BYTES)
                .saturating_mul(ROUND_LARGE_SEGMENT_BYTES),
        };
        if self.reserved_bytes.saturating_add(seg_size) > self.capacity_bytes {
            return None;
        }
        let addr = self.next_address;
        self.next_address = self.next_address.saturating_add(
            seg_size
                .div_ceil(SMALL_SEGMENT_BYTES)
                .saturating_mul(SMALL_SEGMENT_BYTES),
        );
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
                holes: BTreeMap::new(),
            },
        );
        self.free.insert((pool, stream, seg_size, addr));
        self.reserved_bytes += seg_size;
        self.peak_reserved_bytes = self.peak_reserved_bytes.max(self.reserved_bytes);
        Some(addr)
    }

    /// The tensor at `addr` is freed: `free_requested`, then `free_completed`, then coalescing.
    pub fn free(&mut self, addr: u64) {
        self.free_from(addr, None);
    }

    /// Frees the block at `addr`, its free events carrying `context` (the code that frees it,
    /// as `PyTorch` records with `context="all"`), else the block's own stack.
    pub fn free_from(&mut self, addr: u64, context: Option<u32>) {
        let Some(seg_addr) = self.segment_of(addr) else {
            return;
        };
        let Some(seg) = self.segments.get_mut(&seg_addr) else {
            return;
        };
        let stream = seg.stream;
        let Some(block) = seg.blocks.get_mut(&addr) else {
            return;
        };
        if !block.allocated {
            return;
        }
        block.allocated = false;
        let (requested, stack) = (block.requested, context.or(block.stack.take()));
        self.allocated_bytes -= requested;
        self.record(Action::FreeRequested, addr, requested, stream, stack, None);
        self.tick(1);
        self.record(Action::FreeCompleted, addr, requested, stream, stack, None);

        self.coalesce(seg_addr, addr);
    }

    /// Merges the free block at `addr` (not yet among the free blocks) with the free blocks right
    /// before and after it, and files the result as free; its address.
    fn coalesce(&mut self, seg_addr: u64, addr: u64) -> u64 {
        let Some(seg) = self.segments.get_mut(&seg_addr) else {
            return addr;
        };
        let (pool, stream) = (seg.pool, seg.stream);
        let mut start = addr;
        let mut size = seg.blocks.get(&addr).map_or(0, |b| b.size);
        if let Some((&next, nb)) = seg.blocks.range(addr + 1..).next()
            && !nb.allocated
            && next == addr.saturating_add(size)
        {
            self.free.remove(&(pool, stream, nb.size, next));
            size += nb.size;
            seg.blocks.remove(&next);
        }
        if let Some((&prev, pb)) = seg.blocks.range(..addr).next_back()
            && !pb.allocated
            && prev.saturating_add(pb.size) == addr
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
        start
    }

    /// Gives the segment at `addr` back to the device, if it is one free block (`release_block`);
    /// its size, or 0.
    fn release_segment(&mut self, addr: u64, context: Option<u32>) -> u64 {
        if !self
            .segments
            .get(&addr)
            .is_some_and(|s| !s.expandable && s.is_whole_and_free())
        {
            return 0;
        }
        let Some(seg) = self.segments.remove(&addr) else {
            return 0;
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
        seg.size
    }

    /// Frees cached blocks of `max_split_size` or more for a request of `size` that failed
    /// (`release_available_cached_blocks`): the smallest such block that is as large as the
    /// request (or as `max_split_size`), else the largest ones until they add up to it. Whether
    /// it freed enough.
    fn release_available(
        &mut self,
        pool: PoolKind,
        stream: i128,
        size: u64,
        context: Option<u32>,
    ) -> bool {
        let Some(max_split) = self.config.max_split_size_bytes else {
            return false;
        };
        let key = size.max(max_split);
        let fit = self.free.at_least(pool, stream, key).next().copied();
        if let Some(block) = fit
            && !self
                .segment_of(block.3)
                .is_some_and(|s| self.segments[&s].expandable)
        {
            return self.release_segment(block.3, context) > 0;
        }
        // No single block is large enough: free the oversize ones, largest first.
        let below = fit.map_or(u64::MAX, |b| b.2);
        let candidates: Vec<FreeKey> = self
            .free
            .set
            .range((pool, stream, 0, 0)..(pool, stream, below, fit.map_or(0, |b| b.3)))
            .rev()
            .take_while(|b| b.2 >= max_split)
            .copied()
            .collect();
        let mut released = 0;
        for block in candidates {
            if released >= key {
                break;
            }
            released += self.release_segment(block.3, context);
        }
        released >= key
    }

    /// Frees the oldest cached segments of the large pool once reserved passes
    /// `garbage_collection_threshold` of the capacity (`garbage_collect_cached_blocks`): rounds
    /// of freeing every one whose age (searches of the pool it sat through free) is at least the
    /// average, until as much as reserved is over the threshold is freed.
    fn garbage_collect(&mut self, context: Option<u32>) {
        let Some(fraction) = self.config.garbage_collection_threshold else {
            return;
        };
        let threshold = (fraction * self.capacity_bytes as f64) as u64;
        if self.reserved_bytes <= threshold {
            return;
        }
        let target = self.reserved_bytes - threshold;
        let mut freeable: Vec<(u64, u64)> = self
            .free
            .set
            .range((PoolKind::Large, i128::MIN, 0, 0)..)
            .filter(|b| {
                self.segments
                    .get(&b.3)
                    .is_some_and(|s| !s.expandable && s.is_whole_and_free())
            })
            .map(|b| (b.3, self.free.age(PoolKind::Large, b.3)))
            .collect();
        let mut total_age: u64 = freeable.iter().map(|b| b.1).sum();
        let mut reclaimed = 0;
        while reclaimed < target && !freeable.is_empty() {
            let average = total_age as f64 / freeable.len() as f64;
            let (old, young): (Vec<_>, Vec<_>) =
                freeable.into_iter().partition(|b| b.1 as f64 >= average);
            if old.is_empty() {
                break;
            }
            for (addr, age) in old {
                reclaimed += self.release_segment(addr, context);
                total_age -= age;
            }
            freeable = young;
        }
    }

    /// Releases every cached segment that holds no live block (`torch.cuda.empty_cache()`,
    /// `release_cached_blocks`), and unmaps the whole free pages of expandable segments, also
    /// in their middle: pool by pool (large, then small), each in best-fit order
    /// (`release_blocks`), as a recorded trace lists them. The releases carry `context` (the
    /// `empty_cache()` call, or the request that waits for them), as `PyTorch` records them.
    pub fn release_cached(&mut self, context: Option<u32>) {
        for pool in [PoolKind::Large, PoolKind::Small] {
            let cached: Vec<FreeKey> = self
                .free
                .set
                .range((pool, i128::MIN, 0, 0)..=(pool, i128::MAX, u64::MAX, u64::MAX))
                .copied()
                .collect();
            let mut to_unmap = Vec::new();
            for key in cached {
                if self.segment_at(key.3).is_some_and(|(_, s)| s.expandable) {
                    to_unmap.push(key);
                } else {
                    self.release_segment(key.3, context);
                }
            }
            for key in to_unmap {
                self.unmap_block(key, context);
            }
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
        assert_eq!(a.allocated_bytes, 4000, "allocated counts requested bytes");
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
        assert!(
            a.segments.is_empty(),
            "nothing mapped: the segment is given up"
        );
    }
    const MIB: u64 = 1 << 20;

    fn with(config: Config, capacity_bytes: u64) -> Allocator {
        Allocator::with_config(1 << 40, capacity_bytes, config, 1000, 0)
    }

    fn segment_sizes_mib(a: &Allocator) -> Vec<u64> {
        let mut sizes: Vec<u64> = a.segments.values().map(|s| s.size / MIB).collect();
        sizes.sort_unstable();
        sizes
    }

    #[test]
    fn roundup_power2_divisions_rounds_to_the_next_division() {
        // PyTorch's documentation: with 4 divisions, 1200 MiB lies between 1024 and 2048 MiB,
        // whose divisions are 1024, 1280, 1536 and 1792; it rounds to 1280 MiB.
        let four = Config {
            roundup_power2_divisions: [4; ROUNDUP_INTERVALS],
            ..Config::default()
        };
        assert_eq!(four.round(1200 * MIB), 1280 * MIB);
        assert_eq!(four.round(1280 * MIB), 1280 * MIB);
        assert_eq!(four.round(1024 * MIB), 1024 * MIB, "a power of two stays");
        // Up to 512 × divisions bytes, the plain 512-byte rounding.
        assert_eq!(four.round(1000), 1024);
        assert_eq!(four.round(5000), 5120);
        assert_eq!(Config::default().round(1200 * MIB), 1200 * MIB);
    }

    #[test]
    fn max_split_size_keeps_big_blocks_whole_and_away_from_small_requests() {
        let config = Config {
            max_split_size_bytes: Some(100 * MIB),
            ..Config::default()
        };
        let mut a = with(config, u64::MAX / 4);
        let big = a.malloc(200 * MIB, 0, None).expect("fits");
        a.free(big);
        // 50 MiB is below max_split: the free 200 MiB block is not for it.
        a.malloc(50 * MIB, 0, None).expect("fits");
        assert_eq!(segment_sizes_mib(&a), [50, 200]);
        // 190 MiB is above it: a block up to 20 MiB larger serves it, whole (not split).
        assert_eq!(a.malloc(190 * MIB, 0, None), Some(big));
        assert_eq!(a.segments[&big].blocks.len(), 1);
        // Without the setting, the 50 MiB request splits the cached 200 MiB block.
        let mut b = with(Config::default(), u64::MAX / 4);
        let big = b.malloc(200 * MIB, 0, None).expect("fits");
        b.free(big);
        assert_eq!(b.malloc(50 * MIB, 0, None), Some(big));
        assert_eq!(segment_sizes_mib(&b), [200]);
    }

    #[test]
    fn a_full_device_first_frees_the_oversize_blocks_it_may() {
        let config = Config {
            max_split_size_bytes: Some(100 * MIB),
            ..Config::default()
        };
        let mut a = with(config, 300 * MIB);
        let big = a.malloc(200 * MIB, 0, None).expect("fits");
        a.free(big);
        // 150 MiB may not take the 200 MiB block (20 MiB larger or more), and 200 + 150 MiB
        // does not fit: the oversize block is freed and the new segment made.
        a.malloc(150 * MIB, 0, None)
            .expect("fits after the release");
        assert_eq!(segment_sizes_mib(&a), [150]);
        assert_eq!((a.counts.segment_free, a.stalls.len()), (1, 1));
        assert_eq!(
            a.stalls[0].reserved_before_bytes - a.stalls[0].reserved_after_bytes,
            200 * MIB
        );
    }

    #[test]
    fn garbage_collection_frees_the_cached_segments_older_than_average() {
        let config = Config {
            garbage_collection_threshold: Some(0.5),
            ..Config::default()
        };
        let mut a = with(config, 100 * MIB);
        // Searches of the large pool: 1 (x), 2 (y), 3 (z). x is free from search 1, y from 2:
        // at z's, ages 2 and 1, average 1.5: only x goes; reserved (62 MiB) was 12 over 50.
        let x = a.malloc(30 * MIB, 0, None).expect("fits");
        a.free(x);
        let y = a.malloc(32 * MIB, 0, None).expect("fits");
        a.free(y);
        a.malloc(34 * MIB, 0, None).expect("fits");
        assert_eq!(segment_sizes_mib(&a), [32, 34]);
        // The request waited for the collection's cudaFree: one stall, releasing x's 30 MiB.
        assert_eq!(a.stalls.len(), 1);
        assert_eq!(
            a.stalls[0].reserved_before_bytes - a.stalls[0].reserved_after_bytes,
            30 * MIB
        );
        // Without a capacity there is no memory fraction, and the allocator does not collect.
        let mut b = with(config, u64::MAX / 4);
        let x = b.malloc(30 * MIB, 0, None).expect("fits");
        b.free(x);
        let y = b.malloc(32 * MIB, 0, None).expect("fits");
        b.free(y);
        b.malloc(34 * MIB, 0, None).expect("fits");
        assert_eq!(segment_sizes_mib(&b), [30, 32, 34]);
    }

    #[test]
    fn expandable_segments_prefer_any_other_block_to_the_growing_tail_and_split_finely() {
        let config = Config {
            expandable_segments: true,
            ..Config::default()
        };
        let mut a = with(config, u64::MAX / 4);
        // One 20 MiB page: x [0, 10), y [10, 16), the free tail [16, 20).
        let x = a.malloc(10 * MIB, 0, None).expect("fits");
        a.malloc(6 * MIB, 0, None).expect("fits");
        a.free(x);
        // For 3 MiB the 4 MiB tail is the best fit by size, but it counts as what it can grow
        // to: the free 10 MiB block goes first.
        let small = a.malloc(3 * MIB, 0, None);
        assert_eq!(small, Some(x));
        a.free(x);
        // 0.5 MiB left over is split off (≥ 512 bytes; the large pool otherwise keeps ≤ 1 MiB).
        assert_eq!(a.malloc(9 * MIB + MIB / 2, 0, None), Some(x));
        let seg = a.segments.values().next().expect("one segment");
        assert_eq!(seg.blocks.len(), 4, "{:?}", seg.blocks);
        assert_eq!(a.reserved_bytes, 20 * MIB);
    }
    #[test]
    fn an_oversize_free_tail_serves_a_request_without_a_map_of_nothing() {
        let config = Config {
            expandable_segments: true,
            max_split_size_bytes: Some(100 * MIB),
            ..Config::default()
        };
        let mut a = with(config, u64::MAX / 4);
        let big = a.malloc(200 * MIB, 0, None).expect("fits");
        a.free(big);
        // Best fit passes the free 200 MiB tail over (it is ≥ max_split_size); growing the
        // segment finds it mapped and large enough: no new pages, no empty map.
        assert_eq!(a.malloc(50 * MIB, 0, None), Some(big));
        assert_eq!((a.counts.segment_map, a.reserved_bytes), (1, 200 * MIB));
    }

    /// What the model holds of the device is what its segments have mapped.
    fn assert_reserved_is_mapped(a: &Allocator) {
        let mapped: u64 = a.segments.values().map(GenSegment::mapped_bytes).sum();
        assert_eq!(mapped, a.reserved_bytes);
    }

    /// The unmap and map events of `a`'s trace, in MiB from `base`.
    fn page_events_mib(a: &Allocator, base: u64) -> Vec<(Action, u64, u64)> {
        a.trace
            .iter()
            .filter(|e| matches!(e.action, Action::SegmentMap | Action::SegmentUnmap))
            .map(|e| (e.action, (e.addr - base) / MIB, e.size / MIB))
            .collect()
    }

    /// Worked by hand from `release_blocks`, `unmap_block`, `find_expandable_block` and
    /// `map_block`: `empty_cache` unmaps a free block's pages in the middle of the segment (a
    /// hole); the next request maps the hole's lowest pages, not new ones at the end; a request
    /// larger than what is left of the hole takes the free block before it, maps the rest of the
    /// hole and merges the three.
    #[test]
    fn empty_cache_leaves_holes_that_later_requests_map_first() {
        let config = Config {
            expandable_segments: true,
            ..Config::default()
        };
        let mut a = with(config, u64::MAX / 4);
        let x = a.malloc(60 * MIB, 0, None).expect("fits");
        a.malloc(20 * MIB, 0, None).expect("fits");
        a.free(x);
        a.release_cached(None);
        let seg = a.segments.get(&x).expect("the segment stays");
        assert_eq!(seg.holes, BTreeMap::from([(x, 60 * MIB)]));
        assert_eq!(seg.mapped_ranges(x), [(x + 60 * MIB, 20 * MIB)]);
        assert_eq!(a.reserved_bytes, 20 * MIB);
        assert_reserved_is_mapped(&a);
        // 30 MiB: two pages at the hole's start; 20 MiB of hole left.
        assert_eq!(a.malloc(30 * MIB, 0, None), Some(x));
        assert_eq!(
            a.segments[&x].mapped_ranges(x),
            [(x, 40 * MIB), (x + 60 * MIB, 20 * MIB)]
        );
        assert_reserved_is_mapped(&a);
        // 25 MiB: the free 10 MiB at 30 MiB plus one more page of the hole, merged.
        assert_eq!(a.malloc(25 * MIB, 0, None), Some(x + 30 * MIB));
        assert!(a.segments[&x].holes.is_empty());
        assert_eq!(a.segments[&x].mapped_ranges(x), [(x, 80 * MIB)]);
        assert_eq!(a.reserved_bytes, 80 * MIB);
        assert_reserved_is_mapped(&a);
        assert_eq!(
            page_events_mib(&a, x),
            [
                (Action::SegmentMap, 0, 60),
                (Action::SegmentMap, 60, 20),
                (Action::SegmentUnmap, 0, 60),
                (Action::SegmentMap, 0, 40),
                (Action::SegmentMap, 40, 20),
            ]
        );
    }

    /// Worked by hand: only a free block's whole pages are unmapped, the bytes before and after
    /// them stay free blocks; and best fit counts a free block by what it can grow to
    /// (`expandable_size`), so of two free 10 MiB blocks the one before the hole goes last.
    #[test]
    fn only_whole_pages_are_unmapped_and_a_block_before_a_hole_counts_as_larger() {
        let config = Config {
            expandable_segments: true,
            ..Config::default()
        };
        let mut a = with(config, u64::MAX / 4);
        // [0, 10) x, then y [10, 50) (its 40 MiB need two more pages), then z [50, 60).
        let x = a.malloc(10 * MIB, 0, None).expect("fits");
        let y = a.malloc(40 * MIB, 0, None).expect("fits");
        let z = a.malloc(10 * MIB, 0, None).expect("fits");
        assert_eq!((y, z), (x + 10 * MIB, x + 50 * MIB));
        a.free(y);
        a.release_cached(None);
        // Pages [20, 40) go; [10, 20) and [40, 50) stay free.
        assert_eq!(
            page_events_mib(&a, x).last(),
            Some(&(Action::SegmentUnmap, 20, 20))
        );
        let seg = &a.segments[&x];
        let free: Vec<(u64, u64)> = seg
            .blocks
            .iter()
            .filter(|(_, b)| !b.allocated)
            .map(|(&at, b)| ((at - x) / MIB, b.size / MIB))
            .collect();
        assert_eq!(free, [(10, 10), (40, 10)]);
        assert_eq!(a.reserved_bytes, 40 * MIB);
        assert_reserved_is_mapped(&a);
        // Equal sizes; the one at 10 MiB is first by address but can grow into the hole (30).
        assert_eq!(a.malloc(5 * MIB, 0, None), Some(x + 40 * MIB));
    }
}
