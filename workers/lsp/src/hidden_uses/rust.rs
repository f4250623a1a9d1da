//! Where rust-analyzer does not look: the body of a `macro_rules!` (a use there is expanded
//! only where the macro is called, and `$crate::…` paths in it are not listed as uses of the
//! item), and code under a `#[cfg(…)]` that is off in the server's configuration (a feature
//! not enabled, another target), which it neither resolves nor renames.
//!
//! The scan is textual and cheap. Comments and literals are blanked first; then the regions
//! are: each `macro_rules!` body (its bracketed group), each macro call's arguments, what each `#[cfg(…)]` attribute applies
//! to (an item up to its `;` or its closing brace; a field, variant, arm or statement up to
//! its `,` or `;`; a `cfg_if!` branch with the branches after it), and the rest of the file or
//! block after an inner `#![cfg(…)]`. Every whole-word occurrence of the name in a region is a
//! candidate; the server's own locations are taken out by the caller. A module declared
//! under a `#[cfg(…)]` (`#[cfg(feature = "alloc")] mod tinyvec;`) is off whole: its file and
//! directory are scanned as one region ([`RustHider`]). A `#[cfg(…)]` known to be on where
//! rust-analyzer runs as configured here ([`Cfgs`]: `test`, `debug_assertions`, this host's
//! target, the crate's default features) is no region: base64's `#[cfg(test)] mod tests;` and
//! `#[cfg(any(feature = "std", test))] mod write;` are analysed, and a write there was said
//! to be in a module rust-analyzer does not analyse.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::Hider;

/// Keywords that start an item, which ends at its `;` or its block's closing brace (commas in
/// its generics or parameters do not end it).
const ITEM_KEYWORDS: &[&str] = &[
    "fn",
    "impl",
    "struct",
    "enum",
    "union",
    "trait",
    "mod",
    "unsafe",
    "async",
    "const",
    "static",
    "type",
    "use",
    "extern",
    "macro_rules",
    "default",
];

/// The 1-based lines of `text` (Rust source) where `word` stands as a whole word in code inside
/// a `macro_rules!` body or under a `#[cfg(…)]` (see the module doc): one file's view of what
/// [`RustHider`] finds, for the tests.
#[cfg(test)]
pub fn hidden_lines(text: &str, word: &str) -> Vec<u32> {
    if word.is_empty() || !text.contains(word) {
        return Vec::new();
    }
    let code = strip(text);
    let mut lines = Vec::new();
    for (from, to) in regions(code.as_bytes()) {
        lines.extend(word_lines(&code, word, from, to));
    }
    lines.sort_unstable();
    lines.dedup();
    lines
}

/// The 1-based lines where `word` stands as a whole word in `code[from..to]` (stripped code).
fn word_lines(code: &str, word: &str, from: usize, to: usize) -> Vec<u32> {
    let bytes = code.as_bytes();
    let is_word = |b: Option<&u8>| b.is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_');
    let mut lines = Vec::new();
    for (at, _) in code[from..to].match_indices(word) {
        let start = from + at;
        let end = start + word.len();
        if is_word(start.checked_sub(1).and_then(|i| bytes.get(i))) || is_word(bytes.get(end)) {
            continue;
        }
        lines.push(1 + bytes[..start].iter().filter(|b| **b == b'\n').count() as u32);
    }
    lines.dedup();
    lines
}

/// The scan of a crate (see the module doc), and the modules switched off whole: a
/// `#[cfg(…)] mod name;` leaves the file `name.rs` (or `name/mod.rs`) and everything under
/// `name/` out of the build when the cfg is off, and rust-analyzer then sees none of it, so
/// every use of the name there is a place it may miss (tinyvec's `#[cfg(feature = "alloc")]
/// mod tinyvec;`: 2,000 lines no answer listed).
pub struct RustHider {
    word: String,
    places: Vec<(PathBuf, u32)>,
    /// The files and directories of modules behind a `#[cfg(…)]`.
    off: Vec<PathBuf>,
    /// Each file's lines holding the word in code.
    word_lines: Vec<(PathBuf, Vec<u32>)>,
    /// Which manifests may be read for the cfgs known to be on (`None`: none, and every
    /// `#[cfg(…)]` may be off), and those read so far, by manifest.
    manifests: Option<(Readable, HashMap<PathBuf, Cfgs>)>,
}

/// Which files a scan may read.
pub type Readable = Arc<dyn Fn(&Path) -> bool + Send + Sync>;

impl RustHider {
    pub fn new(word: &str) -> RustHider {
        RustHider {
            word: word.to_string(),
            places: Vec::new(),
            off: Vec::new(),
            word_lines: Vec::new(),
            manifests: None,
        }
    }

    /// Reading each file's crate manifest (the nearest `Cargo.toml` above it, where
    /// `readable` allows) for the cfgs known to be on, else every `#[cfg(…)]` may be off.
    pub fn reading_manifests(mut self, readable: Readable) -> RustHider {
        self.manifests = Some((readable, HashMap::new()));
        self
    }

    /// The cfgs known to be on for `path`'s crate.
    fn cfgs_for(&mut self, path: &Path) -> Option<Cfgs> {
        let (readable, read) = self.manifests.as_mut()?;
        let manifest = path
            .ancestors()
            .skip(1)
            .map(|d| d.join("Cargo.toml"))
            .find(|m| readable(m) && m.is_file())?;
        let cfgs = read
            .entry(manifest.clone())
            .or_insert_with(|| Cfgs::of(&manifest, readable.as_ref()));
        Some(cfgs.clone())
    }
}

/// What is known to be on where rust-analyzer runs as configured here: `test` (local crates),
/// `debug_assertions` (`cargo.cfgs`), this host's target, and the crate's default features
/// with the features they enable.
#[derive(Clone, Debug, Default)]
pub struct Cfgs {
    features: HashSet<String>,
}

impl Cfgs {
    /// The cfgs of the crate of `manifest` (its `Cargo.toml`, read if `readable` allows).
    pub fn of(manifest: &Path, readable: &dyn Fn(&Path) -> bool) -> Cfgs {
        let table = readable(manifest)
            .then(|| toolvisor_kit::special::read_to_string(manifest).ok())
            .flatten()
            .and_then(|t| t.parse::<toml::Table>().ok());
        let declared = table
            .as_ref()
            .and_then(|t| t.get("features"))
            .and_then(|f| f.as_table());
        let mut features = HashSet::new();
        let mut todo = vec!["default".to_string()];
        while let Some(f) = todo.pop() {
            if !features.insert(f.clone()) {
                continue;
            }
            for e in declared
                .and_then(|d| d.get(&f))
                .and_then(|v| v.as_array())
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str())
            {
                // `dep:x` and `x/y` name dependencies' features, not this crate's.
                if !e.contains('/') && !e.starts_with("dep:") {
                    todo.push(e.to_string());
                }
            }
        }
        Cfgs { features }
    }

    /// Whether the predicate of a `cfg(…)` is on: `Some(true)` when known on, `Some(false)`
    /// when known off, `None` when it names what is not known here.
    pub fn eval(&self, pred: &str) -> Option<bool> {
        let pred = pred.trim();
        for (op, all) in [("any", false), ("all", true)] {
            if let Some(args) = call_args(pred, op) {
                let mut unknown = false;
                for a in split_top(args) {
                    match self.eval(a) {
                        Some(v) if v != all => return Some(v),
                        Some(_) => {}
                        None => unknown = true,
                    }
                }
                return if unknown { None } else { Some(all) };
            }
        }
        if let Some(arg) = call_args(pred, "not") {
            return self.eval(arg).map(|v| !v);
        }
        if let Some((key, value)) = pred.split_once('=') {
            let value = value.trim().trim_matches('"');
            return match key.trim() {
                "feature" => Some(self.features.contains(value)),
                "target_os" => Some(value == std::env::consts::OS),
                "target_family" => Some(value == std::env::consts::FAMILY),
                "target_arch" => Some(value == std::env::consts::ARCH),
                "target_pointer_width" => Some(value == (usize::BITS).to_string()),
                "target_endian" => Some(
                    value
                        == if cfg!(target_endian = "little") {
                            "little"
                        } else {
                            "big"
                        },
                ),
                _ => None,
            };
        }
        match pred {
            "test" | "debug_assertions" => Some(true),
            "unix" => Some(cfg!(unix)),
            "windows" => Some(cfg!(windows)),
            "miri" | "doc" | "docsrs" => Some(false),
            _ => None,
        }
    }
}

/// The inside of `name(…)` when `pred` is that call.
fn call_args<'p>(pred: &'p str, name: &str) -> Option<&'p str> {
    let rest = pred.strip_prefix(name)?.trim_start();
    rest.strip_prefix('(')?.strip_suffix(')')
}

/// `args` split at its top-level commas.
fn split_top(args: &str) -> Vec<&str> {
    let (mut out, mut depth, mut from, mut quoted) = (Vec::new(), 0i32, 0, false);
    for (i, c) in args.char_indices() {
        match c {
            '"' => quoted = !quoted,
            '(' if !quoted => depth += 1,
            ')' if !quoted => depth -= 1,
            ',' if !quoted && depth == 0 => {
                out.push(&args[from..i]);
                from = i + 1;
            }
            _ => {}
        }
    }
    out.push(&args[from..]);
    out.into_iter().filter(|a| !a.trim().is_empty()).collect()
}

/// The predicate of the `cfg` attribute in `attr` (`#[cfg(feature = "std")]` →
/// `feature = "std"`), from the text as written (literals not blanked).
fn cfg_predicate(attr: &str) -> Option<&str> {
    let at = attr.find("cfg")?;
    let rest = attr[at + 3..].trim_start().strip_prefix('(')?;
    let close = rest.rfind(')')?;
    Some(&rest[..close])
}

impl Hider for RustHider {
    fn file(&mut self, path: &Path, text: &str) {
        let holds = !self.word.is_empty() && text.contains(&self.word);
        if !holds && !text.contains("cfg") {
            return;
        }
        let code = strip(text);
        let bytes = code.as_bytes();
        // Where this file's submodules live.
        let dir = match path.file_stem().and_then(|s| s.to_str()) {
            Some("lib" | "main" | "mod") => path.parent().map(Path::to_path_buf),
            Some(stem) => path.parent().map(|p| p.join(stem)),
            None => None,
        };
        let cfgs = self.cfgs_for(path);
        for (attr, from, to, outer) in cfg_regions(bytes) {
            let on = cfgs.as_ref().is_some_and(|c| {
                cfg_predicate(&text[attr..from]).and_then(|p| c.eval(p)) == Some(true)
            });
            if on {
                continue;
            }
            if outer
                && let Some(name) = module_declared(&code[from..to])
                && let Some(dir) = &dir
            {
                self.off.push(dir.join(format!("{name}.rs")));
                self.off.push(dir.join(name));
            }
            if holds {
                for line in word_lines(&code, &self.word, from, to) {
                    self.places.push((path.to_path_buf(), line));
                }
            }
        }
        if holds {
            for (from, to) in macro_regions(bytes)
                .into_iter()
                .chain(macro_call_regions(bytes))
            {
                for line in word_lines(&code, &self.word, from, to) {
                    self.places.push((path.to_path_buf(), line));
                }
            }
            for line in doc_test_lines(text, &self.word) {
                self.places.push((path.to_path_buf(), line));
            }
            let all = word_lines(&code, &self.word, 0, code.len());
            if !all.is_empty() {
                self.word_lines.push((path.to_path_buf(), all));
            }
        }
    }

    fn places(&mut self, _seen: &HashSet<(PathBuf, u32)>) -> Vec<(PathBuf, u32)> {
        let mut out = std::mem::take(&mut self.places);
        for (path, lines) in &self.word_lines {
            if self.off.iter().any(|off| path.starts_with(off)) {
                out.extend(lines.iter().map(|l| (path.clone(), *l)));
            }
        }
        out
    }
}

/// The file that declares the module `path` under a `#[cfg(…)]` (so that it is out of the
/// build when the cfg is off), looking up from `path` through the modules that declare it,
/// within `root`, reading only the files `readable` allows. Reads a few files: call it off
/// the async threads.
pub fn switched_off(path: &Path, root: &Path, readable: &dyn Fn(&Path) -> bool) -> Option<PathBuf> {
    let mut module = path.to_path_buf();
    for _ in 0..8 {
        let stem = module.file_stem()?.to_str()?.to_string();
        let dir = module.parent()?;
        // `a/b.rs` and `a/b/mod.rs` are module `b`, declared in `a`'s module file.
        let decl_dir = if stem == "mod" { dir.parent()? } else { dir };
        if !decl_dir.starts_with(root) {
            return None;
        }
        let candidates = [
            decl_dir.join("lib.rs"),
            decl_dir.join("main.rs"),
            decl_dir.join("mod.rs"),
            decl_dir.with_extension("rs"),
        ];
        let mut declared_in = None;
        for c in candidates.iter().filter(|c| **c != module && readable(c)) {
            let Ok(text) = toolvisor_kit::special::read_to_string(c) else {
                continue;
            };
            let readable: Readable = {
                let allowed: Vec<PathBuf> = [c.clone()]
                    .into_iter()
                    .chain(c.ancestors().skip(1).map(|d| d.join("Cargo.toml")))
                    .filter(|m| readable(m))
                    .collect();
                Arc::new(move |p: &Path| allowed.iter().any(|a| a == p))
            };
            let mut hider = RustHider::new("").reading_manifests(readable);
            hider.file(c, &text);
            if hider.off.iter().any(|off| module.starts_with(off)) {
                return Some(c.clone());
            }
            if declared_in.is_none() {
                declared_in = Some(c.clone());
            }
        }
        // Not switched off here: perhaps the module declaring it is.
        module = declared_in?;
        if module
            .file_stem()
            .is_some_and(|s| s == "lib" || s == "main")
        {
            return None;
        }
    }
    None
}

/// The module a `#[cfg(…)]`'s item declares without a body (`pub(crate) mod name;`), if so.
fn module_declared(item: &str) -> Option<&str> {
    let mut rest = item.trim_start();
    // Other attributes on it.
    while rest.starts_with('#') {
        let end = rest.find(']')?;
        rest = rest[end + 1..].trim_start();
    }
    if let Some(r) = rest.strip_prefix("pub") {
        rest = r.trim_start();
        if rest.starts_with('(') {
            rest = rest[rest.find(')')? + 1..].trim_start();
        }
    }
    let r = rest.strip_prefix("mod")?;
    if !r.starts_with(char::is_whitespace) {
        return None;
    }
    let r = r.trim_start();
    let name_len = r
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(r.len());
    let (name, after) = r.split_at(name_len);
    (!name.is_empty() && after.trim_start().starts_with(';')).then_some(name)
}

/// `text` with comments and the insides of string, byte-string, raw-string and character
/// literals replaced by spaces; every byte keeps its offset (multi-byte characters inside
/// blanked spans become as many spaces), newlines stay.
fn strip(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = b.to_vec();
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for c in &mut out[from..to.min(b.len())] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                let end = b[i..]
                    .iter()
                    .position(|c| *c == b'\n')
                    .map_or(b.len(), |n| i + n);
                blank(&mut out, i, end);
                i = end;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                // Block comments nest in Rust.
                let (mut depth, mut j) = (1usize, i + 2);
                while j < b.len() && depth > 0 {
                    if b[j] == b'/' && b.get(j + 1) == Some(&b'*') {
                        depth += 1;
                        j += 2;
                    } else if b[j] == b'*' && b.get(j + 1) == Some(&b'/') {
                        depth -= 1;
                        j += 2;
                    } else {
                        j += 1;
                    }
                }
                blank(&mut out, i, j);
                i = j;
            }
            b'r' | b'b' if raw_string_at(b, i).is_some() => {
                let (open_end, hashes) = raw_string_at(b, i).unwrap_or((i + 1, 0));
                let close: Vec<u8> = std::iter::once(b'"')
                    .chain(std::iter::repeat_n(b'#', hashes))
                    .collect();
                let end = b[open_end..]
                    .windows(close.len())
                    .position(|w| w == close.as_slice())
                    .map_or(b.len(), |n| open_end + n);
                blank(&mut out, open_end, end);
                i = end + close.len();
            }
            b'"' => {
                let mut j = i + 1;
                while j < b.len() && b[j] != b'"' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                blank(&mut out, i + 1, j);
                i = j + 1;
            }
            b'\'' => {
                // A character literal ('x', '\n', '\u{1F600}', 'é'), not a lifetime ('a).
                let end = if b.get(i + 1) == Some(&b'\\') {
                    b[i + 2..]
                        .iter()
                        .take(12)
                        .position(|c| *c == b'\'')
                        .map(|n| i + 2 + n)
                } else {
                    let ch = text[i + 1..].chars().next();
                    ch.map(|c| i + 1 + c.len_utf8())
                        .filter(|j| b.get(*j) == Some(&b'\''))
                };
                match end {
                    Some(j) => {
                        blank(&mut out, i + 1, j);
                        i = j + 1;
                    }
                    None => i += 1,
                }
            }
            c if c.is_ascii_alphanumeric() || c == b'_' => {
                // Skip the identifier whole, so the `r` or `b` ending one is no literal prefix.
                i = super::ident_end(b, i);
            }
            _ => i += 1,
        }
    }
    String::from_utf8(out).unwrap_or_default()
}

/// A raw or byte string starting at `i` (`r"`, `r#"`, `br"`, `b"`): the offset just past its
/// opening quote and the number of `#` it closes with.
fn raw_string_at(b: &[u8], i: usize) -> Option<(usize, usize)> {
    let mut j = i;
    if b[j] == b'b' {
        j += 1;
        if b.get(j) == Some(&b'"') {
            return Some((j + 1, 0));
        }
    }
    if b.get(j) != Some(&b'r') {
        return None;
    }
    j += 1;
    let hashes = b[j..].iter().take_while(|c| **c == b'#').count();
    (b.get(j + hashes) == Some(&b'"')).then_some((j + hashes + 1, hashes))
}

/// The byte ranges of the scanned regions in stripped code.
#[cfg(test)]
fn regions(b: &[u8]) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = cfg_regions(b)
        .into_iter()
        .map(|(_, f, t, _)| (f, t))
        .collect();
    out.extend(macro_regions(b));
    out.extend(macro_call_regions(b));
    out
}

/// The arguments of each macro call (`assert_eq!(3, osa_distance(…))`, `vec![…]`): what
/// rust-analyzer resolves only through the expansion, and in an integration test's
/// `assert_eq!` it was seen to list no use (strsim's `tests/lib.rs`).
fn macro_call_regions(b: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'!' && i > 0 && is_ident(b[i - 1]) {
            let mut start = i;
            while start > 0 && is_ident(b[start - 1]) {
                start -= 1;
            }
            let j = skip_ws(b, i + 1);
            let call =
                &b[start..i] != b"macro_rules" && matches!(b.get(j), Some(b'(' | b'[' | b'{'));
            if call && let Some(close) = matching(b, j) {
                out.push((j, close));
            }
        }
        i += 1;
    }
    out
}

/// What each `#[cfg(…)]` applies to, and whether the attribute is an outer one (`#[…]`, not
/// `#![…]`).
fn cfg_regions(b: &[u8]) -> Vec<(usize, usize, usize, bool)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'#'
            && let Some((inner, after)) = cfg_attribute(b, i)
        {
            let end = if inner {
                enclosing_end(b, after)
            } else {
                attributed_end(b, after)
            };
            out.push((i, after, end, !inner));
            i = after;
            continue;
        }
        i += 1;
    }
    out
}

/// Each `macro_rules!` body.
fn macro_regions(b: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"macro_rules")
            && (i == 0 || !is_ident(b[i - 1]))
            && let Some((open, close)) = macro_body(b, i + "macro_rules".len())
        {
            out.push((open, close));
            i = close;
            continue;
        }
        i += 1;
    }
    out
}

/// The 1-based lines of `text`'s doc comments (`///`, `//!`) inside a Rust code fence (a doc
/// test, which `cargo test --doc` builds) where `word` stands as a whole word: rust-analyzer
/// neither lists nor renames a use there.
fn doc_test_lines(text: &str, word: &str) -> Vec<u32> {
    let mut out = Vec::new();
    let mut fence = false;
    for (i, raw) in text.lines().enumerate() {
        let t = raw.trim_start();
        let Some(doc) = t.strip_prefix("///").or_else(|| t.strip_prefix("//!")) else {
            fence = false;
            continue;
        };
        let doc = doc.trim_start();
        if let Some(info) = doc.strip_prefix("```") {
            // A fence opens a doc test unless its info names another language or `ignore`
            // / `text` (not built).
            fence = !fence
                && info.split(',').map(str::trim).all(|w| {
                    [
                        "",
                        "rust",
                        "no_run",
                        "should_panic",
                        "compile_fail",
                        "edition2018",
                        "edition2021",
                        "edition2024",
                    ]
                    .contains(&w)
                });
            continue;
        }
        if fence && super::has_word(doc, word) {
            out.push(i as u32 + 1);
        }
    }
    out
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

/// `#[cfg(` or `#![cfg(` at `i` (spaces allowed between): whether it is inner, and the offset
/// just past its closing `]`.
fn cfg_attribute(b: &[u8], i: usize) -> Option<(bool, usize)> {
    let mut j = skip_ws(b, i + 1);
    let inner = b.get(j) == Some(&b'!');
    if inner {
        j = skip_ws(b, j + 1);
    }
    if b.get(j) != Some(&b'[') {
        return None;
    }
    let open = j;
    j = skip_ws(b, j + 1);
    if !b[j..].starts_with(b"cfg") {
        return None;
    }
    j = skip_ws(b, j + 3);
    if b.get(j) != Some(&b'(') {
        return None;
    }
    Some((inner, matching(b, open)?))
}

/// The offset just past the bracket closing the one at `open`.
fn matching(b: &[u8], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (j, c) in b.iter().enumerate().skip(open) {
        match c {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(j + 1);
                }
            }
            _ => {}
        }
    }
    None
}

/// The end of the block around `from` (where the depth first goes below its level), or of
/// the text.
fn enclosing_end(b: &[u8], from: usize) -> usize {
    let mut depth = 0usize;
    for (j, c) in b.iter().enumerate().skip(from) {
        match c {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => match depth.checked_sub(1) {
                Some(d) => depth = d,
                None => return j,
            },
            _ => {}
        }
    }
    b.len()
}

/// The end of what an outer attribute ending at `from` applies to (see the module doc).
fn attributed_end(b: &[u8], from: usize) -> usize {
    let mut depth = 0usize;
    // Whether what follows is an item; unknown until its first word outside brackets.
    let mut item: Option<bool> = None;
    let mut j = from;
    while j < b.len() {
        let c = b[j];
        match c {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => {
                let Some(d) = depth.checked_sub(1) else {
                    return j;
                };
                depth = d;
                if depth == 0 && c == b'}' {
                    if item == Some(true) {
                        return j + 1;
                    }
                    // An expression or arm may go on (`}.map(…)`, `} else {`, `} => …`);
                    // a separator, a closing bracket, an attribute or a next word end it.
                    let next = skip_ws(b, j + 1);
                    let rest = &b[next..];
                    let goes_on = match rest.first() {
                        None | Some(b',' | b';' | b'}' | b')' | b']' | b'#') => false,
                        Some(c) if is_ident(*c) => {
                            let word = rest.iter().take_while(|c| is_ident(**c)).count();
                            matches!(&rest[..word], b"else" | b"as")
                        }
                        Some(_) => true,
                    };
                    if !goes_on {
                        return j + 1;
                    }
                }
            }
            b';' if depth == 0 => return j + 1,
            b',' if depth == 0 && item != Some(true) => return j + 1,
            c if depth == 0 && item.is_none() && is_ident(c) => {
                let end = j + b[j..].iter().take_while(|c| is_ident(**c)).count();
                let word = std::str::from_utf8(&b[j..end]).unwrap_or("");
                if word != "pub" {
                    item = Some(ITEM_KEYWORDS.contains(&word));
                }
                j = end;
                continue;
            }
            _ => {}
        }
        j += 1;
    }
    b.len()
}

/// The body of a `macro_rules! name {…}` whose `!` is at or after `i`: the offsets of its
/// opening bracket and just past its closing one.
fn macro_body(b: &[u8], i: usize) -> Option<(usize, usize)> {
    let mut j = skip_ws(b, i);
    if b.get(j) != Some(&b'!') {
        return None;
    }
    j = skip_ws(b, j + 1);
    while j < b.len() && is_ident(b[j]) {
        j += 1;
    }
    j = skip_ws(b, j);
    matches!(b.get(j), Some(b'{' | b'(' | b'[')).then_some(())?;
    Some((j, matching(b, j)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cfgs_known_on_are_no_regions() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::write(
            root.join("Cargo.toml"),
            "[package]\nname = \"b\"\n\n[features]\ndefault = [\"std\"]\nstd = [\"alloc\", \"dep:x\"]\nalloc = []\nextra = []\n",
        )
        .unwrap();
        let cfgs = Cfgs::of(&root.join("Cargo.toml"), &|_| true);
        for (pred, want) in [
            ("test", Some(true)),
            ("any(feature = \"std\", test)", Some(true)),
            ("feature = \"alloc\"", Some(true)),
            ("feature = \"extra\"", Some(false)),
            (
                "all(feature = \"std\", not(feature = \"extra\"))",
                Some(true),
            ),
            ("not(test)", Some(false)),
            ("miri", Some(false)),
            ("target_os = \"linux\"", Some(cfg!(target_os = "linux"))),
            ("fuzzing", None),
            ("any(fuzzing, test)", Some(true)),
            ("all(fuzzing, test)", None),
        ] {
            assert_eq!(cfgs.eval(pred), want, "{pred}");
        }
        // base64: a write in `#[cfg(any(feature = "std", test))] mod write;` is analysed.
        let lib = root.join("src/lib.rs");
        std::fs::write(
            &lib,
            "#[cfg(any(feature = \"std\", test))]\nmod write;\n#[cfg(feature = \"extra\")]\nmod more;\n",
        )
        .unwrap();
        let all: &dyn Fn(&Path) -> bool = &|_| true;
        assert_eq!(switched_off(&root.join("src/write.rs"), root, all), None);
        assert_eq!(
            switched_off(&root.join("src/more.rs"), root, all),
            Some(lib.clone())
        );
    }

    #[test]
    fn uses_in_doc_tests_are_candidates_other_fences_are_not() {
        let src = "/// Distance.\n///\n/// ```\n/// let d = strsim::osa_distance(\"a\", \"b\");\n/// ```\n///\n/// ```text\n/// osa_distance in text\n/// ```\npub fn osa_distance() {}\n";
        assert_eq!(doc_test_lines(src, "osa_distance"), vec![4]);
        let mut h = RustHider::new("osa_distance");
        h.file(Path::new("/c/src/lib.rs"), src);
        assert_eq!(
            h.places(&HashSet::new()),
            vec![(PathBuf::from("/c/src/lib.rs"), 4)]
        );
    }

    #[test]
    fn uses_in_macro_call_arguments_are_candidates() {
        let src = "use strsim::osa_distance;\n\n#[test]\nfn t() {\n    assert_eq!(3, osa_distance(\"ac\", \"cba\"));\n    let v = vec![osa_distance(\"a\", \"b\")];\n    let x = osa_distance(\"a\", \"b\");\n}\n";
        assert_eq!(hidden_lines(src, "osa_distance"), vec![5, 6]);
    }

    #[test]
    fn uses_in_macro_bodies_and_cfg_items_count_comments_and_literals_do_not() {
        let src = r##"use std::fmt;
// from_vec in a comment
macro_rules! smallvec {
    ($($x:expr),*) => ({
        $crate::SmallVec::from_vec(vec![$($x),*])
    });
}
pub fn from_vec() -> &'static str { "from_vec" }
#[cfg(feature = "drain_filter")]
impl<'a, T, F> Drop for DrainFilter<'a, T, F> where F: FnMut(&mut T) -> bool {
    fn drop(&mut self) { from_vec(); let c = 'f'; }
}
struct S {
    a: u8,
    #[cfg(feature = "x")]
    from_vec: u8,
    b: u8, // from_vec
}
fn run() {
    #[cfg(test)]
    let v = from_vec();
    let w = from_vec();
    let r = r#"from_vec"#;
}
"##;
        assert_eq!(hidden_lines(src, "from_vec"), vec![5, 11, 16, 21]);
        assert_eq!(hidden_lines(src, "DrainFilter"), vec![10]);
        assert!(hidden_lines(src, "fmt").is_empty());
    }

    #[test]
    fn a_module_switched_off_by_a_cfg_is_hidden_whole() {
        let mut h = RustHider::new("split_off");
        h.file(
            Path::new("/c/src/lib.rs"),
            "#[cfg(feature = \"alloc\")]\n#[cfg_attr(docsrs, doc(cfg(feature = \"alloc\")))]\npub mod tinyvec;\nmod arrayvec;\n",
        );
        h.file(Path::new("/c/src/arrayvec.rs"), "pub fn split_off() {}\n");
        h.file(
            Path::new("/c/src/tinyvec.rs"),
            "fn f(a: A) {\n    a.split_off(1);\n}\n// split_off\n",
        );
        h.file(Path::new("/c/src/tinyvec/inner.rs"), "\nsplit_off();\n");
        let mut got = h.places(&HashSet::new());
        got.sort();
        assert_eq!(
            got,
            vec![
                (PathBuf::from("/c/src/tinyvec/inner.rs"), 2),
                (PathBuf::from("/c/src/tinyvec.rs"), 2)
            ]
        );
        assert_eq!(module_declared(" pub(crate) mod x ;"), Some("x"));
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        std::fs::create_dir_all(src.join("heap")).unwrap();
        std::fs::write(
            src.join("lib.rs"),
            "#[cfg(feature = \"alloc\")]\nmod heap;\nmod built;\n",
        )
        .unwrap();
        std::fs::write(src.join("heap.rs"), "mod inner;\n").unwrap();
        std::fs::write(src.join("heap/inner.rs"), "").unwrap();
        std::fs::write(src.join("built.rs"), "").unwrap();
        assert_eq!(
            switched_off(&src.join("heap.rs"), dir.path(), &|_| true),
            Some(src.join("lib.rs"))
        );
        assert_eq!(
            switched_off(&src.join("heap/inner.rs"), dir.path(), &|_| true),
            Some(src.join("lib.rs"))
        );
        assert_eq!(
            switched_off(&src.join("built.rs"), dir.path(), &|_| true),
            None
        );
        assert_eq!(module_declared(" mod x { fn f() {} }"), None);
    }

    #[test]
    fn an_inner_cfg_covers_the_rest_and_cfg_if_covers_every_branch() {
        let file = "#![cfg(feature = \"std\")]\nfn a() { spilled() }\n";
        assert_eq!(hidden_lines(file, "spilled"), vec![2]);
        let cfg_if = "cfg_if! {\n    if #[cfg(unix)] {\n        fn a() { spilled() }\n    } else {\n        fn b() { spilled() }\n    }\n}\nfn c() { spilled() }\n";
        assert_eq!(hidden_lines(cfg_if, "spilled"), vec![3, 5]);
        // A variant with fields, a match arm, a generic field.
        let e = "enum E {\n    #[cfg(x)]\n    V { a: spilled },\n    W(spilled),\n}\nfn f(e: E) { match e {\n    #[cfg(x)]\n    E::V { .. } => spilled(),\n    _ => spilled(),\n} }\n";
        assert_eq!(hidden_lines(e, "spilled"), vec![3, 8]);
    }
}
