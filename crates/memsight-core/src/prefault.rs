//! Page faults on another core.
//!
//! The first write to each fresh page of memory costs a page fault (about 0.35 ms per MB on the
//! 2-core machine measured): the loader fills some 100 MB of columns and arena for a million
//! events, and would spend tens of milliseconds of its one thread on faults while the other core
//! waits. A [`Prefaulter`] has the kernel map, from a thread of its own, the pages a growing
//! vector is about to write (`madvise(MADV_POPULATE_WRITE)`, Linux 5.14 and later).
//!
//! That call neither reads nor writes memory: a page it maps reads as zero, as it would have on
//! its first touch, and a page already mapped is left as it is. So a request that arrives late
//! (the vector has moved, or its memory was freed) changes nothing the program can see, and
//! where the call is missing (another OS, an older kernel) pages fault in as before.

use std::sync::mpsc::{Sender, channel};
use std::thread::JoinHandle;

/// A thread that maps pages ahead of a writer. Dropping it waits for the requests in flight.
pub struct Prefaulter {
    requests: Option<Sender<(usize, usize)>>,
    thread: Option<JoinHandle<()>>,
}

impl Prefaulter {
    /// Starts the thread; `None` where the OS has no way to populate pages ahead.
    pub fn new() -> Option<Self> {
        if !cfg!(target_os = "linux") {
            return None;
        }
        let (requests, inbox) = channel::<(usize, usize)>();
        let thread = std::thread::Builder::new()
            .name("memsight-prefault".into())
            .spawn(move || {
                for (start, len) in inbox {
                    populate(start, len);
                }
            })
            .ok()?;
        Some(Self {
            requests: Some(requests),
            thread: Some(thread),
        })
    }

    /// Makes room in `v` for `ahead` elements past its length (doubling its capacity when it
    /// grows, as `push` would) and asks for the pages of the second half of that room: called at
    /// least every `ahead / 2` pushes, the pages are mapped a half-window before they are written.
    pub fn keep_ahead<T>(&self, v: &mut Vec<T>, ahead: usize) {
        let len = v.len();
        if v.capacity() < len + ahead {
            v.reserve(len.max(ahead));
        }
        let size = std::mem::size_of::<T>();
        let from = v.as_ptr() as usize + (len + ahead / 2) * size;
        self.request(from, (ahead - ahead / 2) * size);
    }

    /// Asks for the pages of `v`'s spare capacity, for a vector about to be filled to it.
    pub fn spare<T>(&self, v: &Vec<T>) {
        let size = std::mem::size_of::<T>();
        let from = v.as_ptr() as usize + v.len() * size;
        self.request(from, (v.capacity() - v.len()) * size);
    }

    fn request(&self, start: usize, len: usize) {
        if len > 0
            && let Some(requests) = &self.requests
        {
            // A closed channel means the thread is gone: the pages fault in as before.
            let _ = requests.send((start, len));
        }
    }
}

impl Drop for Prefaulter {
    fn drop(&mut self) {
        self.requests = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Maps the whole pages within `[start, start + len)`; errors are ignored (see the module doc).
#[cfg(target_os = "linux")]
#[expect(
    unsafe_code,
    reason = "the one system call with no safe wrapper; it touches no memory (see the module doc)"
)]
fn populate(start: usize, len: usize) {
    const MADV_POPULATE_WRITE: libc::c_int = 23;
    const PAGE: usize = 4096;
    let first = start.div_ceil(PAGE) * PAGE;
    let end = (start + len) / PAGE * PAGE;
    if end <= first {
        return;
    }
    // SAFETY: MADV_POPULATE_WRITE reads and writes no memory (see the module doc): on pages
    // that are unmapped, not writable or of another mapping it fails or maps what a first write
    // would have mapped, with the same contents.
    unsafe {
        libc::madvise(first as *mut libc::c_void, end - first, MADV_POPULATE_WRITE);
    }
}

#[cfg(not(target_os = "linux"))]
fn populate(_start: usize, _len: usize) {}
