//! Segments over time: when each range of device memory the allocator reserved came and went
//! (what the `PyTorch` viewer calls the "Active Cached Segment Timeline"). A `segment_alloc` opens a
//! span and its `segment_free` closes it; on expandable segments each `segment_map` opens one for
//! the pages it maps and a `segment_unmap` closes what it covers (splitting a span it covers in
//! part). Segments the trace never opens were there before it began (a free of one, or the final
//! pool's segments not made in the trace).

use crate::model::{Action, Device, StreamId};

/// One reserved address range and when it was there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentSpan {
    pub address: u64,
    pub size_bytes: u64,
    pub stream: StreamId,
    /// The event that reserved it (`segment_alloc` / `segment_map`, or the unmap that left this
    /// piece of a larger span); `None`: before the trace.
    pub opened_at: Option<u32>,
    /// The event that released it; `None`: still reserved at the end of the trace.
    pub closed_at: Option<u32>,
    /// Pages mapped into an expandable segment rather than a whole segment.
    pub mapped: bool,
}

impl SegmentSpan {
    fn end(&self) -> u64 {
        self.address.saturating_add(self.size_bytes)
    }

    /// Whether it is reserved right after event `e` (`None`: before the first event).
    pub fn is_live_after(&self, e: Option<u32>) -> bool {
        crate::replay::live_after(self.opened_at, self.closed_at, e)
    }
}

/// Every segment span of `device`, in the order they were opened (those from before the trace
/// first, by address).
pub fn spans(device: &Device) -> Vec<SegmentSpan> {
    let trace = &device.trace;
    let mut done: Vec<SegmentSpan> = Vec::new();
    let mut open: Vec<SegmentSpan> = Vec::new();
    let mut pre_trace: Vec<SegmentSpan> = Vec::new();
    for i in 0..trace.len() {
        let (addr, size, e) = (trace.addr[i], trace.size_bytes[i], i as u32);
        match trace.action[i] {
            action @ (Action::SegmentAlloc | Action::SegmentMap) => open.push(SegmentSpan {
                address: addr,
                size_bytes: size,
                stream: trace.stream[i],
                opened_at: Some(e),
                closed_at: None,
                mapped: action == Action::SegmentMap,
            }),
            Action::SegmentFree => {
                if let Some(k) = open.iter().position(|s| s.address == addr) {
                    let mut span = open.remove(k);
                    span.closed_at = Some(e);
                    done.push(span);
                } else {
                    pre_trace.push(SegmentSpan {
                        address: addr,
                        size_bytes: size,
                        stream: trace.stream[i],
                        opened_at: None,
                        closed_at: Some(e),
                        mapped: false,
                    });
                }
            }
            Action::SegmentUnmap => {
                let (u0, u1) = (addr, addr.saturating_add(size));
                // Pages no span of the trace holds were mapped before it began.
                for (a, b) in uncovered(u0, u1, &open) {
                    pre_trace.push(SegmentSpan {
                        address: a,
                        size_bytes: b - a,
                        stream: trace.stream[i],
                        opened_at: None,
                        closed_at: Some(e),
                        mapped: true,
                    });
                }
                let mut k = 0;
                while k < open.len() {
                    let s = &open[k];
                    if s.address >= u1 || s.end() <= u0 {
                        k += 1;
                        continue;
                    }
                    let mut span = open.remove(k);
                    // What is left of it either side of the unmapped range stays, from now on.
                    for (a, b) in [(span.address, u0), (u1, span.end())] {
                        if a < b {
                            open.push(SegmentSpan {
                                address: a,
                                size_bytes: b - a,
                                opened_at: Some(e),
                                closed_at: None,
                                ..span.clone()
                            });
                        }
                    }
                    span.closed_at = Some(e);
                    done.push(span);
                }
            }
            _ => {}
        }
    }
    // What the final pool holds and no span of the trace does was there all along: whole
    // segments, or the pages of an expandable one mapped before the trace.
    for segment in &device.segments {
        let (a, b) = (
            segment.address,
            segment.address.saturating_add(segment.total_size_bytes),
        );
        for (x, y) in uncovered(a, b, &open) {
            pre_trace.push(SegmentSpan {
                address: x,
                size_bytes: y - x,
                stream: segment.stream,
                opened_at: None,
                closed_at: None,
                mapped: segment.is_expandable,
            });
        }
    }
    pre_trace.sort_by_key(|s| s.address);
    let mut all = pre_trace;
    all.extend(done);
    all.extend(open);
    // Opened order; those from before the trace (None) first.
    all.sort_by_key(|s| (s.opened_at.map_or(0, |e| u64::from(e) + 1), s.address));
    all
}

/// The parts of `a..b` that no span of `spans` covers.
fn uncovered(a: u64, b: u64, spans: &[SegmentSpan]) -> Vec<(u64, u64)> {
    let mut inside: Vec<(u64, u64)> = spans
        .iter()
        .filter(|s| s.address < b && a < s.end())
        .map(|s| (s.address.max(a), s.end().min(b)))
        .collect();
    inside.sort_unstable();
    let mut gaps = Vec::new();
    let mut at = a;
    for (x, y) in inside {
        if x > at {
            gaps.push((at, x));
        }
        at = at.max(y);
    }
    if at < b {
        gaps.push((at, b));
    }
    gaps
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{NO_POOL, NO_STACK, NO_STR, Segment, SegmentType};

    fn device(events: &[(Action, u64, u64)], final_pool: &[(u64, u64)]) -> Device {
        let mut d = Device::default();
        for &(action, addr, size) in events {
            let t = &mut d.trace;
            t.action.push(action);
            t.addr.push(addr);
            t.size_bytes.push(size);
            t.stream.push(0);
            t.time_us.push(0);
            t.stack.push(NO_STACK);
            t.compile_context.push(NO_STR);
            t.user_metadata.push(NO_STR);
            t.pool.push(NO_POOL);
        }
        d.segments = final_pool
            .iter()
            .map(|&(address, size)| Segment {
                address,
                total_size_bytes: size,
                stream: 0,
                pool: NO_POOL,
                segment_type: SegmentType::Large,
                is_expandable: false,
                stack: NO_STACK,
                blocks: Vec::new(),
            })
            .collect();
        d
    }

    fn brief(spans: &[SegmentSpan]) -> Vec<(u64, u64, Option<u32>, Option<u32>)> {
        spans
            .iter()
            .map(|s| (s.address, s.size_bytes, s.opened_at, s.closed_at))
            .collect()
    }

    #[test]
    fn allocs_and_frees_open_and_close_spans_and_the_rest_was_there_before() {
        const MIB: u64 = 1 << 20;
        // 0: alloc A (20 MiB at 0x1000_0000); 1: a block; 2: free of B, made before the trace;
        // 3: alloc C; 4: free A. The final pool holds C and D (D: never in the trace).
        let d = device(
            &[
                (Action::SegmentAlloc, 0x1000_0000, 20 * MIB),
                (Action::Alloc, 0x1000_0000, MIB),
                (Action::SegmentFree, 0x2000_0000, 2 * MIB),
                (Action::SegmentAlloc, 0x3000_0000, 40 * MIB),
                (Action::SegmentFree, 0x1000_0000, 20 * MIB),
            ],
            &[(0x3000_0000, 40 * MIB), (0x4000_0000, 2 * MIB)],
        );
        assert_eq!(
            brief(&spans(&d)),
            vec![
                (0x2000_0000, 2 * MIB, None, Some(2)),
                (0x4000_0000, 2 * MIB, None, None),
                (0x1000_0000, 20 * MIB, Some(0), Some(4)),
                (0x3000_0000, 40 * MIB, Some(3), None),
            ]
        );
        let s = spans(&d);
        assert!(s[2].is_live_after(Some(0)) && s[2].is_live_after(Some(3)));
        assert!(!s[2].is_live_after(Some(4)) && !s[2].is_live_after(None));
        assert!(s[0].is_live_after(None) && !s[0].is_live_after(Some(2)));
    }

    #[test]
    fn an_unmap_in_the_middle_of_mapped_pages_leaves_the_two_ends() {
        const MIB: u64 = 1 << 20;
        let base = 0x12_0000_0000;
        // Map 40 MiB, map 20 more right after, unmap the 20 MiB from base + 10 MiB (across
        // nothing else), then unmap the second map whole.
        let d = device(
            &[
                (Action::SegmentMap, base, 40 * MIB),
                (Action::SegmentMap, base + 40 * MIB, 20 * MIB),
                (Action::SegmentUnmap, base + 10 * MIB, 20 * MIB),
                (Action::SegmentUnmap, base + 40 * MIB, 20 * MIB),
            ],
            &[],
        );
        assert_eq!(
            brief(&spans(&d)),
            vec![
                (base, 40 * MIB, Some(0), Some(2)),
                (base + 40 * MIB, 20 * MIB, Some(1), Some(3)),
                (base, 10 * MIB, Some(2), None),
                (base + 30 * MIB, 10 * MIB, Some(2), None),
            ]
        );
        // Reserved after each event, from the spans: 40, 60, 40, 20 MiB.
        let s = spans(&d);
        let reserved = |e: u32| -> u64 {
            s.iter()
                .filter(|x| x.is_live_after(Some(e)))
                .map(|x| x.size_bytes)
                .sum()
        };
        assert_eq!(
            (0..4).map(reserved).collect::<Vec<_>>(),
            [40 * MIB, 60 * MIB, 40 * MIB, 20 * MIB]
        );
    }
}
