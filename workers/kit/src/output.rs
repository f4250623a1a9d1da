//! Child output kept bounded and addressed by byte offset (a tracked process's log, a debuggee's
//! output, a worker's stderr tail): the oldest bytes fall out first while offsets keep
//! counting, so a reader learns what it missed, and a read never splits a UTF-8 character.

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

    /// Up to `limit` bytes from `offset`, decoded as UTF-8. A start inside a character (its
    /// first bytes dropped) moves on to the next one; the end is moved back to a character
    /// boundary so the next read continues exactly where this one stopped.
    pub fn read(&self, offset: u64, limit: usize) -> Slice {
        let start = offset.clamp(self.base, self.end());
        let dropped = start - offset.min(start);
        let mut from = (start - self.base) as usize;
        while from < self.data.len() && (self.data[from] & 0xC0) == 0x80 {
            from += 1;
        }
        let start = self.base + from as u64;
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
        // The oldest kept byte is the middle of "ö": the read starts at the next character.
        let mut log = OutputLog::new(4);
        log.append("wöx".as_bytes());
        log.append(b"yz");
        let s = log.read(0, 10);
        assert_eq!((s.text.as_str(), s.offset), ("xyz", 3));
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
}
