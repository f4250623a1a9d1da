//! What a cell produced, in order and bounded: streams, rich displays, images, the echoed
//! result, the error. Also the scanner that splits a driver's stderr into output and the
//! end-of-cell sync markers.

use serde_json::{Map, Value as Json, json};
use toolvisor_protocol::results::{
    EvalError, EvalImage, EvalImageMime, EvalKernel, EvalKernelLanguage, EvalOutput, EvalResult,
    EvalStatus,
};

/// Limits on one cell's result.
#[derive(Clone, Copy, Debug)]
pub struct OutputLimits {
    /// Stream text kept (first and last halves) and streamed as events.
    pub text_bytes: usize,
    /// Decoded image bytes kept per cell; images past it are replaced by a note.
    pub image_bytes: usize,
    /// One `text/html` or other non-image rendering; larger ones are dropped with a note.
    pub html_bytes: usize,
}

impl Default for OutputLimits {
    fn default() -> Self {
        OutputLimits {
            text_bytes: 256 * 1024,
            image_bytes: 8 * 1024 * 1024,
            html_bytes: 256 * 1024,
        }
    }
}

/// Builds a cell's result as outputs arrive: `text` (everything as plain text, in order),
/// `outputs` (the rich items, each with `at`, its character offset in `text`), `images`
/// (decoded figures, referenced from `outputs`), `error`.
pub(crate) struct Collector {
    limits: OutputLimits,
    /// The first half of the text budget.
    head: String,
    /// Once the head is full: the latest text, at most the other half of the budget.
    tail: String,
    /// Characters of text appended so far (kept or not).
    total_chars: usize,
    /// Characters dropped from the front of `tail`.
    tail_dropped_chars: usize,
    /// Characters in `head` when it filled up.
    head_chars: Option<usize>,
    /// Rich items and the character position (in the whole text) where each appeared.
    items: Vec<(usize, EvalOutput)>,
    images: Vec<EvalImage>,
    image_total: usize,
    error: Option<EvalError>,
    truncated: bool,
    /// The text so far ends a line (or is empty).
    at_line_start: bool,
}

impl Collector {
    pub(crate) fn new(limits: OutputLimits) -> Self {
        Collector {
            limits,
            head: String::new(),
            tail: String::new(),
            total_chars: 0,
            tail_dropped_chars: 0,
            head_chars: None,
            items: Vec::new(),
            images: Vec::new(),
            image_total: 0,
            error: None,
            truncated: false,
            at_line_start: true,
        }
    }

    /// Rich items start on a line of their own in the text.
    fn break_line(&mut self) {
        if !self.at_line_start {
            self.push_text("\n");
        }
    }

    /// Append to the text; returns what of it landed in the head (the part worth streaming).
    fn push_text<'t>(&mut self, text: &'t str) -> &'t str {
        let head_budget = self.limits.text_bytes / 2;
        if let Some(last) = text.chars().last() {
            self.at_line_start = last == '\n';
        }
        self.total_chars += text.chars().count();
        if self.head_chars.is_none() {
            let room = head_budget.saturating_sub(self.head.len());
            if text.len() <= room {
                self.head.push_str(text);
                return text;
            }
            let at = floor_char_boundary(text, room);
            self.head.push_str(&text[..at]);
            self.head_chars = Some(self.head.chars().count());
            self.truncated = true;
            self.tail.push_str(&text[at..]);
            self.trim_tail();
            return &text[..at];
        }
        self.tail.push_str(text);
        self.trim_tail();
        ""
    }

    fn trim_tail(&mut self) {
        let budget = self.limits.text_bytes - self.limits.text_bytes / 2;
        if self.tail.len() > budget * 2 {
            let cut = floor_char_boundary(&self.tail, self.tail.len() - budget);
            self.tail_dropped_chars += self.tail[..cut].chars().count();
            self.tail.drain(..cut);
        }
    }

    /// Stream text. Returns the part to forward to the client as an event (nothing once the
    /// head budget is spent, and a notice when it runs out).
    pub(crate) fn stream(&mut self, _name: &str, text: &str) -> Option<String> {
        let was_full = self.head_chars.is_some();
        let landed = self.push_text(text).to_string();
        if !was_full && self.head_chars.is_some() {
            return Some(format!(
                "{landed}\n[toolvisor: output past {} KiB is not streamed; the result keeps its end]\n",
                self.limits.text_bytes / 2 / 1024
            ));
        }
        (!landed.is_empty()).then_some(landed)
    }

    /// A MIME bundle from `display()` or the echo of the last expression.
    pub(crate) fn display(&mut self, mut data: Map<String, Json>, result: bool) {
        self.break_line();
        let pos = self.total_chars;
        let image = ["image/png", "image/jpeg"]
            .into_iter()
            .find(|m| data.get(*m).is_some_and(Json::is_string));
        if let Some(mime) = image {
            let Some(Json::String(b64)) = data.remove(mime) else {
                return;
            };
            let chart = data.remove(CHART_MIME);
            let bytes = b64.len() / 4 * 3;
            if self.image_total + bytes > self.limits.image_bytes {
                self.truncated = true;
                let note = format!(
                    "[{mime} of {} KiB omitted: this cell's images passed the {} KiB limit]\n",
                    bytes / 1024,
                    self.limits.image_bytes / 1024
                );
                self.push_text(&note);
                return;
            }
            self.image_total += bytes;
            let (width, height) = match mime {
                "image/png" => png_size(&b64).map_or((None, None), |(w, h)| (Some(w), Some(h))),
                _ => (None, None),
            };
            let index = self.images.len();
            let chart = chart.map(|chart| {
                let size = serde_json::to_string(&chart).map_or(0, |s| s.len());
                if size > self.limits.html_bytes {
                    self.truncated = true;
                    json!({"error": format!(
                        "the chart's data ({} KiB) is over the {} KiB limit of one rendering",
                        size / 1024,
                        self.limits.html_bytes / 1024
                    )})
                } else {
                    chart
                }
            });
            let about = chart.as_ref().map(|chart| chart_summary(chart, index));
            self.images.push(EvalImage {
                mime: if mime == "image/png" {
                    EvalImageMime::Png
                } else {
                    EvalImageMime::Jpeg
                },
                data: b64,
                bytes: bytes as u64,
                width,
                height,
                chart,
            });
            let size = match (width, height) {
                (Some(w), Some(h)) => format!(" {w}x{h}"),
                _ => String::new(),
            };
            self.push_text(&format!(
                "[image {}: {mime}{size}, {} KiB{}]\n",
                index + 1,
                bytes / 1024,
                about.unwrap_or_default()
            ));
            self.items.push((
                pos,
                EvalOutput::Image {
                    image: index as u64,
                    at: 0,
                },
            ));
            return;
        }
        for value in data.values_mut() {
            if let Json::String(s) = value
                && s.len() > self.limits.html_bytes
            {
                self.truncated = true;
                *s = format!(
                    "[{} KiB omitted: over the {} KiB limit of one rendering]",
                    s.len() / 1024,
                    self.limits.html_bytes / 1024
                );
            }
        }
        let mut plain = data
            .get("text/plain")
            .and_then(Json::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| {
                let mimes: Vec<_> = data.keys().cloned().collect();
                format!("[{}]", mimes.join(", "))
            });
        plain.push('\n');
        self.push_text(&plain);
        let data = data.into_iter().collect();
        let item = if result {
            EvalOutput::Result { data, at: 0 }
        } else {
            EvalOutput::Display { data, at: 0 }
        };
        self.items.push((pos, item));
    }

    pub(crate) fn error(&mut self, ename: String, evalue: String, traceback: String) {
        self.break_line();
        let pos = self.total_chars;
        let mut text = traceback.clone();
        if !text.ends_with('\n') {
            text.push('\n');
        }
        self.push_text(&text);
        self.items.push((
            pos,
            EvalOutput::Error {
                ename: ename.clone(),
                evalue: evalue.clone(),
                at: 0,
            },
        ));
        self.error = Some(EvalError {
            ename,
            evalue,
            traceback,
        });
    }

    /// The final text, and how a position in the whole text maps into it.
    fn text_and_map(&self) -> (String, impl Fn(usize) -> usize + '_) {
        let omitted_marker;
        let text = match self.head_chars {
            None => {
                omitted_marker = 0;
                self.head.clone()
            }
            Some(_) => {
                let budget = self.limits.text_bytes - self.limits.text_bytes / 2;
                let cut = floor_char_boundary(&self.tail, self.tail.len().saturating_sub(budget));
                let kept = &self.tail[cut..];
                let omitted =
                    self.total_chars - self.head_chars.unwrap_or(0) - kept.chars().count();
                let marker = format!("\n[... {omitted} characters of output omitted ...]\n");
                omitted_marker = marker.chars().count();
                format!("{}{marker}{kept}", self.head)
            }
        };
        let head_chars = self.head_chars;
        let kept_from = self
            .total_chars
            .saturating_sub(text.chars().count() - head_chars.unwrap_or(0) - omitted_marker);
        let map = move |pos: usize| match head_chars {
            None => pos,
            Some(h) if pos <= h => pos,
            Some(h) if pos < kept_from => h,
            Some(h) => h + omitted_marker + (pos - kept_from),
        };
        (text, map)
    }

    /// The last `n` bytes of the text, for error messages.
    pub(crate) fn text_tail(&self, n: usize) -> String {
        let (text, _) = self.text_and_map();
        let cut = floor_char_boundary(&text, text.len().saturating_sub(n));
        text[cut..].to_string()
    }

    /// The cell's result: what its outputs make of it, beside how it ended, its number, its
    /// wall-clock time and its kernel. `notes` lead its `note`; the bound follows them when
    /// the output was bounded.
    pub(crate) fn finish(
        self,
        mut notes: Vec<String>,
        status: EvalStatus,
        language: EvalKernelLanguage,
        cell: u64,
        wall_ms: u64,
        kernel: EvalKernel,
    ) -> EvalResult {
        let (text, outputs) = {
            let (text, map_pos) = self.text_and_map();
            let outputs = self
                .items
                .iter()
                .map(|(pos, item)| {
                    let mut item = item.clone();
                    *item.at_mut() = map_pos(*pos) as u64;
                    item
                })
                .collect();
            (text, outputs)
        };
        if self.truncated {
            notes.push(format!(
                "output was bounded: {} KiB of text (first and last halves kept), {} KiB of images, {} KiB per rendering; print less or write large results to a file",
                self.limits.text_bytes / 1024,
                self.limits.image_bytes / 1024,
                self.limits.html_bytes / 1024
            ));
        }
        EvalResult {
            text,
            outputs,
            images: self.images,
            error: self.error,
            truncated: self.truncated,
            note: (!notes.is_empty()).then(|| notes.join("; ")),
            status,
            language,
            cell,
            wall_ms,
            kernel,
        }
    }
}

/// The largest char boundary at or below `i`.
pub(crate) fn floor_char_boundary(s: &str, i: usize) -> usize {
    if i >= s.len() {
        return s.len();
    }
    let mut i = i;
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Width and height from a base64 PNG's IHDR chunk; `None` if it is not a PNG.
pub fn png_size(b64: &str) -> Option<(u32, u32)> {
    let head = decode_base64_prefix(b64.get(..32)?)?;
    if head.len() < 24 || &head[..8] != b"\x89PNG\r\n\x1a\n" || &head[12..16] != b"IHDR" {
        return None;
    }
    let w = u32::from_be_bytes(head[16..20].try_into().ok()?);
    let h = u32::from_be_bytes(head[20..24].try_into().ok()?);
    Some((w, h))
}

/// Decodes standard base64 (whole 4-character groups, no padding inside).
fn decode_base64_prefix(s: &str) -> Option<Vec<u8>> {
    fn val(c: u8) -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    }
    let mut out = Vec::with_capacity(s.len() / 4 * 3);
    for group in s.as_bytes().chunks_exact(4) {
        let mut n = 0u32;
        for &c in group {
            n = (n << 6) | val(c)?;
        }
        out.extend_from_slice(&[(n >> 16) as u8, (n >> 8) as u8, n as u8]);
    }
    Some(out)
}

/// One piece of a driver's stderr.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Piece {
    Text(Vec<u8>),
    /// The driver finished cell N: all its fd-level output came before this.
    Sync(u64),
}

const MARK: &[u8] = b"\x1eTVSYNC ";

/// Splits stderr bytes into text and `\x1eTVSYNC <n>\x1e` markers, across reads.
#[derive(Default)]
pub(crate) struct StderrScanner {
    held: Vec<u8>,
}

impl StderrScanner {
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> Vec<Piece> {
        self.held.extend_from_slice(bytes);
        let mut pieces = Vec::new();
        let mut text = Vec::new();
        let buf = std::mem::take(&mut self.held);
        let mut i = 0;
        while i < buf.len() {
            if buf[i] == 0x1e {
                let rest = &buf[i..];
                let n = rest.len().min(MARK.len());
                if rest[..n] != MARK[..n] {
                    text.push(buf[i]);
                    i += 1;
                    continue;
                }
                if rest.len() < MARK.len() {
                    self.held = rest.to_vec();
                    break;
                }
                let digits = &rest[MARK.len()..];
                match digits.iter().position(|&b| b == 0x1e) {
                    Some(end) if end <= 20 => {
                        let number = std::str::from_utf8(&digits[..end])
                            .ok()
                            .and_then(|d| d.parse().ok());
                        match number {
                            Some(n) => {
                                if !text.is_empty() {
                                    pieces.push(Piece::Text(std::mem::take(&mut text)));
                                }
                                pieces.push(Piece::Sync(n));
                                i += MARK.len() + end + 1;
                            }
                            None => {
                                text.push(buf[i]);
                                i += 1;
                            }
                        }
                    }
                    None if digits.len() <= 20 => {
                        self.held = rest.to_vec();
                        break;
                    }
                    _ => {
                        text.push(buf[i]);
                        i += 1;
                    }
                }
                continue;
            }
            text.push(buf[i]);
            i += 1;
        }
        if !text.is_empty() {
            pieces.push(Piece::Text(text));
        }
        pieces
    }
}

/// Decodes UTF-8 across reads, holding back an incomplete character.
#[derive(Default)]
pub(crate) struct Utf8Carry {
    held: Vec<u8>,
}

impl Utf8Carry {
    pub(crate) fn decode(&mut self, bytes: &[u8]) -> String {
        self.held.extend_from_slice(bytes);
        let buf = std::mem::take(&mut self.held);
        match std::str::from_utf8(&buf) {
            Ok(s) => s.to_string(),
            Err(e) if e.error_len().is_none() => {
                let valid = e.valid_up_to();
                self.held = buf[valid..].to_vec();
                String::from_utf8_lossy(&buf[..valid]).into_owned()
            }
            Err(_) => String::from_utf8_lossy(&buf).into_owned(),
        }
    }
}

/// The MIME key under which the Python driver sends a figure's data beside its PNG.
pub(crate) const CHART_MIME: &str = "application/vnd.toolvisor.chart+json";

/// One line saying what a chart holds, for the cell's text: `; chart "Sales": 1 axes, 2
/// series (line "a", bar), data in images[0].chart`.
fn chart_summary(chart: &Json, index: usize) -> String {
    if let Some(error) = chart.get("error").and_then(Json::as_str) {
        return format!("; no chart data: {error}");
    }
    let axes = chart["axes"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut title = chart["title"].as_str().unwrap_or_default().to_string();
    if title.is_empty() {
        title = axes
            .iter()
            .filter_map(|a| a["title"].as_str().filter(|t| !t.is_empty()))
            .collect::<Vec<_>>()
            .join(" / ");
    }
    let series: Vec<String> = axes
        .iter()
        .flat_map(|a| a["series"].as_array().cloned().unwrap_or_default())
        .map(|s| {
            let kind = s["type"].as_str().unwrap_or("series");
            match s["label"].as_str() {
                Some(label) => format!("{kind} {label:?}"),
                None => kind.to_string(),
            }
        })
        .collect();
    let title = if title.is_empty() {
        String::new()
    } else {
        format!(" {title:?}")
    };
    format!(
        "; chart{title}: {} axes, {} series ({}), data in images[{index}].chart",
        axes.len(),
        series.len(),
        series.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The result of a cell that ran on a made-up kernel, as JSON.
    fn finish(c: Collector) -> Json {
        let kernel = EvalKernel {
            pid: 1,
            version: "3".into(),
            executable: "python3".into(),
            cells: 1,
            fresh: true,
        };
        let result = c.finish(
            Vec::new(),
            EvalStatus::Ok,
            EvalKernelLanguage::Python,
            1,
            0,
            kernel,
        );
        serde_json::to_value(result).unwrap()
    }

    #[test]
    fn sync_markers_are_found_across_reads() {
        let mut s = StderrScanner::default();
        let all = b"warn\n\x1eTVSYNC 12\x1etail\x1eother";
        let mut pieces = Vec::new();
        for chunk in all.chunks(3) {
            pieces.extend(s.feed(chunk));
        }
        let mut text = Vec::new();
        let mut syncs = Vec::new();
        for p in pieces {
            match p {
                Piece::Text(t) => text.extend(t),
                Piece::Sync(n) => syncs.push((n, text.len())),
            }
        }
        assert_eq!(syncs, vec![(12, 5)]);
        assert_eq!(text, b"warn\ntail\x1eother");
    }

    #[test]
    fn utf8_is_never_split() {
        let mut c = Utf8Carry::default();
        let bytes = "한글".as_bytes();
        let mut out = String::new();
        for b in bytes {
            out.push_str(&c.decode(&[*b]));
        }
        assert_eq!(out, "한글");
    }

    #[test]
    fn text_is_bounded_head_and_tail_and_items_point_into_it() {
        let limits = OutputLimits {
            text_bytes: 24,
            ..OutputLimits::default()
        };
        let mut c = Collector::new(limits);
        assert_eq!(c.stream("stdout", "abc").as_deref(), Some("abc"));
        c.stream("stdout", "def");
        let mut data = Map::new();
        data.insert("text/plain".into(), json!("42"));
        c.display(data, true);
        let forwarded = c.stream("stdout", "0123456789XYZ").unwrap();
        assert!(
            forwarded.starts_with("01\n") && forwarded.contains("not streamed"),
            "{forwarded}"
        );
        assert_eq!(c.stream("stdout", "0123456789end"), None);
        let mut data = Map::new();
        data.insert("text/plain".into(), json!("last"));
        c.display(data, false);
        let map = finish(c);
        let text = map["text"].as_str().unwrap();
        assert!(text.starts_with("abcdef\n42\n01\n[..."), "{text}");
        assert!(text.ends_with("9end\nlast\n"), "{text}");
        assert!(text.contains("characters of output omitted"), "{text}");
        assert_eq!(map["truncated"], true);
        let outputs = map["outputs"].as_array().unwrap();
        assert_eq!(outputs[0]["type"], "result");
        assert_eq!(outputs[0]["at"], 7);
        let at = outputs[1]["at"].as_u64().unwrap() as usize;
        assert_eq!(&text[at..], "last\n");
    }

    #[test]
    fn images_move_to_their_own_list() {
        let mut c = Collector::new(OutputLimits::default());
        c.stream("stdout", "before\n");
        let mut data = Map::new();
        let mut head = b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR".to_vec();
        head.extend_from_slice(&640u32.to_be_bytes());
        head.extend_from_slice(&480u32.to_be_bytes());
        data.insert("image/png".into(), json!(encode_b64(&head)));
        data.insert("text/plain".into(), json!("<Figure>"));
        c.display(data, false);
        let map = finish(c);
        assert_eq!(map["text"], "before\n[image 1: image/png 640x480, 0 KiB]\n");
        assert_eq!(map["images"][0]["width"], 640);
        assert_eq!(
            map["outputs"][0],
            json!({"type": "image", "image": 0, "at": 7})
        );
    }

    #[test]
    fn png_dimensions_come_from_ihdr() {
        // A 3x2 PNG's first 24 bytes: signature, IHDR length and tag, width, height.
        let mut head = b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR".to_vec();
        head.extend_from_slice(&3u32.to_be_bytes());
        head.extend_from_slice(&2u32.to_be_bytes());
        let b64 = encode_b64(&head);
        assert_eq!(png_size(&b64), Some((3, 2)));
        assert_eq!(
            png_size("aGVsbG8gd29ybGQgdGhpcyBpcyBub3QgYSBwbmcgYXQgYWxs"),
            None
        );
    }

    fn encode_b64(bytes: &[u8]) -> String {
        const T: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut s = String::new();
        for c in bytes.chunks(3) {
            let n = (c[0] as u32) << 16
                | (*c.get(1).unwrap_or(&0) as u32) << 8
                | *c.get(2).unwrap_or(&0) as u32;
            for k in 0..4 {
                s.push(T[(n >> (18 - 6 * k)) as usize & 63] as char);
            }
        }
        s
    }
}
