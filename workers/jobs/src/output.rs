//! Byte buffers for child output: a head-and-tail capture for one-shot commands and UTF-8
//! decoding that never splits a character across two reads; the bounded, offset-addressed log
//! of tracked processes is `toolvisor_kit::output`'s, shared with the debugger.

pub use toolvisor_kit::output::{OutputLog, Slice, utf8_prefix_len};

/// Streams bytes into text, holding back a character cut at a chunk boundary.
#[derive(Default, Debug)]
pub struct Utf8Stream {
    pending: Vec<u8>,
}

impl Utf8Stream {
    pub fn push(&mut self, chunk: &[u8]) -> String {
        self.pending.extend_from_slice(chunk);
        let keep = utf8_prefix_len(&self.pending, false);
        let rest = self.pending.split_off(keep);
        let text = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending = rest;
        text
    }

    pub fn finish(&mut self) -> String {
        let text = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        text
    }
}

/// Captures a stream's first and last `cap / 2` bytes, counting everything.
#[derive(Debug)]
pub struct HeadTail {
    head: Vec<u8>,
    tail: std::collections::VecDeque<u8>,
    half: usize,
    total: u64,
}

impl HeadTail {
    pub fn new(cap: usize) -> Self {
        HeadTail {
            head: Vec::new(),
            tail: std::collections::VecDeque::new(),
            half: (cap / 2).max(1),
            total: 0,
        }
    }

    pub fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        if self.head.len() < self.half {
            let take = (self.half - self.head.len()).min(bytes.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        self.tail.extend(bytes);
        let over = self.tail.len().saturating_sub(self.half);
        self.tail.drain(..over);
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    pub fn truncated(&self) -> bool {
        self.total > (self.head.len() + self.tail.len()) as u64
    }

    /// The captured text, with a marker naming how much was left out in the middle.
    pub fn text(&self) -> String {
        let omitted = self.total - (self.head.len() + self.tail.len()) as u64;
        let head = String::from_utf8_lossy(&self.head);
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        let tail = String::from_utf8_lossy(&tail);
        if omitted == 0 {
            format!("{head}{tail}")
        } else {
            format!("{head}\n[... {omitted} bytes omitted ...]\n{tail}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_holds_back_a_cut_character() {
        let mut s = Utf8Stream::default();
        let bytes = "é🦀".as_bytes();
        let mut out = s.push(&bytes[..1]);
        out += &s.push(&bytes[1..4]);
        out += &s.push(&bytes[4..]);
        out += &s.finish();
        assert_eq!(out, "é🦀");
    }

    #[test]
    fn head_tail_keeps_both_ends() {
        let mut h = HeadTail::new(8);
        h.push(b"abcdefghijklmnop");
        assert!(h.truncated());
        assert_eq!(h.total(), 16);
        assert_eq!(h.text(), "abcd\n[... 8 bytes omitted ...]\nmnop");
        let mut h = HeadTail::new(100);
        h.push(b"short");
        assert!(!h.truncated());
        assert_eq!(h.text(), "short");
    }
}
