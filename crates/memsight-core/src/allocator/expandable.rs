//! Expandable segments (`expandable_segments:True`): one large virtual range per pool and
//! stream, backed by pages (2 MiB in the small pool, 20 MiB in the large one) mapped as requests
//! need them. `empty_cache` (and the allocator's last retry before an OOM) unmaps every whole
//! free page, also those in the middle of a segment: the segment then has holes, which a later
//! request maps again before any higher address.
//!
//! The rules follow `c10/cuda/CUDACachingAllocator.cpp` (ARCHITECTURE.md gives the lines):
//! `find_expandable_block` (the lowest unmapped range of the pool and stream that, with the free
//! block right before it and the free or unmapped ones after it, has room for the request),
//! `try_allocate_expandable_block` and `map_block` (map whole pages from that range, merge them
//! with the free blocks around them), `unmap_block` (unmap a free block's whole pages, keep the
//! bytes before and after them as free blocks), `release_blocks` (every cached block of the
//! pool, in best-fit order: `Allocator::release_cached`), and `get_free_block`'s
//! `expandable_size`. `torch_npu` has the same
//! code (`NPUCachingAllocator.cpp`).
//!
//! A segment's blocks tile its mapped pages; its holes are the unmapped ranges below its end,
//! and past its end lies the rest of its virtual range.

use std::collections::BTreeMap;

use super::{
    Allocator, FreeKey, GenBlock, GenSegment, LARGE_SEGMENT_BYTES, PoolKind, SMALL_SEGMENT_BYTES,
    SegmentPlace,
};
use crate::model::Action;

/// The virtual range the model reserves for one expandable segment (`PyTorch` reserves 1⅛ of
/// the device's memory; 1 TiB is more than that on any device today).
pub(super) const VIRTUAL_RANGE_BYTES: u64 = 1 << 40;

/// The page an expandable segment of `pool` maps at a time (`segment_size_`).
pub(super) fn page_bytes(pool: PoolKind) -> u64 {
    match pool {
        PoolKind::Small => SMALL_SEGMENT_BYTES,
        PoolKind::Large => LARGE_SEGMENT_BYTES,
    }
}

impl GenSegment {
    /// Bytes of device memory the segment holds: its size less its holes.
    pub fn mapped_bytes(&self) -> u64 {
        self.size - self.holes.values().sum::<u64>()
    }

    /// The segment at `addr` as a snapshot lists it: one (address, bytes) per run of mapped
    /// pages (`PyTorch`'s `snapshot()` reports each such run as a segment).
    pub fn mapped_ranges(&self, addr: u64) -> Vec<(u64, u64)> {
        let mut ranges = Vec::with_capacity(self.holes.len() + 1);
        let mut start = addr;
        for (&hole, &bytes) in &self.holes {
            if hole > start {
                ranges.push((start, hole - start));
            }
            start = hole + bytes;
        }
        let end = addr + self.size;
        if end > start {
            ranges.push((start, end - start));
        }
        ranges
    }

    /// The unmapped bytes that start at `at`: a hole, or the rest of the virtual range past the
    /// segment's end; 0 elsewhere.
    fn unmapped_at(&self, seg_addr: u64, at: u64) -> u64 {
        if at == seg_addr + self.size {
            VIRTUAL_RANGE_BYTES.saturating_sub(self.size)
        } else {
            self.holes.get(&at).copied().unwrap_or(0)
        }
    }

    /// How many bytes a request could have from `start` on: free blocks and unmapped ranges in a
    /// row, counted until `want` is reached (`has_available_address_space`).
    fn room_from(&self, seg_addr: u64, start: u64, want: u64) -> u64 {
        let (mut at, mut bytes) = (start, 0u64);
        while bytes < want {
            let step = match self.blocks.get(&at) {
                Some(b) if !b.allocated => b.size,
                Some(_) => break,
                None => self.unmapped_at(seg_addr, at),
            };
            if step == 0 {
                break;
            }
            bytes = bytes.saturating_add(step);
            at = at.saturating_add(step);
        }
        bytes
    }
}

impl Allocator {
    /// What best fit takes a free block's size to be (`expandable_size`): in an expandable
    /// segment, its size plus the unmapped bytes right after it, which it can grow into.
    pub(super) fn expandable_size(&self, (_, _, size, addr): FreeKey) -> u64 {
        let Some((seg_addr, seg)) = self.segment_at(addr) else {
            return size;
        };
        if !seg.expandable {
            return size;
        }
        size.saturating_add(seg.unmapped_at(seg_addr, addr + size))
    }

    /// The lowest place in an expandable segment of `pool` and `stream` with room for `size`
    /// bytes (`find_expandable_block`): (segment, free block or unmapped range). Unmapped
    /// ranges are tried in address order, each with the free block right before it.
    fn find_expandable_block(&self, pool: PoolKind, stream: i128, size: u64) -> Option<(u64, u64)> {
        self.segments
            .iter()
            .filter(|(_, s)| s.expandable && s.pool == pool && s.stream == stream)
            .find_map(|(&seg_addr, seg)| {
                let end = seg_addr + seg.size;
                seg.holes.keys().copied().chain([end]).find_map(|at| {
                    let start = match seg.blocks.range(..at).next_back() {
                        Some((&b, block)) if !block.allocated && b + block.size == at => b,
                        _ => at,
                    };
                    (seg.room_from(seg_addr, start, size) >= size).then_some((seg_addr, start))
                })
            })
    }

    /// Maps pages for a request of `size` (`try_allocate_expandable_block`): at the lowest place
    /// with room, in a new segment if none has it; the free block the request takes, or `None`
    /// when the device has no room (pages mapped before the failure stay mapped, as they do).
    pub(super) fn map_pages(
        &mut self,
        pool: PoolKind,
        stream: i128,
        size: u64,
        stack: Option<u32>,
    ) -> Option<u64> {
        let (seg_addr, mut at) = self
            .find_expandable_block(pool, stream, size)
            .unwrap_or_else(|| {
                let addr = self.new_expandable_segment(pool, stream, stack);
                (addr, addr)
            });
        loop {
            let seg = self.segments.get(&seg_addr)?;
            match seg.blocks.get(&at) {
                Some(block) if block.size >= size => return Some(at),
                // A free block with unmapped pages after it: map what is missing.
                Some(block) => {
                    let next = at + block.size;
                    let want = (size - block.size).min(seg.unmapped_at(seg_addr, next));
                    at = self.map_block(seg_addr, next, want, stack)?;
                }
                None => {
                    let want = size.min(seg.unmapped_at(seg_addr, at));
                    at = self.map_block(seg_addr, at, want, stack)?;
                }
            }
        }
    }

    /// Reserves a virtual range for a new expandable segment; its address.
    fn new_expandable_segment(&mut self, pool: PoolKind, stream: i128, stack: Option<u32>) -> u64 {
        let addr = self.next_address;
        self.next_address = self.next_address.saturating_add(VIRTUAL_RANGE_BYTES);
        self.segments.insert(
            addr,
            GenSegment {
                size: 0,
                pool,
                stream,
                expandable: true,
                stack,
                blocks: BTreeMap::new(),
                holes: BTreeMap::new(),
            },
        );
        addr
    }

    /// Maps the whole pages that hold `bytes` from the unmapped range at `at` (`map_block`); the
    /// free block they join (merged with the free blocks around them), or `None` when the
    /// device has no room.
    fn map_block(&mut self, seg_addr: u64, at: u64, bytes: u64, stack: Option<u32>) -> Option<u64> {
        let seg = self.segments.get(&seg_addr)?;
        let (pool, stream) = (seg.pool, seg.stream);
        let room = seg.unmapped_at(seg_addr, at);
        let map_bytes = bytes
            .div_ceil(page_bytes(pool))
            .saturating_mul(page_bytes(pool))
            .min(room);
        if map_bytes == 0 || self.reserved_bytes.saturating_add(map_bytes) > self.capacity_bytes {
            return None;
        }
        self.tick(20 + (map_bytes >> 21) as i64);
        self.record(Action::SegmentMap, at, map_bytes, stream, stack, None);
        self.reserved_bytes += map_bytes;
        self.peak_reserved_bytes = self.peak_reserved_bytes.max(self.reserved_bytes);
        let seg = self.segments.get_mut(&seg_addr)?;
        if at == seg_addr + seg.size {
            seg.size += map_bytes;
        } else {
            seg.holes.remove(&at);
            if room > map_bytes {
                seg.holes.insert(at + map_bytes, room - map_bytes);
            }
        }
        seg.blocks.insert(at, GenBlock::free(map_bytes));
        Some(self.coalesce(seg_addr, at))
    }

    /// Unmaps the whole pages of the free block `key` (`unmap_block`); the bytes before and
    /// after them stay free blocks, and the pages join the unmapped ranges around them. A
    /// segment left with nothing mapped is given up (`release_expandable_segment`).
    pub(super) fn unmap_block(&mut self, key: FreeKey, context: Option<u32>) {
        let (pool, stream, size, addr) = key;
        let Some((seg_addr, _)) = self.segment_at(addr) else {
            return;
        };
        let page = page_bytes(pool);
        let begin = seg_addr + (addr - seg_addr).div_ceil(page) * page;
        let end = seg_addr + (addr + size - seg_addr) / page * page;
        if begin >= end {
            return;
        }
        self.free.remove(&key);
        let Some(seg) = self.segments.get_mut(&seg_addr) else {
            return;
        };
        if begin > addr {
            if let Some(b) = seg.blocks.get_mut(&addr) {
                b.size = begin - addr;
            }
            self.free.insert((pool, stream, begin - addr, addr));
        } else {
            seg.blocks.remove(&addr);
        }
        if end < addr + size {
            seg.blocks.insert(end, GenBlock::free(addr + size - end));
            self.free.insert((pool, stream, addr + size - end, end));
        }
        let mut start = begin;
        if let Some((&hole, &bytes)) = seg.holes.range(..begin).next_back()
            && hole + bytes == begin
        {
            seg.holes.remove(&hole);
            start = hole;
        }
        let stop = end + seg.holes.remove(&end).unwrap_or(0);
        if stop == seg_addr + seg.size {
            seg.size = start - seg_addr;
        } else {
            seg.holes.insert(start, stop - start);
        }
        let unmapped = end - begin;
        let stack = context.or(seg.stack);
        if seg.size == 0 {
            self.segments.remove(&seg_addr);
        }
        self.reserved_bytes -= unmapped;
        self.tick(300 + (unmapped >> 18) as i64);
        self.record(Action::SegmentUnmap, begin, unmapped, stream, stack, None);
    }

    /// Puts a mapped range that existed before the trace into the expandable segment of its pool
    /// and stream right below it, the unmapped bytes between them a hole; `false` where there is
    /// none (the range starts a segment).
    pub(super) fn join_expandable(&mut self, addr: u64, size: u64, place: SegmentPlace) -> bool {
        let (stream, pool) = place;
        let below = self
            .segments
            .range(..addr)
            .next_back()
            .filter(|(base, s)| {
                s.expandable
                    && s.pool == pool
                    && s.stream == stream
                    && **base + s.size <= addr
                    && addr - **base < VIRTUAL_RANGE_BYTES
            })
            .map(|(&base, _)| base);
        let Some(base) = below else {
            return false;
        };
        let Some(seg) = self.segments.get_mut(&base) else {
            return false;
        };
        let end = base + seg.size;
        if addr > end {
            seg.holes.insert(end, addr - end);
        }
        seg.size = addr + size - base;
        true
    }
}
