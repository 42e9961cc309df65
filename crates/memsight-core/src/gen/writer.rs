//! Writes pickles the way Python's `pickle.dump` does for snapshot data (protocol 4 or 5):
//! framed, every string and container memoized, repeated strings and shared stack lists written
//! once and referenced through the memo afterwards, items in batches of 1000.

use std::io::{self, Write};

use rustc_hash::FxHashMap;

const FRAME_TARGET_BYTES: usize = 64 * 1024;
const BATCH: usize = 1000;

pub struct PickleWriter<W: Write> {
    out: W,
    frame: Vec<u8>,
    next_memo: u32,
    strings: FxHashMap<String, u32>,
    /// Memo index of each shared object written so far, by the caller's key.
    shared: FxHashMap<u64, u32>,
    /// Items written in the open batch of each open container.
    batches: Vec<usize>,
}

impl<W: Write> PickleWriter<W> {
    pub fn new(mut out: W, protocol: u8) -> io::Result<Self> {
        out.write_all(&[0x80, protocol])?;
        Ok(Self {
            out,
            frame: Vec::with_capacity(FRAME_TARGET_BYTES * 2),
            next_memo: 0,
            strings: FxHashMap::default(),
            shared: FxHashMap::default(),
            batches: Vec::new(),
        })
    }

    fn memoize(&mut self) -> u32 {
        self.frame.push(0x94);
        self.next_memo += 1;
        self.next_memo - 1
    }

    fn get(&mut self, index: u32) {
        if let Ok(i) = u8::try_from(index) {
            self.frame.extend_from_slice(&[b'h', i]);
        } else {
            self.frame.push(b'j');
            self.frame.extend_from_slice(&index.to_le_bytes());
        }
    }

    /// Ends the frame once it is big enough (called between items, as Python's framer does).
    fn commit(&mut self) -> io::Result<()> {
        if self.frame.len() >= FRAME_TARGET_BYTES {
            self.flush_frame()?;
        }
        Ok(())
    }

    fn flush_frame(&mut self) -> io::Result<()> {
        if !self.frame.is_empty() {
            self.out.write_all(&[0x95])?;
            self.out
                .write_all(&(self.frame.len() as u64).to_le_bytes())?;
            self.out.write_all(&self.frame)?;
            self.frame.clear();
        }
        Ok(())
    }

    pub fn str(&mut self, text: &str) {
        if let Some(&i) = self.strings.get(text) {
            self.get(i);
            return;
        }
        let bytes = text.as_bytes();
        if let Ok(n) = u8::try_from(bytes.len()) {
            self.frame.extend_from_slice(&[0x8c, n]);
        } else {
            self.frame.push(b'X');
            self.frame
                .extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        }
        self.frame.extend_from_slice(bytes);
        let i = self.memoize();
        self.strings.insert(text.to_string(), i);
    }

    pub fn int(&mut self, value: i128) {
        match value {
            0..=0xff => self.frame.extend_from_slice(&[b'K', value as u8]),
            0x100..=0xffff => {
                self.frame.push(b'M');
                self.frame.extend_from_slice(&(value as u16).to_le_bytes());
            }
            _ if i32::try_from(value).is_ok() => {
                self.frame.push(b'J');
                self.frame.extend_from_slice(&(value as i32).to_le_bytes());
            }
            _ => {
                // LONG1: minimal little-endian two's complement.
                let bytes = value.to_le_bytes();
                let mut n = 16;
                while n > 1 {
                    let (top, next) = (bytes[n - 1], bytes[n - 2]);
                    if (top == 0 && next & 0x80 == 0) || (top == 0xff && next & 0x80 != 0) {
                        n -= 1;
                    } else {
                        break;
                    }
                }
                self.frame.extend_from_slice(&[0x8a, n as u8]);
                self.frame.extend_from_slice(&bytes[..n]);
            }
        }
    }

    pub fn float(&mut self, value: f64) {
        self.frame.push(b'G');
        self.frame.extend_from_slice(&value.to_be_bytes());
    }

    pub fn bool(&mut self, value: bool) {
        self.frame.push(if value { 0x88 } else { 0x89 });
    }

    pub fn none(&mut self) {
        self.frame.push(b'N');
    }

    /// A pair tuple (`segment_pool_id`), memoized as Python does.
    pub fn pair(&mut self, a: i128, b: i128) {
        self.int(a);
        self.int(b);
        self.frame.push(0x86);
        self.memoize();
    }

    /// Writes a reference if the shared object `key` was written before; returns false when the
    /// caller must write it now (starting with [`Self::begin_shared_list`]).
    pub fn shared_ref(&mut self, key: u64) -> bool {
        if let Some(&i) = self.shared.get(&key) {
            self.get(i);
            true
        } else {
            false
        }
    }

    pub fn begin_list(&mut self) {
        self.frame.push(b']');
        self.memoize();
        self.batches.push(0);
    }

    /// Starts a list that later [`Self::shared_ref`] calls with `key` refer to.
    pub fn begin_shared_list(&mut self, key: u64) {
        self.frame.push(b']');
        let i = self.memoize();
        self.shared.insert(key, i);
        self.batches.push(0);
    }

    pub fn begin_dict(&mut self) {
        self.frame.push(b'}');
        self.memoize();
        self.batches.push(0);
    }

    /// Call before each list item or dict key.
    pub fn item(&mut self) -> io::Result<()> {
        if let Some(n) = self.batches.last_mut() {
            if *n == 0 {
                self.frame.push(b'(');
            }
            *n += 1;
        }
        self.commit()
    }

    /// Call after each list item or dict value.
    fn close_batch(&mut self, op: u8, force: bool) {
        if let Some(n) = self.batches.last_mut()
            && *n > 0
            && (force || *n == BATCH)
        {
            self.frame.push(op);
            *n = 0;
        }
    }

    pub fn end_list_item(&mut self) {
        self.close_batch(b'e', false);
    }

    pub fn end_dict_item(&mut self) {
        self.close_batch(b'u', false);
    }

    pub fn end_list(&mut self) {
        self.close_batch(b'e', true);
        self.batches.pop();
    }

    pub fn end_dict(&mut self) {
        self.close_batch(b'u', true);
        self.batches.pop();
    }

    /// A dict entry whose value `write_value` writes.
    pub fn entry(&mut self, key: &str, write_value: impl FnOnce(&mut Self)) -> io::Result<()> {
        self.item()?;
        self.str(key);
        write_value(self);
        self.end_dict_item();
        Ok(())
    }

    pub fn finish(mut self) -> io::Result<W> {
        self.frame.push(b'.');
        self.flush_frame()?;
        self.out.flush()?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pickle::{NoHooks, Tree, unpickle};

    #[test]
    fn integers_round_trip_through_the_reader() {
        let values = [
            0i128,
            255,
            256,
            65535,
            65536,
            -1,
            -129,
            i128::from(i32::MIN),
            1 << 40,
            -(1 << 40),
            1 << 63,
            i128::MAX,
            i128::MIN,
        ];
        let mut w = PickleWriter::new(Vec::new(), 4).expect("write");
        w.begin_list();
        for v in values {
            w.item().expect("write");
            w.int(v);
            w.end_list_item();
        }
        w.end_list();
        let bytes = w.finish().expect("write");
        let mut tree = Tree::default();
        let (top, protocol, _) =
            unpickle(bytes.as_slice(), &mut tree, &mut NoHooks).expect("reads");
        assert_eq!(protocol, 4);
        let read: Vec<i128> = tree
            .items(top)
            .expect("list")
            .iter()
            .map(|v| tree.int(*v).expect("int"))
            .collect();
        assert_eq!(read, values);
    }
}
