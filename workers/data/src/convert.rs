//! The conversion pipeline: an original (Markdown, plain text, HTML) becomes a body split into
//! sections by its headings, and the converted half of a card (title, summary, tags). A body is
//! only ever what this makes from its original; tools never edit one.
//!
//! Markdown: front matter, ATX and setext headings outside code fences, lists and quotes. HTML:
//! script and style dropped, `<h1>`–`<h6>` sections, `<title>`, keywords, `<pre>` and multi-line
//! `<code>` kept verbatim, other text collapsed. Tools change cards (as overrides kept beside the
//! converted card) and create notes (new originals), never a body.

use std::path::Path;

/// Formats the pipeline converts, by file extension.
pub const EXTENSIONS: &[&str] = &["md", "markdown", "txt", "text", "html", "htm"];

/// The pipeline's version: raised whenever it would make a different body or sections from
/// the same original, so the store converts again every document an older version made
/// (its original unchanged) at the next scan. 2: HTML `<pre>`/multi-line `<code>` keep
/// their indentation, Markdown setext headings start sections, a section's first line keeps
/// its indentation, numeric HTML entities are decoded. 3: Markdown headings (titles and
/// section titles) lose their inline markup; a tag list with commas keeps the spaces within
/// each tag (HTML keywords `machine learning, ops`).
pub const VERSION: i64 = 3;

/// How much of the opening text a summary keeps, in characters.
const SUMMARY_CHARS: usize = 280;

/// One section of a body: the text under one heading (the text before the first heading is a
/// section with an empty title).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Section {
    pub title: String,
    /// Heading depth (1 for `#`/`<h1>`; 0 for the text before any heading).
    pub level: u8,
    pub text: String,
}

/// What the pipeline makes of one original.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Converted {
    pub title: String,
    pub summary: String,
    pub tags: Vec<String>,
    pub body: String,
    pub sections: Vec<Section>,
}

/// Whether the pipeline converts files like `path`.
pub fn supported(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
}

/// Convert the text of `path` (its extension picks the format).
pub fn convert(path: &Path, text: &str) -> Converted {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("untitled")
        .to_string();
    match ext.as_str() {
        "md" | "markdown" => markdown(text, &stem),
        "html" | "htm" => html(text, &stem),
        _ => plain(text, &stem),
    }
}

fn finish(
    title: Option<String>,
    stem: &str,
    tags: Vec<String>,
    sections: Vec<Section>,
) -> Converted {
    let sections: Vec<Section> = sections
        .into_iter()
        .map(|s| Section {
            text: trim_blank_lines(&s.text).to_string(),
            ..s
        })
        .filter(|s| !s.title.is_empty() || !s.text.is_empty())
        .collect();
    let body = sections
        .iter()
        .map(|s| {
            if s.title.is_empty() {
                s.text.clone()
            } else if s.text.is_empty() {
                s.title.clone()
            } else {
                format!("{}\n\n{}", s.title, s.text)
            }
        })
        .collect::<Vec<_>>()
        .join("\n\n");
    let title = title
        .filter(|t| !t.trim().is_empty())
        .or_else(|| {
            sections
                .iter()
                .find(|s| !s.title.is_empty())
                .map(|s| s.title.clone())
        })
        .unwrap_or_else(|| stem.to_string());
    let opening = sections
        .iter()
        .map(|s| s.text.as_str())
        .find(|t| !t.is_empty())
        .unwrap_or("");
    Converted {
        title: title.trim().to_string(),
        summary: summarize(opening),
        tags,
        body,
        sections,
    }
}

/// `text` without its leading blank lines and trailing whitespace: the first line keeps its
/// indentation (an indented code block opening a section).
fn trim_blank_lines(text: &str) -> &str {
    let Some(first) = text.find(|c: char| !c.is_whitespace()) else {
        return "";
    };
    let line_start = text[..first].rfind('\n').map_or(0, |i| i + 1);
    text[line_start..].trim_end()
}

/// The opening text, whitespace collapsed, cut at a word boundary.
fn summarize(text: &str) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= SUMMARY_CHARS {
        return flat;
    }
    let cut: String = flat.chars().take(SUMMARY_CHARS).collect();
    match cut.rfind(' ') {
        Some(i) if i > SUMMARY_CHARS / 2 => format!("{}…", &cut[..i]),
        _ => format!("{cut}…"),
    }
}

/// A Markdown heading's words without its inline markup, as a title reads: emphasis
/// (`**x**`, `*x*`, `__x__`, `~~x~~`; an `_` inside a word stays: `snake_case`), code spans
/// (`` `x` ``), links and images (`[text](url)`, `![alt](src)`: their text), autolinks
/// (`<https://…>`) and inline HTML tags (`<b>`); a backslash escape gives its character.
pub fn plain_inline(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let word = |c: Option<&char>| c.is_some_and(|c| c.is_alphanumeric());
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\\' if i + 1 < chars.len() && chars[i + 1].is_ascii_punctuation() => {
                out.push(chars[i + 1]);
                i += 2;
                continue;
            }
            '*' | '~' | '`' => {}
            // `_` marks emphasis only at a word's edge.
            '_' if !(word(i.checked_sub(1).and_then(|j| chars.get(j)))
                && word(chars.get(i + 1))) => {}
            '!' if chars.get(i + 1) == Some(&'[') => {}
            '[' => {}
            ']' if chars.get(i + 1) == Some(&'(') => {
                // Skip the link's destination.
                let mut depth = 0;
                let mut j = i + 1;
                while j < chars.len() {
                    match chars[j] {
                        '(' => depth += 1,
                        ')' => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    j += 1;
                }
                i = j + 1;
                continue;
            }
            ']' => {}
            '<' => {
                // An inline tag or an autolink: a tag goes, an autolink keeps its address.
                if let Some(end) = chars[i..].iter().position(|c| *c == '>') {
                    let inner: String = chars[i + 1..i + end].iter().collect();
                    let tag = inner
                        .trim_start_matches('/')
                        .chars()
                        .next()
                        .is_some_and(|c| c.is_ascii_alphabetic())
                        && !inner.contains("://")
                        && !inner.contains('@');
                    if !tag {
                        out.push_str(&inner);
                    }
                    i += end + 1;
                    continue;
                }
                out.push(c);
            }
            _ => out.push(c),
        }
        i += 1;
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Markdown: an optional front matter (`title:`, `tags:`); ATX headings (`#` … `######`) and
/// setext headings (a paragraph underlined with `===` or `---`) start sections; neither
/// counts inside fenced code blocks.
fn markdown(text: &str, stem: &str) -> Converted {
    let (front, rest) = front_matter(text);
    let mut title = front
        .iter()
        .find(|(k, _)| k == "title")
        .map(|(_, v)| v.clone());
    let tags = front
        .iter()
        .find(|(k, _)| k == "tags")
        .map(|(_, v)| split_tags(v))
        .unwrap_or_default();
    let mut sections = vec![Section {
        title: String::new(),
        level: 0,
        text: String::new(),
    }];
    let mut fence: Option<&str> = None;
    // The paragraph being read (where it starts in the section's text, and its lines): an
    // underline below it makes it a setext heading.
    let mut para: Option<(usize, Vec<&str>)> = None;
    // Inside a list or block quote: its lines are not paragraphs a setext underline could
    // make headings (`- item` then `---` is a list and a rule).
    let mut in_block = false;
    for line in rest.lines() {
        let trimmed = line.trim_start();
        let heading = if fence.is_some() {
            None
        } else if let Some(h) = atx_heading(trimmed) {
            Some(h)
        } else if let Some(level) = setext_underline(line)
            && let Some((start, lines)) = para.take()
        {
            let last = sections.last_mut().expect("one section at least");
            last.text.truncate(start);
            let words = lines.iter().map(|l| l.trim()).collect::<Vec<_>>().join(" ");
            Some((level, words))
        } else {
            None
        };
        if let Some((level, heading)) = heading {
            let heading = plain_inline(&heading);
            if level == 1 && title.is_none() {
                title = Some(heading.clone());
            }
            sections.push(Section {
                title: heading,
                level,
                text: String::new(),
            });
            (para, in_block) = (None, false);
            continue;
        }
        let last = sections.last_mut().expect("one section at least");
        if let Some(f) = fence {
            if trimmed.starts_with(f) {
                fence = None;
            }
        } else if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            fence = Some(&trimmed[..3]);
            (para, in_block) = (None, false);
        } else if trimmed.is_empty() {
            (para, in_block) = (None, false);
        } else if starts_block(trimmed) {
            (para, in_block) = (None, true);
        } else if let Some((_, lines)) = para.as_mut() {
            lines.push(line);
        } else if !in_block && indent(line) < 4 && !is_rule(trimmed) {
            para = Some((last.text.len(), vec![line]));
        }
        last.text.push_str(line);
        last.text.push('\n');
    }
    finish(title, stem, tags, sections)
}

/// The columns of a line's indentation (a tab to the next multiple of 4).
fn indent(line: &str) -> usize {
    let mut col = 0;
    for c in line.chars() {
        match c {
            ' ' => col += 1,
            '\t' => col += 4 - col % 4,
            _ => break,
        }
    }
    col
}

/// A setext underline: `=`s (level 1) or `-`s (level 2) only, indented at most 3 columns,
/// trailing whitespace allowed.
fn setext_underline(line: &str) -> Option<u8> {
    if indent(line) > 3 {
        return None;
    }
    let mark = line.trim();
    let first = mark.chars().next()?;
    let level = match first {
        '=' => 1,
        '-' => 2,
        _ => return None,
    };
    mark.chars().all(|c| c == first).then_some(level)
}

/// A line opening a list item or a block quote (either interrupts a paragraph).
fn starts_block(trimmed: &str) -> bool {
    let marker_then_space = |rest: &str| rest.is_empty() || rest.starts_with([' ', '\t']);
    if trimmed.starts_with('>') {
        return true;
    }
    if let Some(rest) = trimmed.strip_prefix(['-', '*', '+']) {
        return marker_then_space(rest);
    }
    let digits = trimmed.chars().take_while(char::is_ascii_digit).count();
    (1..=9).contains(&digits)
        && trimmed[digits..]
            .strip_prefix(['.', ')'])
            .is_some_and(marker_then_space)
}

/// A thematic break (`***`, `- - -`, `___`): not a paragraph line.
fn is_rule(trimmed: &str) -> bool {
    let marks: String = trimmed.chars().filter(|c| !c.is_whitespace()).collect();
    marks.len() >= 3
        && ['-', '*', '_']
            .iter()
            .any(|&m| marks.chars().all(|c| c == m))
}

fn atx_heading(line: &str) -> Option<(u8, String)> {
    let hashes = line.chars().take_while(|&c| c == '#').count();
    if !(1..=6).contains(&hashes) {
        return None;
    }
    let rest = &line[hashes..];
    if !rest.is_empty() && !rest.starts_with([' ', '\t']) {
        return None;
    }
    let heading = rest.trim().trim_end_matches('#').trim().to_string();
    Some((hashes as u8, heading))
}

/// `---` … `---` at the very top, `key: value` lines.
fn front_matter(text: &str) -> (Vec<(String, String)>, &str) {
    let Some(after) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return (Vec::new(), text);
    };
    let Some(end) = after.find("\n---") else {
        return (Vec::new(), text);
    };
    let fields = after[..end]
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let rest = &after[end + 4..];
    let rest = rest.split_once('\n').map_or("", |(_, r)| r);
    (fields, rest)
}

/// `[a, b]`, `a, b` or `a b`: lower-cased, de-duplicated.
pub fn split_tags(value: &str) -> Vec<String> {
    let inner = value.trim().trim_start_matches('[').trim_end_matches(']');
    // A list with commas is split at them only (`machine learning, ops` is two tags, as HTML
    // keywords and YAML lists write them); one without, at its spaces (`ops deploy`).
    let separators: &[char] = if inner.contains(',') { &[','] } else { &[' '] };
    let mut tags: Vec<String> = inner
        .split(separators)
        .map(|t| {
            let t = t.trim().trim_matches(['"', '\'', '#']).to_lowercase();
            t.split_whitespace().collect::<Vec<_>>().join(" ")
        })
        .filter(|t| !t.is_empty())
        .collect();
    tags.dedup();
    let mut seen = std::collections::HashSet::new();
    tags.retain(|t| seen.insert(t.clone()));
    tags
}

/// Plain text: the first non-empty line is the title; one section.
fn plain(text: &str, stem: &str) -> Converted {
    let title = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(|l| l.chars().take(120).collect::<String>());
    finish(
        title,
        stem,
        Vec::new(),
        vec![Section {
            title: String::new(),
            level: 0,
            text: text.to_string(),
        }],
    )
}

/// HTML: `<title>` (else the first `<h1>`) is the title, `<h1>`–`<h6>` start sections,
/// `<script>`/`<style>` are dropped, other tags become whitespace, entities decoded (named
/// common ones, numeric ones), `<meta name="keywords">` gives tags. Text in `<pre>` (and a
/// `<code>` that spans lines) is kept as it is, indentation and line breaks included; other
/// text has its whitespace collapsed, line by line.
fn html(text: &str, stem: &str) -> Converted {
    let mut title: Option<String> = None;
    let mut tags = Vec::new();
    let mut parts = vec![Part::new(String::new(), 0)];
    let lower = text.to_ascii_lowercase();
    let mut i = 0;
    let bytes = text.as_bytes();
    let mut heading: Option<(u8, String)> = None;
    let mut in_title = false;
    let mut title_text = String::new();
    // Open `<pre>` elements; text inside one goes to the section's last `Run::Pre`.
    let mut pre_depth = 0usize;
    // The text of a `<code>` outside `<pre>`, until it closes: a block if it spans lines.
    let mut code: Option<String> = None;
    while i < bytes.len() {
        if bytes[i] == b'<' {
            let Some(end) = text[i..].find('>').map(|e| i + e) else {
                break;
            };
            let tag = &lower[i + 1..end];
            let name: String = tag
                .trim_start_matches('/')
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric())
                .collect();
            let closing = tag.starts_with('/');
            let part = parts.last_mut().expect("one");
            let plain = !in_title && heading.is_none();
            match (name.as_str(), closing) {
                ("script" | "style", false) => {
                    let close = format!("</{name}");
                    i = lower[end..].find(&close).map_or(bytes.len(), |p| end + p);
                    continue;
                }
                ("title", false) => in_title = true,
                ("title", true) => {
                    in_title = false;
                    title = Some(decode_entities(title_text.trim()));
                }
                ("meta", false) if tag.contains("name=\"keywords\"") => {
                    if let Some(c) = attr(&text[i + 1..end], "content") {
                        tags = split_tags(&decode_entities(&c));
                    }
                }
                ("pre", false) if plain => {
                    pre_depth += 1;
                    if pre_depth == 1 {
                        if let Some(open) = code.take() {
                            part.flow().push_str(&open);
                        }
                        part.runs.push(Run::Pre(String::new()));
                    }
                }
                ("pre", true) if pre_depth > 0 => pre_depth -= 1,
                ("br", _) if pre_depth > 0 => part.pre().push('\n'),
                ("br", _) if code.is_some() => code.as_mut().expect("checked").push('\n'),
                (_, _) if pre_depth > 0 => {}
                ("code", false) if plain && code.is_none() => code = Some(String::new()),
                ("code", true) if code.is_some() => {
                    let kept = code.take().expect("checked");
                    if kept.contains('\n') {
                        part.runs.push(Run::Pre(kept));
                    } else {
                        part.flow().push_str(&kept);
                    }
                }
                (h, false) if h.len() == 2 && h.starts_with('h') => {
                    if let Some(level) = h[1..].parse::<u8>().ok().filter(|l| (1..=6).contains(l)) {
                        heading = Some((level, String::new()));
                    }
                }
                (h, true) if h.len() == 2 && h.starts_with('h') && heading.is_some() => {
                    let (level, words) = heading.take().expect("checked");
                    parts.push(Part::new(decode_entities(&collapse(&words)), level));
                }
                ("p" | "br" | "div" | "li" | "tr" | "section" | "article", _) => {
                    part.flow().push('\n');
                }
                _ => {}
            }
            i = end + 1;
            continue;
        }
        let next = text[i..].find('<').map_or(bytes.len(), |p| i + p);
        let chunk = &text[i..next];
        let part = parts.last_mut().expect("one");
        if in_title {
            title_text.push_str(chunk);
        } else if let Some((_, words)) = heading.as_mut() {
            words.push_str(chunk);
        } else if pre_depth > 0 {
            part.pre().push_str(&decode_entities(chunk));
        } else if let Some(code) = code.as_mut() {
            code.push_str(&decode_entities(chunk));
        } else {
            part.flow().push_str(&decode_entities(chunk));
        }
        i = next;
    }
    if let Some(open) = code.take() {
        parts.last_mut().expect("one").flow().push_str(&open);
    }
    let sections = parts
        .into_iter()
        .map(|p| Section {
            text: p.text(),
            title: p.title,
            level: p.level,
        })
        .collect();
    finish(title, stem, tags, sections)
}

/// One run of an HTML section's text.
enum Run {
    /// Flowing text: whitespace collapsed within each line, empty lines dropped.
    Flow(String),
    /// Preformatted text: kept as it is (the line break right after `<pre>` dropped, as
    /// browsers do, and trailing whitespace).
    Pre(String),
}

/// An HTML section while it is read: its heading and its runs of text.
struct Part {
    title: String,
    level: u8,
    runs: Vec<Run>,
}

impl Part {
    fn new(title: String, level: u8) -> Part {
        Part {
            title,
            level,
            runs: Vec::new(),
        }
    }

    /// The flowing run text is added to (a new one after a preformatted run).
    fn flow(&mut self) -> &mut String {
        if !matches!(self.runs.last(), Some(Run::Flow(_))) {
            self.runs.push(Run::Flow(String::new()));
        }
        match self.runs.last_mut() {
            Some(Run::Flow(t)) => t,
            _ => unreachable!("a flowing run was just made last"),
        }
    }

    /// The preformatted run of the open `<pre>` (one is started if a tag ended it).
    fn pre(&mut self) -> &mut String {
        if !matches!(self.runs.last(), Some(Run::Pre(_))) {
            self.runs.push(Run::Pre(String::new()));
        }
        match self.runs.last_mut() {
            Some(Run::Pre(t)) => t,
            _ => unreachable!("a preformatted run was just made last"),
        }
    }

    fn text(&self) -> String {
        let mut lines: Vec<String> = Vec::new();
        for run in &self.runs {
            match run {
                Run::Flow(t) => lines.extend(t.lines().map(collapse).filter(|l| !l.is_empty())),
                Run::Pre(t) => {
                    let t = t
                        .strip_prefix("\r\n")
                        .or_else(|| t.strip_prefix('\n'))
                        .unwrap_or(t)
                        .trim_end();
                    if !t.trim().is_empty() {
                        lines.push(t.to_string());
                    }
                }
            }
        }
        lines.join("\n")
    }
}

/// Whitespace runs as one space, none at either end.
fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn attr(tag: &str, name: &str) -> Option<String> {
    let lower = tag.to_ascii_lowercase();
    let at = lower.find(&format!("{name}="))? + name.len() + 1;
    let rest = &tag[at..];
    let quote = rest.chars().next()?;
    if quote == '"' || quote == '\'' {
        let end = rest[1..].find(quote)?;
        Some(rest[1..1 + end].to_string())
    } else {
        Some(rest.split_whitespace().next()?.to_string())
    }
}

/// The entities HTML text uses: `&lt;`, `&gt;`, `&amp;`, `&quot;`, `&apos;`, `&nbsp;` (as a
/// space) and numeric ones (`&#39;`, `&#x7B;`), in one pass (so `&amp;lt;` stays `&lt;`); an
/// unknown or malformed one is kept as written.
fn decode_entities(s: &str) -> String {
    if !s.contains('&') {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let decoded = after
            .find(';')
            .filter(|&end| end <= 10)
            .and_then(|end| entity(&after[..end]).map(|c| (c, end)));
        match decoded {
            Some((c, end)) => {
                out.push(c);
                rest = &after[end + 1..];
            }
            None => {
                out.push('&');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

fn entity(name: &str) -> Option<char> {
    match name {
        "lt" => Some('<'),
        "gt" => Some('>'),
        "amp" => Some('&'),
        "quot" => Some('"'),
        "apos" => Some('\''),
        "nbsp" => Some(' '),
        _ => {
            let number = name.strip_prefix('#')?;
            let code = match number.strip_prefix(['x', 'X']) {
                Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                None => number.parse().ok()?,
            };
            char::from_u32(code).filter(|&c| c != '\0')
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_with_commas_keep_their_spaces() {
        assert_eq!(
            split_tags("Machine Learning,  data   science, ops"),
            vec!["machine learning", "data science", "ops"]
        );
        assert_eq!(split_tags("[Ops, deploy, ops]"), vec!["ops", "deploy"]);
        assert_eq!(split_tags("ops deploy #Ops"), vec!["ops", "deploy"]);
    }

    #[test]
    fn a_title_reads_without_its_markup() {
        let c = markdown(
            "# **Deploying** with `helm` and [Argo](https://argo.dev) <b>now</b>\n## The `snake_case` *flag* \\*literal\\*\nText.\n",
            "x",
        );
        assert_eq!(c.title, "Deploying with helm and Argo now");
        assert_eq!(c.sections[1].title, "The snake_case flag *literal*");
        assert_eq!(plain_inline("see <https://x.dev/a>"), "see https://x.dev/a");
        assert_eq!(plain_inline("![logo](l.png) Intro"), "logo Intro");
    }

    #[test]
    fn markdown_sections_follow_headings_not_fenced_code_and_the_card_comes_from_front_matter() {
        let text = "---\ntitle: Release notes\ntags: [Ops, deploy, ops]\n---\nIntro line.\n\n# Overview\nWhat changed.\n```sh\n# not a heading\n```\n## Details\nMore.\n";
        let c = convert(Path::new("notes.md"), text);
        assert_eq!(c.title, "Release notes");
        assert_eq!(c.tags, vec!["ops", "deploy"]);
        assert_eq!(c.summary, "Intro line.");
        let titles: Vec<_> = c
            .sections
            .iter()
            .map(|s| (s.title.as_str(), s.level))
            .collect();
        assert_eq!(titles, vec![("", 0), ("Overview", 1), ("Details", 2)]);
        assert!(c.sections[1].text.contains("# not a heading"));
        assert!(c.body.starts_with("Intro line."));
    }

    #[test]
    fn a_markdown_title_falls_back_to_the_first_h1_then_the_file_name() {
        assert_eq!(convert(Path::new("a.md"), "# Hello\nbody").title, "Hello");
        assert_eq!(
            convert(Path::new("plan-b.md"), "no heading").title,
            "plan-b"
        );
    }

    #[test]
    fn html_drops_scripts_and_styles_and_splits_at_headings() {
        let text = "<html><head><title>Guide &amp; FAQ</title><meta name=\"keywords\" content=\"help, faq\"><style>p{}</style></head><body><script>var x=\"<h1>no</h1>\";</script><p>Welcome&nbsp;here.</p><h2>Install</h2><p>Run it.</p></body></html>";
        let c = convert(Path::new("g.html"), text);
        assert_eq!(c.title, "Guide & FAQ");
        assert_eq!(c.tags, vec!["help", "faq"]);
        assert_eq!(c.sections.len(), 2, "{:?}", c.sections);
        assert_eq!(c.sections[0].text, "Welcome here.");
        assert_eq!(c.sections[1].title, "Install");
        assert_eq!(c.sections[1].text, "Run it.");
        assert!(!c.body.contains("var x"));
    }

    /// A page as a static-site generator writes it (highlighted spans inside
    /// `<pre><code>`, entities, an indented config block, inline code in prose).
    #[test]
    fn html_code_blocks_keep_their_indentation_and_line_breaks() {
        let text = r#"<!DOCTYPE html>
<html><head><title>Deploy guide</title></head>
<body>
  <article>
    <h1>Deploy guide</h1>
    <p>Run   the <code>deploy</code>
       script from the repository root.</p>
    <h2>Example</h2>
    <div class="highlight"><pre class="chroma"><code class="language-python"><span class="k">def</span> <span class="nf">deploy</span><span class="p">(</span><span class="n">env</span><span class="p">):</span>
    <span class="k">if</span> <span class="n">env</span> <span class="o">==</span> <span class="s2">&quot;prod&quot;</span><span class="p">:</span>
        <span class="n">confirm</span><span class="p">(</span><span class="s1">&#39;sure?&#39;</span><span class="p">)</span>
    <span class="k">return</span> <span class="n">run</span><span class="p">(</span><span class="n">env</span><span class="p">)</span>
</code></pre></div>
    <p>Then check   the logs.</p>
    <h2>Config</h2>
    <pre>
services:
  web:
    image: &lt;your image&gt;
    ports:
      - &quot;8080:80&quot;
</pre>
    <p>A lone block:</p>
    <code>[deploy]
  retries = 3</code>
  </article>
</body></html>"#;
        let c = convert(Path::new("deploy.html"), text);
        assert_eq!(c.title, "Deploy guide");
        let titles: Vec<_> = c.sections.iter().map(|s| s.title.as_str()).collect();
        assert_eq!(
            titles,
            ["Deploy guide", "Example", "Config"],
            "{:?}",
            c.sections
        );
        assert_eq!(
            c.sections[0].text,
            "Run the deploy\nscript from the repository root."
        );
        assert_eq!(
            c.sections[1].text,
            "def deploy(env):\n    if env == \"prod\":\n        confirm('sure?')\n    return run(env)\nThen check the logs."
        );
        assert_eq!(
            c.sections[2].text,
            "services:\n  web:\n    image: <your image>\n    ports:\n      - \"8080:80\"\nA lone block:\n[deploy]\n  retries = 3"
        );
        assert!(
            c.body.contains("\n        confirm('sure?')\n"),
            "{}",
            c.body
        );
    }

    #[test]
    fn entities_decode_once_named_and_numeric_and_unknown_ones_stay() {
        assert_eq!(
            decode_entities("a &amp;lt; b &#123;&#x7D; &copy; & &#0; &lt;"),
            "a &lt; b {} &copy; & &#0; <"
        );
    }

    /// Setext headings, as README files and pandoc write them.
    #[test]
    fn markdown_setext_headings_start_sections_and_rules_lists_and_code_do_not() {
        let text = "Project Handbook\n================\n\nThe handbook for new people.\n\nGetting started\n---------------\n\nClone the repository:\n\n    git clone x\n    cd x\n\nA paragraph that runs\nover two lines\n===\n\nText under it.\n\n- a list item\n---\n\nafter a blank line\n\n---\n\n```\nnot a heading\n---\n```\n> quoted\n---\n";
        let c = convert(Path::new("handbook.md"), text);
        assert_eq!(c.title, "Project Handbook");
        let titles: Vec<_> = c
            .sections
            .iter()
            .map(|s| (s.title.as_str(), s.level))
            .collect();
        assert_eq!(
            titles,
            [
                ("Project Handbook", 1),
                ("Getting started", 2),
                ("A paragraph that runs over two lines", 1)
            ],
            "{:?}",
            c.sections
        );
        assert_eq!(c.sections[0].text, "The handbook for new people.");
        assert_eq!(c.summary, "The handbook for new people.");
        assert_eq!(
            c.sections[1].text,
            "Clone the repository:\n\n    git clone x\n    cd x"
        );
        let last = &c.sections[2].text;
        for kept in [
            "- a list item\n---",
            "after a blank line\n\n---",
            "not a heading\n---",
            "> quoted\n---",
        ] {
            assert!(last.contains(kept), "{kept:?} in {last:?}");
        }
        // A section that opens with an indented code block keeps its indentation.
        let c = convert(Path::new("x.md"), "# Run\n\n    make all\n    make test\n");
        assert_eq!(c.sections[0].text, "    make all\n    make test");
    }

    #[test]
    fn plain_text_takes_its_first_line_as_title_and_summaries_cut_at_a_word() {
        let long = format!("Title line\n{}", "word ".repeat(200));
        let c = convert(Path::new("t.txt"), &long);
        assert_eq!(c.title, "Title line");
        assert!(c.summary.ends_with('…'));
        assert!(c.summary.chars().count() <= SUMMARY_CHARS + 1);
    }
}
