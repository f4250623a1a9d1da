//! Byte buffers for child output: a bounded, offset-addressed log for tracked processes, a
//! head-and-tail capture for one-shot commands, and UTF-8 decoding that never splits a
//! character across two reads.

/// Output of a tracked process, addressed by absolute byte offset. When it outgrows its cap
/// the oldest bytes are dropped; offsets keep counting, so a reader learns what it missed.
#[derive(Debug)]
pub struct OutputLog {
    data: std::collections::VecDeque<u8>,
    /// Absolute offset of `data[0]`.
    base: u64,
    cap: usize,
}

/// One read of an [`OutputLog`].
#[derive(Debug, PartialEq, Eq)]
pub struct Slice {
    pub text: String,
    /// Where the returned text starts (the requested offset, or the oldest kept byte).
    pub offset: u64,
    pub next_offset: u64,
    /// Bytes between the requested offset and `offset` that were already dropped.
    pub dropped: u64,
}

impl OutputLog {
    pub fn new(cap: usize) -> Self {
        OutputLog {
            data: std::collections::VecDeque::new(),
            base: 0,
            cap: cap.max(1),
        }
    }

    pub fn append(&mut self, bytes: &[u8]) {
        self.data.extend(bytes);
        let over = self.data.len().saturating_sub(self.cap);
        if over > 0 {
            self.data.drain(..over);
            self.base += over as u64;
        }
    }

    /// Total bytes ever appended: the offset just past the end.
    pub fn end(&self) -> u64 {
        self.base + self.data.len() as u64
    }

    /// Up to `limit` bytes from `offset`, decoded as UTF-8. The end is moved back to a
    /// character boundary so the next read continues exactly where this one stopped.
    pub fn read(&self, offset: u64, limit: usize) -> Slice {
        let start = offset.clamp(self.base, self.end());
        let dropped = start - offset.min(start);
        let from = (start - self.base) as usize;
        let to = (from + limit).min(self.data.len());
        let bytes: Vec<u8> = self.data.range(from..to).copied().collect();
        let at_end = to == self.data.len();
        let keep = utf8_prefix_len(&bytes, at_end);
        Slice {
            text: String::from_utf8_lossy(&bytes[..keep]).into_owned(),
            offset: start,
            next_offset: start + keep as u64,
            dropped,
        }
    }
}

/// How many bytes of `bytes` to consume so that no UTF-8 character is cut in two. An
/// incomplete sequence at the very end is left for the next read unless the stream is over
/// (`final_chunk`) or it is longer than any character could be (then it is garbage).
pub fn utf8_prefix_len(bytes: &[u8], final_chunk: bool) -> usize {
    if final_chunk {
        return bytes.len();
    }
    let tail_start = bytes.len().saturating_sub(3);
    for i in (tail_start..bytes.len()).rev() {
        let b = bytes[i];
        if b & 0xC0 != 0x80 {
            // A lead byte (or ASCII): does its sequence fit?
            let need = match b {
                0x00..=0x7F => 1,
                0xC0..=0xDF => 2,
                0xE0..=0xEF => 3,
                0xF0..=0xF7 => 4,
                _ => 1,
            };
            return if i + need > bytes.len() {
                i
            } else {
                bytes.len()
            };
        }
    }
    bytes.len()
}

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
    fn log_reads_by_offset_and_reports_dropped_bytes() {
        let mut log = OutputLog::new(8);
        log.append(b"0123456789");
        assert_eq!(log.end(), 10);
        let s = log.read(0, 100);
        assert_eq!(
            (s.text.as_str(), s.offset, s.next_offset, s.dropped),
            ("23456789", 2, 10, 2)
        );
        let s = log.read(4, 3);
        assert_eq!((s.text.as_str(), s.next_offset), ("456", 7));
        let s = log.read(10, 3);
        assert_eq!((s.text.as_str(), s.next_offset), ("", 10));
    }

    #[test]
    fn reads_never_split_a_character() {
        let mut log = OutputLog::new(1024);
        let text = "가나다🦀end";
        log.append(text.as_bytes());
        let mut offset = 0;
        let mut out = String::new();
        loop {
            let s = log.read(offset, 2);
            if s.next_offset == offset {
                // Two bytes never hold a 3- or 4-byte character: widen the window.
                let s = log.read(offset, 4);
                out.push_str(&s.text);
                offset = s.next_offset;
            } else {
                out.push_str(&s.text);
                offset = s.next_offset;
            }
            if offset == log.end() {
                break;
            }
        }
        assert_eq!(out, text);
    }

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
