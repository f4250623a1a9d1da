//! Structural search and staged rewrites on ast-grep: ast_grep, ast_edit, resolve.
//!
//! - [`lang`]: language ids, inference, compiling a pattern (with a natural context where the
//!   language needs one) and the literal texts the prefilter looks for.
//! - [`search`]: the ignore-aware parallel walk, the literal prefilter, matching, bounded
//!   results.
//! - [`rewrite`]: a rewrite proposal — the new content of every touched file and a bounded
//!   unified-diff preview. Nothing is written.
//! - [`budget`]: the daemon-wide budget of bytes parsed at once and the minified-file rule.
//! - [`store`]: staged edits persisted on disk per conversation; accept compares every file
//!   with its snapshot and writes all of them or none.

#![forbid(unsafe_code)]

pub mod budget;
pub mod cache;
pub mod lang;
pub mod rewrite;
pub mod search;
pub mod store;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

pub use ast_grep_language::SupportLang;

/// One match of a pattern: what a search answers and its cache remembers.
#[derive(Clone, Debug, Serialize)]
pub struct Match {
    pub path: PathBuf,
    /// 1-based.
    pub line: usize,
    /// 1-based, in characters.
    pub column: usize,
    pub end_line: usize,
    pub end_column: usize,
    /// The matched text, at most [`search::MATCH_TEXT_CHARS`] characters.
    pub text: String,
    /// Metavariable → captured text (`$$$A` captures the run's text from its first node to
    /// its last), at most [`search::CAPTURE_CHARS`] characters each.
    pub captures: BTreeMap<String, String>,
    #[serde(skip)]
    pub byte: usize,
}

/// Everything that can go wrong in this crate; each variant names what was wrong.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("unknown language {given:?}; supported: {}", supported.join(", "))]
    UnknownLanguage {
        given: String,
        supported: Vec<&'static str>,
    },
    #[error("{}: no such file or directory", path.display())]
    PathNotFound { path: PathBuf },
    /// A FIFO, socket or device named as the path: never opened (`toolvisor_kit::special`).
    #[error("{} is {kind}, not a regular file", path.display())]
    NotRegular { path: PathBuf, kind: &'static str },
    #[error("`language` is required: the language of {} cannot be told from its name", path.display())]
    LanguageUnknownForFile { path: PathBuf },
    #[error("{}", language_required(path, found, accepting, prose))]
    LanguageRequired {
        path: PathBuf,
        /// Code languages with files under `path`, with their file counts, most files first.
        found: Vec<(&'static str, usize)>,
        /// Those of them in which the pattern parses.
        accepting: Vec<&'static str>,
        /// Prose and data formats present, never inferred (`lang::is_prose_or_data`).
        prose: Vec<(&'static str, usize)>,
    },
    #[error("the pattern {pattern:?} does not parse as one {language} node: {reason}")]
    PatternInvalid {
        pattern: String,
        language: &'static str,
        reason: String,
    },
    #[error("the rewrite uses {}, which the pattern does not bind (it binds: {})", unbound.iter().map(|v| format!("${v}")).collect::<Vec<_>>().join(", "), if bound.is_empty() { "nothing".to_string() } else { bound.iter().map(|v| format!("${v}")).collect::<Vec<_>>().join(", ") })]
    RewriteUnbound {
        unbound: Vec<String>,
        bound: Vec<String>,
    },
    #[error(
        "the pattern would make {found} replacements, more than max_results = {max}; nothing was staged"
    )]
    TooManyReplacements { found: usize, max: usize },
    #[error("no staged edit {id:?} in conversation {conversation:?}")]
    EditNotFound { id: String, conversation: String },
    #[error("edit {id:?} was already {state} ({ago}); nothing to do")]
    EditResolved {
        id: String,
        state: store::EditState,
        ago: String,
    },
    #[error("edit {id:?} rejected: {} of its {total} files changed since it was staged: {}; nothing was written", changed.len(), changed.iter().map(|c| format!("{} ({})", c.path.display(), c.why)).collect::<Vec<_>>().join(", "))]
    Conflict {
        id: String,
        total: usize,
        changed: Vec<store::Changed>,
    },
    #[error("edit {id:?} refused: {source}{}; nothing was written, the edit stays staged", if *more > 0 { format!(" (and {more} more of its files)") } else { String::new() })]
    Refused {
        id: String,
        /// The first file the accept's check refused.
        path: PathBuf,
        /// Why, as the caller's check said it (the daemon's is the file scope's error).
        source: store::Refusal,
        /// Further files refused.
        more: usize,
    },
    #[error("edit {id:?}: writing {} failed ({source}); {}", path.display(), rollback_summary(restored, unrestored))]
    WriteFailed {
        id: String,
        path: PathBuf,
        source: Box<toolvisor_files::Error>,
        /// Files already written, then restored to their content before the accept.
        restored: Vec<PathBuf>,
        /// Files already written whose restore failed too, with why.
        unrestored: Vec<(PathBuf, String)>,
    },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("staged-edit store {}: {message}", path.display())]
    Store { path: PathBuf, message: String },
    #[error("cancelled")]
    Cancelled,
    /// No room in the daemon-wide parse budget within its wait (`budget`).
    #[error("{message}")]
    Busy { message: String },
    /// A minified file named as the path: never parsed (`budget::Limits::minified`).
    #[error("{} is not parsed: {why}", path.display())]
    Minified { path: PathBuf, why: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

fn language_required(
    path: &std::path::Path,
    found: &[(&'static str, usize)],
    accepting: &[&'static str],
    prose: &[(&'static str, usize)],
) -> String {
    if found.is_empty() {
        let listed: Vec<String> = prose.iter().map(|(l, n)| format!("{l} ({n})")).collect();
        return if prose.is_empty() {
            format!(
                "`language` is required: {} has no file of a supported language",
                path.display()
            )
        } else {
            format!(
                "`language` is required: {} has no code file, only prose and data files ({}), which are searched only when `language` is named",
                path.display(),
                listed.join(", ")
            )
        };
    }
    let listed: Vec<String> = found.iter().map(|(l, n)| format!("{l} ({n})")).collect();
    format!(
        "`language` is required: {} has files of several languages ({}) and the pattern parses in {}",
        path.display(),
        listed.join(", "),
        if accepting.is_empty() {
            "none of them".to_string()
        } else {
            accepting.join(", ")
        }
    )
}

fn rollback_summary(restored: &[PathBuf], unrestored: &[(PathBuf, String)]) -> String {
    let mut text = if restored.is_empty() {
        "no file had been written yet, so nothing changed".to_string()
    } else {
        format!(
            "the {} file(s) already written were restored ({}), so nothing changed",
            restored.len(),
            restored
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    if !unrestored.is_empty() {
        text = format!(
            "{} file(s) restored; restoring FAILED for {}: those files hold the rewritten content",
            restored.len(),
            unrestored
                .iter()
                .map(|(p, e)| format!("{} ({e})", p.display()))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    text
}

/// Cut `text` to at most `max` characters, saying how much was cut.
pub fn bounded(text: &str, max: usize) -> String {
    let total = text.chars().count();
    if total <= max {
        return text.to_string();
    }
    let kept: String = text.chars().take(max).collect();
    format!("{kept}…[+{} chars]", total - max)
}
