//! Uses of a name that a server cannot see, so that an answer listing none of them does not
//! look complete.
//!
//! clangd answers `references` and `rename` from what the preprocessor let through, so a use
//! inside a `#define` body (never expanded, or expanded where clangd does not record the
//! spelling) or in a preprocessor branch that is off in this build is neither listed nor
//! renamed, and the answer looked complete while the macro still called the old name.
//! rust-analyzer likewise does not list uses inside a `macro_rules!` body or under a
//! `#[cfg(…)]` that is off (a feature not enabled): see [`rust`]; pyright misses uses that
//! went through a `.pyi` stub when asked from the `.py` side ([`python`]), and
//! typescript-language-server the projects nested in its root ([`typescript`]), gopls the
//! files another platform's build takes ([`go`]). Each is a
//! [`Hider`]; [`gap`] picks the server's and words its answer.
//!
//! A cheap text scan finds the candidates. For C and C++ ([`CHider`]): every whole-word occurrence of the
//! identifier in code (comments and literals left out) inside a `#define` body (with its
//! continuation lines) or inside a conditional branch (`#if`, `#ifdef`, `#ifndef`, `#elif`,
//! `#else`; an include guard is not one). The candidates the server did not report are the
//! uses it may miss, and the answer says `complete: false` naming each. The scan is bounded:
//! at most [`FILES_MAX`] files of the server's language under its root, each at most
//! [`FILE_BYTES_MAX`].

pub(crate) mod go;
pub(crate) mod python;
pub(crate) mod rust;
mod typescript;

use std::collections::HashSet;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use toolvisor_protocol::error::ToolError;

use crate::call::CallCtx;
use crate::server::ServerShared;
use crate::servers::Servers;

/// Files read per scan, at most.
pub const FILES_MAX: usize = 5_000;
/// Files larger than this are not read (generated tables, amalgamations).
pub const FILE_BYTES_MAX: u64 = 4 << 20;
/// Places named in an answer, at most (the count says how many there are).
pub const SHOWN_MAX: usize = 20;

/// What a scan found: the (file, 1-based line) of each hidden use, and whether the scan was
/// cut at its bounds.
#[derive(Debug, Default, PartialEq)]
pub struct Hidden {
    pub places: Vec<(PathBuf, u32)>,
    pub cut: bool,
}

/// A language's scan for uses its server does not list: it reads every file of the language
/// under the root, then says where the name stands hidden (some places are known only once
/// every file was read: a module switched off in another file, a macro that drops its
/// arguments defined in a header).
pub trait Hider {
    /// One file's text (every readable file, whether or not it holds the name).
    fn file(&mut self, path: &Path, text: &str);
    /// The places found, (file, 1-based line), given the server's own locations.
    fn places(&mut self, seen: &HashSet<(PathBuf, u32)>) -> Vec<(PathBuf, u32)>;
    /// Of the places found, one to ask the same question from for an answer that covers them
    /// (the stub that declares the name; a file of the nested project), read with `read`.
    fn ask_from(
        &self,
        _places: &[(PathBuf, u32)],
        _read: &dyn Fn(&Path) -> Option<String>,
    ) -> Option<(PathBuf, u32)> {
        None
    }
}

/// The directories a scan does not enter: hidden ones, `node_modules`, `target`, `venv`,
/// `__pycache__`.
fn skip_dir(name: &str) -> bool {
    name.starts_with('.') || ["node_modules", "target", "venv", "__pycache__"].contains(&name)
}

/// The hidden uses `hider` finds in the files under `root` ending in one of `extensions`,
/// less those in `seen` (file, 1-based line) and those in files `readable` refuses. Hidden
/// directories, `node_modules`, `target`, `venv` and `__pycache__` are skipped; special files
/// are never opened.
pub fn scan(
    root: &Path,
    extensions: &[String],
    hider: &mut dyn Hider,
    seen: &HashSet<(PathBuf, u32)>,
    readable: &dyn Fn(&Path) -> bool,
) -> Hidden {
    let mut found = Hidden::default();
    let mut files = 0usize;
    crate::dependents::each_source_file(root, extensions, skip_dir, |e| {
        files += 1;
        if files > FILES_MAX {
            found.cut = true;
            return ControlFlow::Break(());
        }
        let path = e.path();
        if e.metadata().map_or(true, |m| m.len() > FILE_BYTES_MAX) {
            found.cut = true;
            return ControlFlow::Continue(());
        }
        if !readable(&path) {
            return ControlFlow::Continue(());
        }
        if let Ok(text) = toolvisor_kit::special::read_to_string(&path) {
            hider.file(&path, &text);
        }
        ControlFlow::Continue(())
    });
    let mut places: Vec<(PathBuf, u32)> = hider
        .places(seen)
        .into_iter()
        .filter(|p| !seen.contains(p))
        .collect();
    places.sort();
    places.dedup();
    found.places = places;
    found
}

/// C and C++ (clangd): uses inside a `#define` body or a conditional branch
/// ([`hidden_lines`]), in the arguments of a call of a function-like macro whose body
/// uses none of its parameters (`#define assert(c) ((void)0)`, `#define DEBUGLOG(...) {}`:
/// what is passed never reaches the compiler), and the calls of a macro that pastes the name
/// together (`bitarray_ ## name` called as `SHIFT_FUNC(lshift, …)`: no text spells it, so a
/// rename has nothing to change there).
pub struct CHider {
    word: String,
    places: Vec<(PathBuf, u32)>,
    /// Macros defined somewhere that drop their arguments.
    dropping: HashSet<String>,
    /// Each use of the word inside call parentheses: where, and the names called around it.
    in_calls: Vec<(PathBuf, u32, Vec<String>)>,
    /// Macros that paste a parameter into a name (`bitarray_ ## name`).
    pasting: Vec<Paste>,
    /// Calls of an upper-case name (a macro, by C's habit) with an argument that is part of
    /// the word: where, the name called, the argument's index and text.
    part_calls: Vec<(PathBuf, u32, String, usize, String)>,
}

/// A macro whose body pastes its parameter number `param` between `prefix` and `suffix`
/// (`#define SHIFT_FUNC(name, ...) … bitarray_ ## name (…)`: a call `SHIFT_FUNC(lshift, …)`
/// defines `bitarray_lshift`, a name no text of the program spells).
#[derive(Debug, PartialEq)]
struct Paste {
    name: String,
    param: usize,
    prefix: String,
    suffix: String,
}

impl CHider {
    pub fn new(word: &str) -> CHider {
        CHider {
            word: word.to_string(),
            places: Vec::new(),
            dropping: HashSet::new(),
            in_calls: Vec::new(),
            pasting: Vec::new(),
            part_calls: Vec::new(),
        }
    }
}

/// Calls held at most by one scan (the calls of upper-case names with an argument that is
/// part of the word).
const PART_CALLS_MAX: usize = 10_000;

impl Hider for CHider {
    fn file(&mut self, path: &Path, text: &str) {
        if text.contains("#define") || text.contains("# define") {
            self.dropping.extend(dropping_macros(text));
            if text.contains("##") {
                self.pasting.extend(pasting_macros(text));
            }
        }
        if !self.word.is_empty() && self.part_calls.len() < PART_CALLS_MAX {
            for (line, callee, index, arg) in part_calls(text, &self.word) {
                self.part_calls
                    .push((path.to_path_buf(), line, callee, index, arg));
            }
        }
        if self.word.is_empty() || !text.contains(&self.word) {
            return;
        }
        for line in hidden_lines(text, &self.word) {
            self.places.push((path.to_path_buf(), line));
        }
        for (line, callees) in call_chains(text, &self.word) {
            self.in_calls.push((path.to_path_buf(), line, callees));
        }
    }

    fn places(&mut self, _seen: &HashSet<(PathBuf, u32)>) -> Vec<(PathBuf, u32)> {
        let mut out = std::mem::take(&mut self.places);
        for (path, line, callees) in &self.in_calls {
            if callees.iter().any(|c| self.dropping.contains(c)) {
                out.push((path.clone(), *line));
            }
        }
        // A call that pastes the word together: where it is defined (or used) by a name
        // the text never spells.
        for (path, line, callee, index, arg) in &self.part_calls {
            let pasted = self.pasting.iter().any(|p| {
                p.name == *callee
                    && p.param == *index
                    && format!("{}{arg}{}", p.prefix, p.suffix) == self.word
            });
            if pasted {
                out.push((path.clone(), *line));
            }
        }
        out
    }
}

/// The function-like macros `text` defines that paste a parameter into a name: each chain
/// `a ## b ## …` of their body with one parameter in it, the names around it its prefix and
/// suffix.
fn pasting_macros(text: &str) -> Vec<Paste> {
    let mut out = Vec::new();
    for (name, params, body) in defines(text) {
        let tokens = paste_tokens(&body);
        let mut i = 0;
        while i < tokens.len() {
            // A chain: names joined by `##`.
            let mut chain = vec![tokens[i].clone()];
            let mut j = i;
            while j + 2 < tokens.len() && tokens[j + 1] == "##" && tokens[j + 2] != "##" {
                chain.push(tokens[j + 2].clone());
                j += 2;
            }
            if chain.len() > 1 {
                let at: Vec<usize> = chain
                    .iter()
                    .enumerate()
                    .filter(|(_, t)| params.contains(t))
                    .map(|(k, _)| k)
                    .collect();
                if let [k] = at[..]
                    && let Some(param) = params.iter().position(|p| *p == chain[k])
                {
                    out.push(Paste {
                        name: name.clone(),
                        param,
                        prefix: chain[..k].concat(),
                        suffix: chain[k + 1..].concat(),
                    });
                }
            }
            i = j + 1;
        }
    }
    out
}

/// A macro body's names and `##` markers, in order (all else left out: a chain is names
/// joined by `##` only).
fn paste_tokens(body: &str) -> Vec<String> {
    let mut out = Vec::new();
    let b = body.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_alphanumeric() || c == b'_' {
            let start = i;
            i = ident_end(b, i);
            out.push(body[start..i].to_string());
        } else if c == b'#' && b.get(i + 1) == Some(&b'#') {
            out.push("##".to_string());
            i += 2;
        } else {
            if !c.is_ascii_whitespace() {
                out.push(String::new());
            }
            i += 1;
        }
    }
    out
}

/// Each function-like `#define` of `text`: its name, parameters and body (continuation lines
/// joined, comments blanked).
fn defines(text: &str) -> Vec<(String, Vec<String>, String)> {
    let mut out = Vec::new();
    let mut in_comment = false;
    let mut lines = text.lines();
    while let Some(raw) = lines.next() {
        let mut code = strip(raw, &mut in_comment);
        let Some(rest) = code.trim_start().strip_prefix('#') else {
            continue;
        };
        let Some(rest) = rest.trim_start().strip_prefix("define") else {
            continue;
        };
        let mut directive = rest.trim_start().to_string();
        while code.trim_end().ends_with('\\') {
            directive = directive.trim_end().trim_end_matches('\\').to_string();
            let Some(next) = lines.next() else { break };
            code = strip(next, &mut in_comment);
            directive.push(' ');
            directive.push_str(&code);
        }
        let name = identifier(&directive).to_string();
        let Some(after) = directive[name.len()..].strip_prefix('(') else {
            continue;
        };
        let Some(close) = after.find(')') else {
            continue;
        };
        let params = after[..close]
            .split(',')
            .map(|p| p.trim().to_string())
            .filter(|p| !p.is_empty())
            .collect();
        if !name.is_empty() {
            out.push((name, params, after[close + 1..].to_string()));
        }
    }
    out
}

/// Each call in `text`'s code (directives left out) of an upper-case name, by C's habit a
/// macro, with an argument that is a name making up part of `word`: its 1-based line, the name
/// called, the argument's index and text. Arguments are read on the call's line.
fn part_calls(text: &str, word: &str) -> Vec<(u32, String, usize, String)> {
    let mut out = Vec::new();
    let mut in_comment = false;
    let mut directive = false;
    for (i, raw) in text.lines().enumerate() {
        let code = strip(raw, &mut in_comment);
        let continues = code.trim_end().ends_with('\\');
        if directive || code.trim_start().starts_with('#') {
            directive = continues;
            continue;
        }
        let b = code.as_bytes();
        let mut j = 0;
        while j < b.len() {
            if !(b[j].is_ascii_alphabetic() || b[j] == b'_')
                || (j > 0 && (b[j - 1].is_ascii_alphanumeric() || b[j - 1] == b'_'))
            {
                j += 1;
                continue;
            }
            let start = j;
            j = ident_end(b, j);
            let callee = &code[start..j];
            let upper = callee.bytes().any(|c| c.is_ascii_uppercase())
                && !callee.bytes().any(|c| c.is_ascii_lowercase());
            if !upper || !code[j..].trim_start().starts_with('(') {
                continue;
            }
            let open = j + code[j..].find('(').unwrap_or(0) + 1;
            let mut depth = 0usize;
            let mut args = vec![String::new()];
            for c in code[open..].chars() {
                match c {
                    '(' => depth += 1,
                    ')' if depth == 0 => break,
                    ')' => depth -= 1,
                    ',' if depth == 0 => {
                        args.push(String::new());
                        continue;
                    }
                    _ => {}
                }
                if let Some(last) = args.last_mut() {
                    last.push(c);
                }
            }
            for (index, arg) in args.iter().enumerate() {
                let arg = arg.trim();
                let name =
                    !arg.is_empty() && arg.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_');
                if name && arg.len() < word.len() && word.contains(arg) {
                    out.push((i as u32 + 1, callee.to_string(), index, arg.to_string()));
                }
            }
        }
    }
    out
}

/// The function-like macros `text` defines whose body uses none of their parameters.
fn dropping_macros(text: &str) -> Vec<String> {
    defines(text)
        .into_iter()
        .filter(|(_, params, body)| {
            !params.is_empty()
                && !params.iter().any(|p| match p.trim_end_matches("...") {
                    "" => has_word(body, "__VA_ARGS__") || has_word(body, "__VA_OPT__"),
                    named => has_word(body, named),
                })
        })
        .map(|(name, _, _)| name)
        .collect()
}

/// Each line of `text` where `word` stands as a whole word in code inside the parentheses of
/// a call, with the names called around it, innermost last (`f(g(word))`: `["f", "g"]`).
/// Preprocessor lines are left out (their uses are [`hidden_lines`]' business).
fn call_chains(text: &str, word: &str) -> Vec<(u32, Vec<String>)> {
    let mut out = Vec::new();
    let mut in_comment = false;
    let mut stack: Vec<String> = Vec::new();
    let mut directive = false;
    for (i, raw) in text.lines().enumerate() {
        let code = strip(raw, &mut in_comment);
        let continues = code.trim_end().ends_with('\\');
        if directive || code.trim_start().starts_with('#') {
            directive = continues;
            continue;
        }
        let b = code.as_bytes();
        let mut j = 0;
        let mut last_ident: Option<(usize, usize)> = None;
        while j < b.len() {
            let c = b[j];
            if c.is_ascii_alphabetic() || c == b'_' {
                let start = j;
                j = ident_end(b, j);
                if &code[start..j] == word && !stack.is_empty() {
                    out.push((i as u32 + 1, stack.clone()));
                }
                last_ident = Some((start, j));
                continue;
            }
            match c {
                b'(' => {
                    // The name just before the parenthesis, spaces between allowed.
                    let callee = last_ident
                        .filter(|(_, end)| code[*end..j].trim().is_empty())
                        .map(|(s, e)| code[s..e].to_string())
                        .unwrap_or_default();
                    stack.push(callee);
                }
                b')' => {
                    stack.pop();
                }
                // A statement or block ends: parentheses left open were not calls.
                b';' | b'{' | b'}' if stack.iter().all(String::is_empty) => stack.clear(),
                _ => {}
            }
            if !c.is_ascii_whitespace() {
                last_ident = None;
            }
            j += 1;
        }
    }
    out.dedup();
    out
}

/// A conditional block open at a line: whether it is an include guard.
struct Frame {
    guard: bool,
}

/// The 1-based lines of `text` where `word` stands as a whole word in code inside a `#define`
/// body or a conditional branch (see the module doc).
pub fn hidden_lines(text: &str, word: &str) -> Vec<u32> {
    let mut lines = Vec::new();
    let mut in_comment = false;
    let mut continuing_define = false;
    let mut continuing_directive = false;
    let mut stack: Vec<Frame> = Vec::new();
    // `#ifndef X` just seen, waiting for `#define X` to make it an include guard.
    let mut pending_guard: Option<String> = None;
    for (i, raw) in text.lines().enumerate() {
        let n = i as u32 + 1;
        let code = strip(raw, &mut in_comment);
        let continues = code.trim_end().ends_with('\\');
        if continuing_define {
            if has_word(&code, word) {
                lines.push(n);
            }
            continuing_define = continues;
            continue;
        }
        if continuing_directive {
            continuing_directive = continues;
            continue;
        }
        let trimmed = code.trim_start();
        if let Some(directive) = trimmed.strip_prefix('#') {
            let directive = directive.trim_start();
            let name: String = directive
                .chars()
                .take_while(|c| c.is_ascii_alphabetic())
                .collect();
            let rest = directive[name.len()..].trim_start();
            let guard_name = pending_guard.take();
            match name.as_str() {
                "if" | "ifdef" => stack.push(Frame { guard: false }),
                "ifndef" => {
                    stack.push(Frame { guard: false });
                    pending_guard = Some(identifier(rest).to_string());
                }
                "endif" => {
                    stack.pop();
                }
                "define" => {
                    let macro_name = identifier(rest);
                    if guard_name.as_deref() == Some(macro_name)
                        && let Some(top) = stack.last_mut()
                    {
                        top.guard = true;
                    }
                    let mut body = &rest[macro_name.len()..];
                    if body.starts_with('(') {
                        body = body.find(')').map_or("", |end| &body[end + 1..]);
                    }
                    if has_word(body, word) {
                        lines.push(n);
                    }
                    continuing_define = continues;
                    continue;
                }
                _ => {}
            }
            continuing_directive = continues;
            continue;
        }
        if !trimmed.is_empty() {
            pending_guard = None;
        }
        if stack.iter().any(|f| !f.guard) && has_word(&code, word) {
            lines.push(n);
        }
    }
    lines
}

/// Where the identifier characters (ASCII letters, digits, `_`) from `b[i]` on end.
fn ident_end(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
        i += 1;
    }
    i
}

/// The identifier at the start of `s`.
fn identifier(s: &str) -> &str {
    let end = s
        .char_indices()
        .find(|(_, c)| !(c.is_alphanumeric() || *c == '_'))
        .map_or(s.len(), |(i, _)| i);
    &s[..end]
}

/// Whether `word` stands in `code` as a whole word.
pub(crate) fn has_word(code: &str, word: &str) -> bool {
    let is_word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    code.match_indices(word).any(|(at, _)| {
        !is_word(code[..at].chars().next_back()) && !is_word(code[at + word.len()..].chars().next())
    })
}

/// `line` with comments and the insides of string and character literals blanked (a block
/// comment may run on from an earlier line: `in_comment`).
fn strip(line: &str, in_comment: &mut bool) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        if *in_comment {
            if c == '*' && chars.peek() == Some(&'/') {
                chars.next();
                *in_comment = false;
            }
            out.push(' ');
            continue;
        }
        if let Some(q) = quote {
            if c == '\\' {
                chars.next();
            } else if c == q {
                quote = None;
                out.push(c);
                continue;
            }
            out.push(' ');
            continue;
        }
        match c {
            '/' if chars.peek() == Some(&'/') => break,
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                *in_comment = true;
                out.push(' ');
            }
            '"' | '\'' => {
                quote = Some(c);
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    // A continuation backslash ends a line even after a stripped comment.
    if line.trim_end().ends_with('\\') && !out.trim_end().ends_with('\\') {
        out.push('\\');
    }
    out
}

/// "core.h:7, main.c:12" for the first [`SHOWN_MAX`] places, shown relative to `base`.
pub fn show(places: &[(PathBuf, u32)], base: &Path) -> String {
    let mut shown: Vec<String> = places
        .iter()
        .take(SHOWN_MAX)
        .map(|(p, l)| format!("{}:{l}", crate::answers::show_path(p, base)))
        .collect();
    if places.len() > SHOWN_MAX {
        shown.push(format!("and {} more", places.len() - SHOWN_MAX));
    }
    shown.join(", ")
}

/// The answer [`gap`] looks at: asked from `asked` about `word`, the server's locations
/// `seen` (file, 1-based line), what a miss means for it (`missed`: "the rename does not change
/// them"), and whether it is a call hierarchy's callers (`calls`).
pub(crate) struct Question<'a> {
    pub asked: &'a Path,
    pub word: &'a str,
    pub seen: HashSet<(PathBuf, u32)>,
    pub missed: &'a str,
    pub calls: bool,
}

/// What an answer about `word`, asked from `asked`, may miss because of where the server
/// does not look: inside macros and code that may be compiled out (clangd, rust-analyzer), or
/// behind a stub (pyright: [`python`]). `None` for other servers, or when every such place is
/// in `seen` (the server's locations: file, 1-based line). `missed` says what that means for
/// the answer ("the rename does not change them"). The scan runs on the blocking pool.
pub(crate) async fn gap(
    ctx: &CallCtx,
    servers: &Servers,
    shared: &ServerShared,
    question: Question<'_>,
) -> Option<String> {
    let Question {
        asked,
        word,
        seen,
        missed,
        calls,
    } = question;
    if word.is_empty() {
        return None;
    }
    let mut extensions = servers
        .languages()
        .get(&shared.language)
        .map(|s| s.extensions.clone())
        .unwrap_or_default();
    let (mut hider, blind_to): (Box<dyn Hider + Send>, &str) = if shared.flavor.clangd {
        (
            Box::new(CHider::new(word)),
            "`#define` bodies, conditional (`#if`) branches that may be off in this build, the arguments of macros that drop them, or the calls of macros that paste a name together (`bitarray_ ## name`)",
        )
    } else if shared.flavor.rust_analyzer {
        (
            Box::new(rust::RustHider::new(word).reading_manifests({
                let ctx = ctx.clone();
                std::sync::Arc::new(move |p: &Path| ctx.may_read(p))
            })),
            "`macro_rules!` bodies, macro calls' arguments it did not resolve, doc-test examples, or code under a `#[cfg(…)]` that may be off (a feature not enabled, a module switched off)",
        )
    } else if shared.flavor.gopls {
        (
            Box::new(go::GoHider::new(word)),
            "files a build constraint leaves out of this machine's build (a `//go:build` line, or a file name for another GOOS or GOARCH, such as `_darwin.go`)",
        )
    } else if shared.flavor.loads_projects_lazily {
        (
            Box::new(typescript::TsHider::new(
                word,
                &shared.root,
                ctx.may_read(&shared.root.join("tsconfig.json")),
            )),
            "the projects nested in this one (a `tsconfig.json` below the root: such a project is searched only once a file of it is open) or the files its `tsconfig.json` leaves out (not in its `include` or `files`, or `exclude`d: searched only while open)",
        )
    } else if shared.flavor.pyright && asked.extension().is_some_and(|e| e == "py" || e == "pyi") {
        extensions = vec!["py".to_string(), "pyi".to_string()];
        (
            Box::new(python::PyHider::new(word, calls)),
            "doctest examples (the `>>>` lines of docstrings, which it does not analyse), calls through an alias the name is imported as (`from m import name as other`), or `.pyi` stubs (a use that went through a stub is linked to the stub)",
        )
    } else {
        return None;
    };
    let (root, ctx_owned) = (shared.root.clone(), ctx.clone());
    let (found, ask_at) = tokio::task::spawn_blocking(move || {
        let found = scan(&root, &extensions, hider.as_mut(), &seen, &|p| {
            ctx_owned.may_read(p)
        });
        let ask_at = hider.ask_from(&found.places, &|p| ctx_owned.read_text(p).ok());
        (found, ask_at)
    })
    .await
    .ok()?;
    if found.places.is_empty() && !found.cut {
        return None;
    }
    let cut = match found.cut {
        true => format!(
            " (the scan read at most {FILES_MAX} files of at most {} MiB each, so there may be more)",
            FILE_BYTES_MAX >> 20
        ),
        false => String::new(),
    };
    if found.places.is_empty() {
        return Some(format!(
            "{} may not list uses inside {blind_to}, and not every file could be scanned for them{cut}; grep for `{word}`",
            shared.id
        ));
    }
    let places = show(&found.places, &ctx.workdir);
    let n = found.places.len();
    let plural = if n == 1 { "" } else { "s" };
    let ask = match ask_at {
        // pyright: the stub that declares the name.
        Some((file, line)) if shared.flavor.pyright => format!(
            "; asked from the stub that declares it (`file`: {}, `line`: {line}), the answer covers the uses that go through it",
            crate::answers::show_path(&file, &ctx.workdir)
        ),
        Some((file, line)) => format!(
            "; asked from a file there (`file`: {}, `line`: {line}), the answer covers them",
            crate::answers::show_path(&file, &ctx.workdir)
        ),
        None => String::new(),
    };
    Some(format!(
        "{} does not list uses inside {blind_to}: `{word}` stands in {n} such place{plural} it did not report (a place may be another symbol of the same name), {places}; {missed}{ask}{cut}",
        shared.id,
    ))
}

/// `error` about a position in `path`, told why when the file is a Rust module switched off
/// by a `#[cfg(…)]` (rust-analyzer then knows nothing in it: "No references found at
/// position", "not a function"); else as it is.
pub(crate) async fn explain_switched_off(
    ctx: &CallCtx,
    shared: &ServerShared,
    path: &Path,
    error: ToolError,
) -> ToolError {
    if !shared.flavor.rust_analyzer {
        return error;
    }
    let (file, root, ctx_owned) = (path.to_path_buf(), shared.root.clone(), ctx.clone());
    let Ok(Some(declared)) = tokio::task::spawn_blocking(move || {
        rust::switched_off(&file, &root, &|p| ctx_owned.may_read(p))
    })
    .await
    else {
        return error;
    };
    let shown = |p: &Path| crate::answers::show_path(p, &shared.root);
    ToolError::new(
        error.kind,
        format!(
            "{} ({} is a module switched off by a `#[cfg(…)]` where {} declares it, a feature not enabled: rust-analyzer does not analyse it)",
            error.message,
            shown(path),
            shown(&declared)
        ),
        "ask about code that is built, enable the feature for rust-analyzer (its `cargo.features` setting), or grep",
    )
}

/// Why the server of `shared` does not check the file at `path` in this build, if it does
/// not: a Go file a build constraint leaves out (gopls), a Rust module switched off by a
/// `#[cfg(…)]` (rust-analyzer). Blocking (reads the file, walks up its modules).
pub(crate) fn left_out_of_build(
    shared: &ServerShared,
    path: &Path,
    readable: &dyn Fn(&Path) -> bool,
) -> Option<String> {
    if shared.flavor.gopls {
        let text = toolvisor_kit::special::read_to_string(path).ok()?;
        return go::left_out(path, &text).then(|| {
            "a build constraint leaves it out of this machine's build (its `//go:build` line or its file name), and gopls checks only what this build takes".to_string()
        });
    }
    if shared.flavor.rust_analyzer {
        let declared = rust::switched_off(path, &shared.root, readable)?;
        return Some(format!(
            "it is a module switched off by a `#[cfg(…)]` where {} declares it (a feature not enabled), and rust-analyzer does not analyse it",
            crate::answers::show_path(&declared, &shared.root)
        ));
    }
    None
}

/// Two gaps as one reason.
pub(crate) fn join(a: Option<String>, b: Option<String>) -> Option<String> {
    match (a, b) {
        (Some(a), Some(b)) => Some(format!("{a}; {b}")),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uses_in_macro_bodies_and_branches_count_comments_and_guards_do_not() {
        let header = "#ifndef CORE_H\n#define CORE_H\n\nint enlist(int x);\n\n#define TWICE(v) \\\n    (enlist(v) + enlist(v))\n#define enlisted 1\n\n#endif\n";
        assert_eq!(
            hidden_lines(header, "enlist"),
            vec![7],
            "the guard is no branch"
        );
        let main = "/* enlist\n   enlist */\nint run(void) {\n    int n = enlist(1); // enlist\n#ifdef LEGACY\n    n += enlist(2);\n    char *s = \"enlist\";\n#else\n    n += enlist(3);\n#endif\n    return n;\n}\n#define CALL enlist\n";
        assert_eq!(hidden_lines(main, "enlist"), vec![6, 9, 13]);
        // An #ifndef that guards nothing is a branch.
        let t = "#ifndef FAST\nint a = enlist(1);\n#endif\n";
        assert_eq!(hidden_lines(t, "enlist"), vec![2]);
    }

    #[test]
    fn the_arguments_of_a_macro_that_drops_them_are_hidden() {
        let text = "#ifdef DEBUG\n#  define DEBUGLOG(l, ...) fprintf(stderr, __VA_ARGS__)\n#else\n#  define DEBUGLOG(...) {}\n#endif\n#define assert(c) ((void)0)\n#define TWICE(x) ((x) * 2)\nint f(int tmpOut) {\n    assert(tmpOut > 0);\n    DEBUGLOG(2, \"%u\", g(tmpOut));\n    return TWICE(tmpOut);\n}\n";
        let mut dropping = dropping_macros(text);
        dropping.sort();
        assert_eq!(dropping, vec!["DEBUGLOG", "assert"]);
        let mut h = CHider::new("tmpOut");
        h.file(Path::new("/p/lz4frame.c"), text);
        let got = h.places(&HashSet::new());
        let lines: Vec<u32> = got.iter().map(|(_, l)| *l).collect();
        assert_eq!(
            lines,
            vec![9, 10],
            "in assert and DEBUGLOG, not in TWICE or the signature"
        );
    }

    #[test]
    fn a_name_pasted_together_by_a_macro_is_found_where_the_macro_is_called() {
        let header = "#define SHIFT_FUNC(name, inplace, op) \\\nstatic PyObject * \\\nbitarray_ ## name (PyObject *self) { return op; }\n#define COUNT(oper) int count_ ## oper ## _all(void);\n";
        assert_eq!(
            pasting_macros(header),
            vec![
                Paste {
                    name: "SHIFT_FUNC".into(),
                    param: 0,
                    prefix: "bitarray_".into(),
                    suffix: String::new()
                },
                Paste {
                    name: "COUNT".into(),
                    param: 0,
                    prefix: "count_".into(),
                    suffix: "_all".into()
                },
            ]
        );
        let code =
            "SHIFT_FUNC(lshift, 0, <<=)\nSHIFT_FUNC(rshift, 0, >>=)\nCOUNT(and)\nint x = lshift;\n";
        let mut h = CHider::new("bitarray_lshift");
        h.file(Path::new("/p/a.h"), header);
        h.file(Path::new("/p/a.c"), code);
        assert_eq!(
            h.places(&HashSet::new()),
            vec![(PathBuf::from("/p/a.c"), 1)]
        );
        let mut h = CHider::new("count_and_all");
        h.file(Path::new("/p/a.c"), code);
        h.file(Path::new("/p/a.h"), header);
        assert_eq!(
            h.places(&HashSet::new()),
            vec![(PathBuf::from("/p/a.c"), 3)],
            "the header read after the call"
        );
    }

    #[test]
    fn a_scan_leaves_out_what_the_server_saw() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join("a.h"), "#define TWICE(v) (enlist(v) + 1)\n").unwrap();
        std::fs::write(root.join("b.c"), "#if 0\nenlist(1);\n#endif\n").unwrap();
        std::fs::write(root.join("c.txt"), "#define X enlist\n").unwrap();
        let ext = vec!["c".to_string(), "h".to_string()];
        let seen = HashSet::from([(root.join("b.c"), 2)]);
        let found = scan(root, &ext, &mut CHider::new("enlist"), &seen, &|_| true);
        assert_eq!(found.places, vec![(root.join("a.h"), 1)]);
        assert!(!found.cut);
        let none = scan(root, &ext, &mut CHider::new("enlist"), &seen, &|p| {
            !p.ends_with("a.h")
        });
        assert!(none.places.is_empty(), "{none:?}");
    }
}
