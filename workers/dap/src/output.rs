//! The debuggee's output (stdout and stderr interleaved as the adapter reported them), kept
//! bounded and addressed by byte offset: the oldest bytes fall out first while offsets keep
//! counting, and a read never splits a UTF-8 character.

use std::collections::VecDeque;

/// One read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Slice {
    pub text: String,
    /// Where the text starts (later than asked when those bytes were dropped).
    pub offset: u64,
    pub next_offset: u64,
    /// Bytes between the asked offset and `offset` that fell out of the buffer.
    pub dropped: u64,
}

#[derive(Debug)]
pub struct OutputLog {
    buf: VecDeque<u8>,
    /// The offset of `buf[0]`.
    start: u64,
    cap: usize,
}

impl OutputLog {
    pub fn new(cap: usize) -> Self {
        OutputLog {
            buf: VecDeque::new(),
            start: 0,
            cap: cap.max(16),
        }
    }

    pub fn append(&mut self, bytes: &[u8]) {
        self.buf.extend(bytes);
        let over = self.buf.len().saturating_sub(self.cap);
        if over > 0 {
            self.buf.drain(..over);
            self.start += over as u64;
        }
    }

    /// The offset after the last byte.
    pub fn end(&self) -> u64 {
        self.start + self.buf.len() as u64
    }

    /// Up to `limit` bytes from `offset`, cut back to a character boundary.
    pub fn read(&self, offset: u64, limit: usize) -> Slice {
        let from = offset.clamp(self.start, self.end());
        let dropped = from - offset.min(from);
        let mut lo = (from - self.start) as usize;
        // Starting inside a character (its first bytes dropped): skip to the next one.
        while lo < self.buf.len() && (self.buf[lo] & 0xC0) == 0x80 {
            lo += 1;
        }
        let mut hi = (lo + limit).min(self.buf.len());
        if hi < self.buf.len() {
            // Back off to the start of the character that straddles `hi`.
            let mut h = hi;
            while h > lo && (self.buf[h] & 0xC0) == 0x80 {
                h -= 1;
            }
            if h > lo {
                hi = h;
            }
        }
        let bytes: Vec<u8> = self.buf.range(lo..hi).copied().collect();
        Slice {
            text: String::from_utf8_lossy(&bytes).into_owned(),
            offset: self.start + lo as u64,
            next_offset: self.start + hi as u64,
            dropped,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_with_offsets_and_whole_characters() {
        let mut log = OutputLog::new(16);
        log.append("héllo ".as_bytes());
        let s = log.read(0, 2);
        assert_eq!((s.text.as_str(), s.next_offset), ("h", 1), "é is not split");
        let s = log.read(1, 100);
        assert_eq!(s.text, "éllo ");
        log.append("wörld, again".as_bytes());
        assert_eq!(log.end(), 20);
        let s = log.read(0, 100);
        assert_eq!(s.dropped, 4);
        assert_eq!(s.offset, 4);
        assert_eq!(s.text, "lo wörld, again");
        let s = log.read(99, 10);
        assert_eq!((s.text.as_str(), s.offset, s.next_offset), ("", 20, 20));
    }
}
