//! Small text helpers shared by the tools: binary sniffing, cutting on character
//! boundaries, and lossy decoding that counts what it replaced.

/// How many leading bytes are sniffed for a NUL to call a file binary (as git and grep do).
pub const SNIFF_BYTES: usize = 8192;

/// Why `head` (the first bytes of a file) looks binary, if it does.
pub fn binary_reason(head: &[u8]) -> Option<String> {
    let head = &head[..head.len().min(SNIFF_BYTES)];
    if head.starts_with(&[0xFF, 0xFE]) || head.starts_with(&[0xFE, 0xFF]) {
        return Some(
            "UTF-16 text (byte-order mark); convert it with `iconv -f UTF-16 -t UTF-8` via bash"
                .into(),
        );
    }
    memchr::memchr(0, head).map(|at| format!("NUL byte at offset {at}"))
}

/// Decode `bytes` as UTF-8, replacing invalid sequences with U+FFFD; also return how many
/// sequences were replaced.
pub fn decode_lossy(bytes: &[u8]) -> (std::borrow::Cow<'_, str>, usize) {
    match std::str::from_utf8(bytes) {
        Ok(s) => (std::borrow::Cow::Borrowed(s), 0),
        Err(_) => {
            let mut bad = 0;
            for chunk in bytes.utf8_chunks() {
                if !chunk.invalid().is_empty() {
                    bad += 1;
                }
            }
            (String::from_utf8_lossy(bytes), bad)
        }
    }
}

/// The longest prefix of `s` with at most `max` characters.
pub fn prefix_chars(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// The longest suffix of `s` with at most `max` characters.
pub fn suffix_chars(s: &str, max: usize) -> &str {
    if max == 0 {
        return "";
    }
    match s.char_indices().rev().nth(max - 1) {
        Some((i, _)) => &s[i..],
        None => s,
    }
}

/// `line` cut to `max` characters, with how many were cut.
pub fn cut_line(line: &str, max: usize) -> (std::borrow::Cow<'_, str>, usize) {
    if line.len() <= max {
        // No more characters than bytes: nothing to cut, nothing to count.
        return (std::borrow::Cow::Borrowed(line), 0);
    }
    let head = prefix_chars(line, max);
    if head.len() == line.len() {
        (std::borrow::Cow::Borrowed(line), 0)
    } else {
        let cut = line[head.len()..].chars().count();
        (
            std::borrow::Cow::Owned(format!("{head}… [{cut} more characters]")),
            cut,
        )
    }
}

/// 1-based line number of byte offset `at` in `bytes`.
pub fn line_of(bytes: &[u8], at: usize) -> usize {
    memchr::memchr_iter(b'\n', &bytes[..at.min(bytes.len())]).count() + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_respect_characters() {
        assert_eq!(prefix_chars("한글abc", 2), "한글");
        assert_eq!(suffix_chars("abc한글", 2), "한글");
        assert_eq!(suffix_chars("ab", 5), "ab");
        assert_eq!(suffix_chars("ab", 0), "");
        let (cut, n) = cut_line("가나다라", 2);
        assert_eq!((cut.as_ref(), n), ("가나… [2 more characters]", 2));
    }

    #[test]
    fn binary_and_lossy() {
        assert!(binary_reason(b"abc\0def").unwrap().contains("offset 3"));
        assert!(binary_reason(b"plain text\n").is_none());
        assert!(
            binary_reason(&[0xFF, 0xFE, b'a', 0])
                .unwrap()
                .contains("UTF-16")
        );
        let (s, bad) = decode_lossy(b"caf\xe9 ok \xff\xfe");
        assert_eq!(s, "caf\u{FFFD} ok \u{FFFD}\u{FFFD}");
        assert_eq!(bad, 3);
        assert_eq!(line_of(b"a\nb\nc", 4), 3);
    }
}
