//! What a server says about its own work, folded into one question: is it still busy, and
//! with what? `$/progress` tokens begun and not ended, rust-analyzer's quiescence, pyright's
//! "Found N source files" log line, clangd's first background index pass over a compilation
//! database. Cleared with each new incarnation.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::flavor::Flavor;
use crate::lock;

/// A `$/progress` notification, read.
pub(crate) enum Step {
    Begin { token: String, title: String },
    Report,
    End { token: String },
}

/// clangd's `$/progress` token for its background index.
pub(crate) const BACKGROUND_INDEX_TOKEN: &str = "backgroundIndexProgress";

/// How long after a document under a compilation database is opened clangd counts as indexing
/// with no word of its background index yet. clangd begins it within milliseconds of loading
/// the database (measured: 1 ms after the `didOpen`, the pass over 4 files ended 12 ms later);
/// on a loaded machine its first word came after the settle, and `references` answered from
/// the open file alone, marked complete. The bound keeps a clangd that never reports (an
/// older one, an index turned off by a flag toolvisor does not know) from stalling every
/// index-wide question: after it, readiness is what the server says again.
pub(crate) const FIRST_INDEX_BOUND: Duration = Duration::from_secs(20);

/// clangd's first background index pass in an incarnation.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
enum FirstIndex {
    /// No document under a compilation database has been opened in this incarnation.
    #[default]
    NotExpected,
    /// One was opened at this instant; the pass has not ended yet.
    Awaiting(Instant),
    /// The pass ended: from now on `$/progress` alone says whether clangd is indexing.
    Done,
}

/// The server's own account of its work in this incarnation.
#[derive(Debug, Default)]
pub(crate) struct Progress {
    /// Token → title (and the last report's message) of each work begun and not ended.
    tokens: Mutex<BTreeMap<String, String>>,
    /// rust-analyzer's `experimental/serverStatus`: `Some(true)` once quiescent.
    quiescent: Mutex<Option<bool>>,
    expects_status: bool,
    ready_log: Option<&'static str>,
    seen_ready_log: Mutex<bool>,
    /// clangd with its background index on (`Flavor::background_index`).
    indexes_databases: bool,
    first_index: Mutex<FirstIndex>,
    /// A document under a compilation database was opened in some incarnation: re-opening
    /// the documents in a new one starts a pass again. Kept across incarnations.
    database_opened: AtomicBool,
}

impl Progress {
    pub fn new(flavor: &Flavor) -> Progress {
        Progress {
            expects_status: flavor.rust_analyzer,
            ready_log: flavor.ready_log,
            indexes_databases: flavor.background_index,
            ..Default::default()
        }
    }

    /// A new incarnation: nothing is known of its work yet.
    pub fn clear(&self) {
        lock(&self.tokens).clear();
        *lock(&self.quiescent) = None;
        *lock(&self.seen_ready_log) = false;
        *lock(&self.first_index) = FirstIndex::NotExpected;
    }

    /// A document under a compilation database is about to be opened (clangd): the first
    /// such open in an incarnation starts clangd's background index over every file the
    /// database lists, and until that pass has ended (or [`FIRST_INDEX_BOUND`] passed with no
    /// word of it) the server counts as indexing, whatever it has said so far.
    pub fn opened_with_database(&self) {
        if !self.indexes_databases {
            return;
        }
        self.database_opened.store(true, Ordering::Relaxed);
        self.await_first_index();
    }

    /// The documents were re-opened in a new incarnation: a pass starts again when one of
    /// them lay under a compilation database.
    pub fn reopened(&self) {
        if self.database_opened.load(Ordering::Relaxed) {
            self.await_first_index();
        }
    }

    /// Whether clangd's first index pass of this incarnation is awaited or over: no open
    /// needs to look for a compilation database then.
    pub fn first_index_expected(&self) -> bool {
        *lock(&self.first_index) != FirstIndex::NotExpected
    }

    fn await_first_index(&self) {
        let mut first = lock(&self.first_index);
        if *first == FirstIndex::NotExpected {
            *first = FirstIndex::Awaiting(Instant::now());
        }
    }

    /// When the wait for clangd's first word of its background index gives up, while it
    /// waits: a waiter wakes then, as nothing else would change.
    pub fn gives_up_at(&self) -> Option<Instant> {
        match *lock(&self.first_index) {
            FirstIndex::Awaiting(since) => {
                Some(since + FIRST_INDEX_BOUND).filter(|at| *at > Instant::now())
            }
            _ => None,
        }
    }

    /// What the server is still doing by its own account, or `None` when it has said it
    /// is done.
    pub fn busy(&self) -> Option<String> {
        if let Some(title) = lock(&self.tokens).values().next() {
            return Some(title.clone());
        }
        if self.ready_log.is_some() && !*lock(&self.seen_ready_log) {
            return Some("scanning the workspace for source files".into());
        }
        if self.expects_status && *lock(&self.quiescent) != Some(true) {
            return Some("loading the workspace (not quiescent yet)".into());
        }
        if let FirstIndex::Awaiting(since) = *lock(&self.first_index)
            && since.elapsed() < FIRST_INDEX_BOUND
        {
            return Some(
                "about to index the files its compile_commands.json lists (no word of its background index yet)".into(),
            );
        }
        None
    }

    /// Fold a `$/progress` notification in; `None` when it is not one toolvisor reads.
    pub fn apply(&self, server: &str, params: &Value) -> Option<Step> {
        let token = match params.get("token") {
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => return None,
        };
        let value = params.get("value").cloned().unwrap_or(Value::Null);
        match value.get("kind").and_then(Value::as_str) {
            Some("begin") => {
                let title = value
                    .get("title")
                    .and_then(Value::as_str)
                    .unwrap_or("working")
                    .to_string();
                tracing::debug!(server, token, title, "server progress begins");
                lock(&self.tokens).insert(token.clone(), title.clone());
                Some(Step::Begin { token, title })
            }
            Some("report") => {
                if let Some(msg) = value.get("message").and_then(Value::as_str) {
                    let mut p = lock(&self.tokens);
                    if let Some(t) = p.get_mut(&token) {
                        let title = t.split(" — ").next().unwrap_or("").to_string();
                        *t = format!("{title} — {msg}");
                    }
                }
                Some(Step::Report)
            }
            Some("end") => {
                tracing::debug!(server, token, "server progress ends");
                lock(&self.tokens).remove(&token);
                if token == BACKGROUND_INDEX_TOKEN {
                    let mut first = lock(&self.first_index);
                    if matches!(*first, FirstIndex::Awaiting(_)) {
                        *first = FirstIndex::Done;
                    }
                }
                Some(Step::End { token })
            }
            _ => None,
        }
    }

    /// A log line; true when it is the one that says the workspace scan is done.
    pub fn log_line(&self, message: &str) -> bool {
        let done = self.ready_log.is_some_and(|p| message.contains(p));
        if done {
            *lock(&self.seen_ready_log) = true;
        }
        done
    }

    /// rust-analyzer's `experimental/serverStatus`.
    pub fn status(&self, params: &Value) {
        *lock(&self.quiescent) = params.get("quiescent").and_then(Value::as_bool);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::path::Path;

    fn clangd(args: &[&str]) -> Progress {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        Progress::new(&Flavor::of(Path::new("/usr/bin/clangd"), &args))
    }

    #[test]
    fn clangd_counts_indexing_from_the_open_until_its_first_pass_ends() {
        let p = clangd(&[]);
        assert_eq!(p.busy(), None, "nothing opened yet");
        p.opened_with_database();
        let busy = p.busy().expect("indexing before any word of it");
        assert!(busy.contains("compile_commands.json"), "{busy}");
        assert!(p.gives_up_at().is_some());
        let begin = json!({"token": BACKGROUND_INDEX_TOKEN, "value": {"kind": "begin", "title": "indexing"}});
        p.apply("c", &begin);
        assert_eq!(p.busy().as_deref(), Some("indexing"));
        p.apply(
            "c",
            &json!({"token": BACKGROUND_INDEX_TOKEN, "value": {"kind": "end"}}),
        );
        assert_eq!(p.busy(), None);
        // Later opens in the same incarnation wait for no pass of their own.
        p.opened_with_database();
        assert_eq!(p.busy(), None);
        // A new incarnation re-opens the documents: a pass starts again.
        p.clear();
        assert_eq!(p.busy(), None);
        p.reopened();
        assert!(p.busy().is_some());
    }

    #[test]
    fn another_token_ending_is_not_the_index_pass() {
        let p = clangd(&[]);
        p.opened_with_database();
        p.apply(
            "c",
            &json!({"token": 1, "value": {"kind": "begin", "title": "building preamble"}}),
        );
        p.apply("c", &json!({"token": 1, "value": {"kind": "end"}}));
        assert!(
            p.busy()
                .is_some_and(|b| b.contains("compile_commands.json"))
        );
    }

    #[test]
    fn the_wait_for_a_first_word_is_bounded() {
        let p = clangd(&[]);
        p.opened_with_database();
        let long_ago = Instant::now() - FIRST_INDEX_BOUND - Duration::from_millis(1);
        *lock(&p.first_index) = FirstIndex::Awaiting(long_ago);
        assert_eq!(
            p.busy(),
            None,
            "past the bound, readiness is the server's word"
        );
        assert_eq!(p.gives_up_at(), None, "and no waiter wakes for it");
    }

    #[test]
    fn an_index_turned_off_or_another_server_expects_no_pass() {
        for p in [
            clangd(&["--background-index=false"]),
            clangd(&["-background-index=0"]),
            Progress::new(&Flavor::of(Path::new("/usr/bin/pylsp"), &[])),
        ] {
            p.opened_with_database();
            p.reopened();
            assert_eq!(p.busy(), None);
        }
    }
}
