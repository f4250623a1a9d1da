//! `read`: a text file by line range with line numbers (streamed, so the last lines of a
//! large file cost one pass of newline counting and no allocation of the file), or an image
//! fitted to the model's limits. Binary files are refused.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};

use toolvisor_protocol::results::{LineEndings, ReadResult, ReadText, TextKind};

use crate::error::{Error, Result};
use crate::image::{self as img, ImageLimits};
use crate::paths::{Access, Scope};
use crate::text;

/// Bounds of one text read.
#[derive(Clone, Copy, Debug)]
pub struct ReadLimits {
    /// Lines returned when the caller gives no `limit`.
    pub default_lines: u64,
    /// Characters of file content returned at most; the read stops at a line boundary
    /// before it and says where to go on (`next_offset`).
    pub max_chars: usize,
    /// Longer lines are cut, marked with how much was cut.
    pub max_line_chars: usize,
    /// Files larger than this are not counted to the end (`total_lines` is `None`).
    pub count_lines_max_bytes: u64,
}

impl Default for ReadLimits {
    fn default() -> Self {
        ReadLimits {
            default_lines: 2000,
            max_chars: 40_000,
            max_line_chars: 2000,
            count_lines_max_bytes: 1 << 30,
        }
    }
}

const CHUNK: usize = 256 * 1024;

/// Read `path` in `scope`. `offset` is a 1-based first line, or negative to count from the
/// end (`-100`: the last 100 lines); `limit` is the number of lines.
pub fn read(
    scope: &Scope,
    path: &str,
    offset: Option<i64>,
    limit: Option<u64>,
    limits: &ReadLimits,
    images: &ImageLimits,
) -> Result<ReadResult> {
    let resolved = scope.resolve(path, Access::Read)?;
    let mut file = resolved.open()?;
    let meta = file.metadata().map_err(|e| resolved.error("stat", e))?;
    let display = resolved.display;
    if meta.is_dir() {
        return Err(Error::IsDir { path: display });
    }
    let size = meta.len();
    let mut head = vec![0u8; text::SNIFF_BYTES.min(size as usize)];
    file.read_exact(&mut head)
        .map_err(|e| Error::io(&display, "read", e))?;
    if let Some(format) = img::sniff(&head) {
        return read_image(file, head, format, size, display, images);
    }
    if let Some(why) = text::binary_reason(&head) {
        return Err(Error::Binary { path: display, why });
    }
    let limit = limit.unwrap_or(limits.default_lines);
    if limit == 0 {
        return Err(Error::bad("limit", "must be at least 1"));
    }
    if size == 0 {
        return Ok(ReadResult::Text(ReadText {
            path: display,
            kind: TextKind::Text,
            content: String::new(),
            offset: 0,
            lines: 0,
            total_lines: Some(0),
            next_offset: None,
            eof: true,
            size_bytes: 0,
            cut_lines: None,
            invalid_utf8: None,
            line_endings: None,
            notes: Some(vec!["the file is empty".into()]),
        }));
    }
    let io = |e| Error::io(&display, "read", e);
    let mut buf = vec![0u8; CHUNK];
    // Where the first shown line starts, and its number.
    let (start_line, start_byte) = first_line(&mut file, offset, size, &display, &mut buf)?;
    let lines =
        collect_lines(&mut file, &mut buf, start_line, start_byte, limit, limits).map_err(io)?;
    let text = finish_text(
        display.clone(),
        size,
        lines,
        &mut file,
        &mut buf,
        limit,
        limits,
    )
    .map_err(io)?;
    Ok(ReadResult::Text(text))
}

/// An image file, decoded and fitted to `images` (the rest of its bytes read after `head`).
fn read_image(
    mut file: File,
    head: Vec<u8>,
    format: ::image::ImageFormat,
    size: u64,
    display: String,
    images: &ImageLimits,
) -> Result<ReadResult> {
    if size > img::MAX_IMAGE_FILE_BYTES {
        return Err(Error::TooLarge {
            message: format!(
                "{display} is a {size}-byte image, above the {} bytes read decodes",
                img::MAX_IMAGE_FILE_BYTES
            ),
            hint: "shrink it with bash (e.g. `convert -resize`) and read the copy".into(),
        });
    }
    let _permit = img::image_permit();
    let mut bytes = head;
    file.read_to_end(&mut bytes)
        .map_err(|e| Error::io(&display, "read", e))?;
    let fitted = img::fit(&bytes, format, images).map_err(|why| Error::Binary {
        path: display.clone(),
        why: format!("an image that cannot be decoded: {why}"),
    })?;
    Ok(fitted.into_result())
}

/// The number of the first line to show and the byte where it starts, for `offset`
/// (1-based, or negative to count from the end).
fn first_line(
    file: &mut File,
    offset: Option<i64>,
    size: u64,
    display: &str,
    buf: &mut [u8],
) -> Result<(u64, u64)> {
    let io = |e| Error::io(display, "read", e);
    match offset.unwrap_or(1) {
        0 => Err(Error::bad(
            "offset",
            "0 is not a line: lines are 1-based, and a negative offset counts from the end",
        )),
        n if n > 0 => {
            let n = n as u64;
            match seek_line(file, n, buf).map_err(io)? {
                Some(byte) => Ok((n, byte)),
                None => {
                    let total = count_lines(file, 0, size, buf).map_err(io)?;
                    Err(Error::bad(
                        "offset",
                        format!("{n} is past the end: {display} has {total} lines"),
                    ))
                }
            }
        }
        n => {
            let back = n.unsigned_abs();
            let byte = tail_start(file, size, back, buf).map_err(io)?;
            let before = count_newlines(file, 0, byte, buf).map_err(io)?;
            Ok((before + 1, byte))
        }
    }
}

/// What the shown lines had that the read remarks on.
#[derive(Clone, Copy, Debug, Default)]
struct Marks {
    /// Lines cut at `max_line_chars`.
    cut_lines: u64,
    /// Invalid UTF-8 sequences shown as U+FFFD.
    invalid_utf8: u64,
    /// Some shown line ended in `\r\n`.
    crlf: bool,
}

/// The lines collected from `start_byte` on, and where the collecting stopped.
struct Collected {
    /// The number of the first line shown.
    start_line: u64,
    shown: Vec<(u64, String)>,
    marks: Marks,
    /// Characters the shown lines add to the content.
    chars: usize,
    /// The byte after the last line shown.
    pos: u64,
    at_eof: bool,
}

/// Collect lines from `start_byte` until `limit` lines, `max_chars` characters or the end.
fn collect_lines(
    file: &mut File,
    buf: &mut [u8],
    start_line: u64,
    start_byte: u64,
    limit: u64,
    limits: &ReadLimits,
) -> std::io::Result<Collected> {
    file.seek(SeekFrom::Start(start_byte))?;
    let mut shown: Vec<(u64, String)> = Vec::new();
    let mut marks = Marks::default();
    let mut chars = 0usize;
    let mut pos = start_byte;
    // Bytes of the current line kept (enough for `max_line_chars` characters) and dropped:
    // a line of hundreds of megabytes costs no more memory than a short one.
    let cap = limits.max_line_chars.saturating_mul(4).saturating_add(8);
    let mut pending: Vec<u8> = Vec::new();
    let mut dropped: u64 = 0;
    let keep = |pending: &mut Vec<u8>, dropped: &mut u64, piece: &[u8]| {
        let take = cap.saturating_sub(pending.len()).min(piece.len());
        pending.extend_from_slice(&piece[..take]);
        *dropped += (piece.len() - take) as u64;
    };
    let mut stop = false;
    let mut at_eof = false;
    while !stop {
        let n = read_some(file, buf)?;
        if n == 0 {
            at_eof = true;
            if !pending.is_empty() {
                // A last line without a newline.
                let line = std::mem::take(&mut pending);
                let add = push_line(&mut marks, &mut shown, start_line, &line, dropped, limits);
                chars += add;
                pos += line.len() as u64 + dropped;
            }
            break;
        }
        let mut rest = &buf[..n];
        while let Some(nl) = memchr::memchr(b'\n', rest) {
            keep(&mut pending, &mut dropped, &rest[..nl]);
            let line = std::mem::take(&mut pending);
            let line_dropped = std::mem::take(&mut dropped);
            let consumed = line.len() as u64 + line_dropped + 1;
            let before = marks;
            let add = push_line(
                &mut marks,
                &mut shown,
                start_line,
                &line,
                line_dropped,
                limits,
            );
            if chars > 0 && chars + add > limits.max_chars {
                // Over the budget: keep this line for the next read.
                shown.pop();
                marks = before;
                stop = true;
                break;
            }
            chars += add;
            pos += consumed;
            rest = &rest[nl + 1..];
            if shown.len() as u64 >= limit {
                stop = true;
                break;
            }
        }
        if !stop {
            keep(&mut pending, &mut dropped, rest);
        }
    }
    Ok(Collected {
        start_line,
        shown,
        marks,
        chars,
        pos,
        at_eof,
    })
}

/// The read of `path` (`size` bytes) from the collected lines: the numbered content, where
/// the read stands (the lines after it counted when the file is small enough), and notes on
/// what was cut.
fn finish_text(
    path: String,
    size: u64,
    lines: Collected,
    file: &mut File,
    buf: &mut [u8],
    limit: u64,
    limits: &ReadLimits,
) -> std::io::Result<ReadText> {
    let Collected {
        start_line,
        shown,
        marks,
        chars,
        pos,
        at_eof,
    } = lines;
    let shown_count = shown.len() as u64;
    let last = start_line + shown_count.saturating_sub(1);
    let width = last.to_string().len();
    let mut content = String::with_capacity(chars + shown.len() * (width + 2));
    for (n, line) in &shown {
        content.push_str(&format!("{n:>width$}\t{line}\n"));
    }
    let eof = at_eof || pos >= size;
    let total_lines = if eof {
        Some(start_line + shown_count - 1)
    } else if size <= limits.count_lines_max_bytes {
        let after = count_lines(file, pos, size, buf)?;
        Some(start_line + shown_count - 1 + after)
    } else {
        None
    };
    let mut notes = Vec::new();
    if marks.cut_lines > 0 {
        notes.push(format!(
            "{} line(s) longer than {} characters were cut; grep or bash show them whole",
            marks.cut_lines, limits.max_line_chars
        ));
    }
    if marks.invalid_utf8 > 0 {
        notes.push(format!(
            "not valid UTF-8: {} invalid byte sequence(s) are shown as U+FFFD",
            marks.invalid_utf8
        ));
    }
    if !eof && shown_count < limit {
        notes.push(format!(
            "stopped at {} characters; go on with offset {}",
            limits.max_chars,
            start_line + shown_count
        ));
    }
    Ok(ReadText {
        path,
        kind: TextKind::Text,
        content,
        offset: start_line,
        lines: shown_count,
        total_lines,
        next_offset: (!eof).then_some(start_line + shown_count),
        eof,
        size_bytes: size,
        cut_lines: (marks.cut_lines > 0).then_some(marks.cut_lines),
        invalid_utf8: (marks.invalid_utf8 > 0).then_some(marks.invalid_utf8),
        line_endings: marks.crlf.then_some(LineEndings::Crlf),
        notes: (!notes.is_empty()).then_some(notes),
    })
}

/// Decode, cut and remember one line; returns the characters it adds.
fn push_line(
    marks: &mut Marks,
    shown: &mut Vec<(u64, String)>,
    start_line: u64,
    bytes: &[u8],
    dropped: u64,
    limits: &ReadLimits,
) -> usize {
    let bytes = match bytes.strip_suffix(b"\r") {
        Some(b) if dropped == 0 => {
            marks.crlf = true;
            b
        }
        _ => bytes,
    };
    let (decoded, bad) = text::decode_lossy(bytes);
    marks.invalid_utf8 += bad as u64;
    let (line, cut) = text::cut_line(&decoded, limits.max_line_chars);
    let line = if dropped > 0 {
        marks.cut_lines += 1;
        format!(
            "{}… [line cut: it has {} bytes]",
            text::prefix_chars(&decoded, limits.max_line_chars),
            bytes.len() as u64 + dropped
        )
    } else {
        if cut > 0 {
            marks.cut_lines += 1;
        }
        line.into_owned()
    };
    let chars = line.chars().count() + 1;
    shown.push((start_line + shown.len() as u64, line));
    chars
}

fn read_some(file: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    loop {
        match file.read(buf) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// Byte offset where line `n` (1-based) starts, or `None` past the end.
fn seek_line(file: &mut File, n: u64, buf: &mut [u8]) -> std::io::Result<Option<u64>> {
    file.seek(SeekFrom::Start(0))?;
    if n == 1 {
        return Ok(Some(0));
    }
    let mut need = n - 1;
    let mut pos = 0u64;
    loop {
        let got = read_some(file, buf)?;
        if got == 0 {
            return Ok(None);
        }
        let chunk = &buf[..got];
        let count = memchr::memchr_iter(b'\n', chunk).count() as u64;
        if count < need {
            need -= count;
            pos += got as u64;
            continue;
        }
        let at = memchr::memchr_iter(b'\n', chunk)
            .nth((need - 1) as usize)
            .expect("counted");
        let start = pos + at as u64 + 1;
        let size = file.metadata()?.len();
        return Ok((start < size).then_some(start));
    }
}

/// Number of `\n` in `[from, to)`.
fn count_newlines(file: &mut File, from: u64, to: u64, buf: &mut [u8]) -> std::io::Result<u64> {
    file.seek(SeekFrom::Start(from))?;
    let mut left = to - from;
    let mut count = 0u64;
    while left > 0 {
        let want = (buf.len() as u64).min(left) as usize;
        let got = read_some(file, &mut buf[..want])?;
        if got == 0 {
            break;
        }
        count += memchr::memchr_iter(b'\n', &buf[..got]).count() as u64;
        left -= got as u64;
    }
    Ok(count)
}

/// Lines in `[from, to)`: newlines, plus one for a last line without a newline.
fn count_lines(file: &mut File, from: u64, to: u64, buf: &mut [u8]) -> std::io::Result<u64> {
    if from >= to {
        return Ok(0);
    }
    let newlines = count_newlines(file, from, to, buf)?;
    file.seek(SeekFrom::Start(to - 1))?;
    let mut last = [0u8; 1];
    file.read_exact(&mut last)?;
    Ok(newlines + u64::from(last[0] != b'\n'))
}

/// Byte offset of the start of the `back`-th line from the end (the whole file when it has
/// fewer lines). A final newline does not start an empty last line.
fn tail_start(file: &mut File, size: u64, back: u64, buf: &mut [u8]) -> std::io::Result<u64> {
    let mut end = size;
    // Ignore the newline that ends the last line.
    file.seek(SeekFrom::Start(size - 1))?;
    let mut last = [0u8; 1];
    file.read_exact(&mut last)?;
    if last[0] == b'\n' {
        end -= 1;
    }
    let mut seen = 0u64;
    while end > 0 {
        let start = end.saturating_sub(buf.len() as u64);
        let len = (end - start) as usize;
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(&mut buf[..len])?;
        for at in memchr::memrchr_iter(b'\n', &buf[..len]) {
            seen += 1;
            if seen == back {
                return Ok(start + at as u64 + 1);
            }
        }
        end = start;
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup(content: &[u8]) -> (tempfile::TempDir, Scope) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f.txt"), content).unwrap();
        let scope = Scope::new(dir.path(), &[], false).unwrap();
        (dir, scope)
    }

    fn text(scope: &Scope, offset: Option<i64>, limit: Option<u64>) -> ReadText {
        text_with(scope, offset, limit, &ReadLimits::default())
    }

    fn text_with(
        scope: &Scope,
        offset: Option<i64>,
        limit: Option<u64>,
        l: &ReadLimits,
    ) -> ReadText {
        match read(scope, "f.txt", offset, limit, l, &ImageLimits::default()).unwrap() {
            ReadResult::Text(t) => t,
            _ => panic!("image"),
        }
    }

    #[test]
    fn ranges_number_lines() {
        let body: String = (1..=20).map(|i| format!("line {i}\n")).collect();
        let (_d, s) = setup(body.as_bytes());
        let t = text(&s, Some(5), Some(3));
        assert_eq!(t.content, "5\tline 5\n6\tline 6\n7\tline 7\n");
        assert_eq!(
            (t.offset, t.lines, t.next_offset, t.eof),
            (5, 3, Some(8), false)
        );
        assert_eq!(t.total_lines, Some(20));
        let t = text(&s, Some(-3), None);
        assert_eq!(t.content, "18\tline 18\n19\tline 19\n20\tline 20\n");
        assert!(t.eof && t.next_offset.is_none());
        let t = text(&s, Some(-50), Some(2));
        assert_eq!(t.offset, 1);
        let t = text(&s, Some(20), None);
        assert_eq!((t.content.as_str(), t.eof), ("20\tline 20\n", true));
        let e = read(
            &s,
            "f.txt",
            Some(21),
            None,
            &ReadLimits::default(),
            &ImageLimits::default(),
        );
        assert!(e.unwrap_err().to_string().contains("has 20 lines"));
    }

    #[test]
    fn last_line_without_newline_and_crlf() {
        let (_d, s) = setup(b"a\r\nb\r\nc");
        let t = text(&s, None, None);
        assert_eq!(t.content, "1\ta\n2\tb\n3\tc\n");
        assert!(t.line_endings == Some(LineEndings::Crlf) && t.eof);
        assert_eq!(t.total_lines, Some(3));
        let t = text(&s, Some(-1), None);
        assert_eq!(t.content, "3\tc\n");
    }

    #[test]
    fn budget_stops_on_a_line_boundary() {
        let body: String = (0..100).map(|_| format!("{}\n", "x".repeat(99))).collect();
        let (_d, s) = setup(body.as_bytes());
        let l = ReadLimits {
            max_chars: 1000,
            ..ReadLimits::default()
        };
        let t = text_with(&s, None, None, &l);
        assert_eq!(t.lines, 10);
        assert_eq!(t.next_offset, Some(11));
        assert!(
            t.notes
                .iter()
                .flatten()
                .any(|n| n.contains("go on with offset 11"))
        );
    }

    #[test]
    fn binary_refused_and_non_utf8_marked() {
        let (d, s) = setup(b"caf\xe9\n");
        let t = text(&s, None, None);
        assert_eq!(t.content, "1\tcaf\u{FFFD}\n");
        assert_eq!(t.invalid_utf8, Some(1));
        std::fs::write(d.path().join("f.txt"), b"ELF\0\x01\x02").unwrap();
        let e = read(
            &s,
            "f.txt",
            None,
            None,
            &ReadLimits::default(),
            &ImageLimits::default(),
        );
        assert!(matches!(e, Err(Error::Binary { .. })));
    }

    #[test]
    fn a_huge_line_is_cut_without_holding_it() {
        let mut body = vec![b'z'; 3 * CHUNK + 17];
        body.extend_from_slice(b"\nnext\n");
        let (_d, s) = setup(&body);
        let t = text(&s, None, None);
        assert_eq!(t.lines, 2);
        assert!(
            t.content
                .contains(&format!("[line cut: it has {} bytes]", 3 * CHUNK + 17))
        );
        assert!(t.content.ends_with("2\tnext\n"));
        assert_eq!((t.total_lines, t.eof), (Some(2), true));
        let t = text(&s, Some(-1), None);
        assert_eq!(t.content, "2\tnext\n");
    }

    #[test]
    fn long_lines_are_cut() {
        let (_d, s) = setup(format!("{}\n", "y".repeat(5000)).as_bytes());
        let t = text(&s, None, None);
        assert_eq!(t.cut_lines, Some(1));
        assert!(t.content.contains("[3000 more characters]"));
    }
}
