//! The conversion pipeline: an original (Markdown, plain text, HTML) becomes a body split into
//! sections by its headings, and the converted half of a card (title, summary, tags). A body is
//! only ever what this makes from its original; tools never edit one.

use std::path::Path;

/// Formats the pipeline converts, by file extension.
pub const EXTENSIONS: &[&str] = &["md", "markdown", "txt", "text", "html", "htm"];

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
            text: s.text.trim().to_string(),
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

/// Markdown: an optional front matter (`title:`, `tags:`), ATX headings (`#` … `######`) start
/// sections; headings inside fenced code blocks do not.
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
    for line in rest.lines() {
        let trimmed = line.trim_start();
        if let Some(f) = fence {
            if trimmed.starts_with(f) {
                fence = None;
            }
        } else if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            fence = Some(&trimmed[..3]);
        } else if let Some((level, heading)) = atx_heading(trimmed) {
            if level == 1 && title.is_none() {
                title = Some(heading.clone());
            }
            sections.push(Section {
                title: heading,
                level,
                text: String::new(),
            });
            continue;
        }
        let last = sections.last_mut().expect("one section at least");
        last.text.push_str(line);
        last.text.push('\n');
    }
    finish(title, stem, tags, sections)
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
    let mut tags: Vec<String> = inner
        .split([',', ' '])
        .map(|t| t.trim().trim_matches(['"', '\'', '#']).to_lowercase())
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
/// `<script>`/`<style>` are dropped, other tags become whitespace, common entities decoded,
/// `<meta name="keywords">` gives tags.
fn html(text: &str, stem: &str) -> Converted {
    let mut title: Option<String> = None;
    let mut tags = Vec::new();
    let mut sections = vec![Section {
        title: String::new(),
        level: 0,
        text: String::new(),
    }];
    let lower = text.to_ascii_lowercase();
    let mut i = 0;
    let bytes = text.as_bytes();
    let mut heading: Option<(u8, String)> = None;
    let mut in_title = false;
    let mut title_text = String::new();
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
                (h, false) if h.len() == 2 && h.starts_with('h') => {
                    if let Some(level) = h[1..].parse::<u8>().ok().filter(|l| (1..=6).contains(l)) {
                        heading = Some((level, String::new()));
                    }
                }
                (h, true) if h.len() == 2 && h.starts_with('h') && heading.is_some() => {
                    let (level, words) = heading.take().expect("checked");
                    let words = decode_entities(
                        words
                            .split_whitespace()
                            .collect::<Vec<_>>()
                            .join(" ")
                            .as_str(),
                    );
                    sections.push(Section {
                        title: words,
                        level,
                        text: String::new(),
                    });
                }
                ("p" | "br" | "div" | "li" | "tr" | "section" | "article", _) => {
                    sections.last_mut().expect("one").text.push('\n');
                }
                _ => {}
            }
            i = end + 1;
            continue;
        }
        let next = text[i..].find('<').map_or(bytes.len(), |p| i + p);
        let chunk = &text[i..next];
        if in_title {
            title_text.push_str(chunk);
        } else if let Some((_, words)) = heading.as_mut() {
            words.push_str(chunk);
        } else {
            sections
                .last_mut()
                .expect("one")
                .text
                .push_str(&decode_entities(chunk));
        }
        i = next;
    }
    for s in &mut sections {
        s.text = s
            .text
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join("\n");
    }
    finish(title, stem, tags, sections)
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

fn decode_entities(s: &str) -> String {
    if !s.contains('&') {
        return s.to_string();
    }
    s.replace("&nbsp;", " ")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn plain_text_takes_its_first_line_as_title_and_summaries_cut_at_a_word() {
        let long = format!("Title line\n{}", "word ".repeat(200));
        let c = convert(Path::new("t.txt"), &long);
        assert_eq!(c.title, "Title line");
        assert!(c.summary.ends_with('…'));
        assert!(c.summary.chars().count() <= SUMMARY_CHARS + 1);
    }
}
