//! The per-run diagnostics ledger: which diagnostics a run has already been told about.
//!
//! Keyed by (severity, code, message) — position deliberately excluded, also where a server
//! writes it into the message text ([`without_positions`]), and a type pyright prints partly
//! unknown as one placeholder ([`key_message`]), so a diagnostic that merely moved
//! is not news — and counted: the file's entry holds, per key, the source line of each
//! diagnostic of that key the run was told of, so a second diagnostic with the same message as
//! an old one is news. Which of a key's diagnostics are the new ones: those whose line text
//! matches no old one's (an added `b: int = "s"` beside an old `a: int = "s"` is the new one,
//! wherever it stands), then, if an old line's text changed, the later ones in the server's
//! order. Scoped per (run, file): the same
//! message in another file is another diagnostic. After every sync the file's entry becomes
//! exactly what the server reports now, so a diagnostic that was fixed and comes back is new
//! again — except a warning or information that went while its file or a file beside it had
//! an error: servers skip their analyzers on code that does not type-check (gopls runs no
//! analyzer on a package with type errors), so such a diagnostic is kept aside, and when it
//! comes back with the fix it is not news; once no file there has an error, what did not
//! come back is dropped. Each entry remembers the file as it was when taken (size and mtime): a file changed
//! since by anyone but the write (a `git checkout`, an editor) is no longer known, and the
//! next write takes its baseline again, so an edit made, undone outside and made again is
//! news again.
//!
//! Runs come and go: a run idle longer than `[lsp] ledger_run_idle_s` is forgotten, and at
//! most `[lsp] ledger_max_runs` runs are kept (the least recently used leaves first). A
//! forgotten run that comes back is told every current diagnostic again.
//!
//! The ledger lives in the manager's diagnostics (`Diagnostics`, `diagnostics.rs`), not in a
//! server actor, so a server crash loses none of it.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// (severity, code, message with its positions taken out: [`without_positions`]).
pub type Key = (u8, String, String);

/// A diagnostic as the ledger holds it: its [`Key`] and the trimmed text of the source line
/// it starts on (which tells two diagnostics of one key apart when lines move).
pub type Mark = (Key, String);

/// `message` without the positions servers write into it, so a diagnostic that moved is the
/// same diagnostic: every number right after a `:` (`util.c:12:5: note: 'start_byte' declared
/// here`, as clangd folds a note into its error) and after `line` or `column` (`line 12`,
/// `lines 3-4`) becomes `#`.
pub fn without_positions(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(c) = rest.chars().next() {
        let after_colon = out.ends_with(':');
        let lower = out.to_ascii_lowercase();
        let after_word = ["line ", "lines ", "column ", "col ", "line: ", "column: "]
            .iter()
            .any(|w| lower.ends_with(w));
        let after_range = out.ends_with("#-") || out.ends_with("#–");
        if c.is_ascii_digit() && (after_colon || after_word || after_range) {
            let digits = rest.len() - rest.trim_start_matches(|d: char| d.is_ascii_digit()).len();
            out.push('#');
            rest = &rest[digits..];
            continue;
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// `message` as the ledger keys it: [`without_positions`], and each quoted type with an
/// unknown part (`"list[list[Unknown]]"`) as one placeholder, `"…Unknown…"`. pyright prints
/// such an inferred type differently from one analysis to the next (how far it got with the
/// unknown parts), so the same error would otherwise look new after the file came back (a
/// `git checkout`). Types known in full stay as they are: a new mismatch is news.
pub fn key_message(message: &str) -> String {
    let message = without_positions(message);
    let parts: Vec<&str> = message.split('"').collect();
    // Balanced quotes only: then every other part is inside a pair.
    if parts.len().is_multiple_of(2) {
        return message;
    }
    parts
        .iter()
        .enumerate()
        .map(|(i, p)| match i % 2 == 1 && p.contains("Unknown") {
            true => "…Unknown…",
            false => p,
        })
        .collect::<Vec<_>>()
        .join("\"")
}

/// `text` with each whole-word `old` made `new`.
fn replace_word(text: &str, old: &str, new: &str) -> String {
    if old.is_empty() {
        return text.to_string();
    }
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(old) {
        let whole = !rest[..at].chars().next_back().is_some_and(is_word)
            && !rest[at + old.len()..].chars().next().is_some_and(is_word);
        out.push_str(&rest[..at]);
        out.push_str(if whole { new } else { old });
        rest = &rest[at + old.len()..];
    }
    out.push_str(rest);
    out
}

/// Default `[lsp] ledger_run_idle_s`: a run without diagnostics for this long is forgotten.
pub const DEFAULT_RUN_IDLE: Duration = Duration::from_secs(6 * 60 * 60);
/// Default `[lsp] ledger_max_runs`.
pub const DEFAULT_MAX_RUNS: usize = 256;

struct Run {
    last: Instant,
    /// Per file: the file as it was when the entry was taken ([`stamp`]) and the line texts
    /// of the diagnostics of each key the run was told of.
    files: HashMap<PathBuf, Entry>,
}

/// The line texts of diagnostics, per key.
type Lines = BTreeMap<Key, Vec<String>>;

/// What a run was told of one file.
#[derive(Default)]
struct Entry {
    at: Stamp,
    /// Reported now.
    told: Lines,
    /// Warnings and information that went while an error was there or beside (see the
    /// module doc): not news when they come back.
    aside: Lines,
}

/// LSP's `DiagnosticSeverity::Error`.
const ERROR: u8 = 1;

/// Whether `lines` holds an error.
fn has_error(lines: &Lines) -> bool {
    lines.keys().any(|(severity, _, _)| *severity == ERROR)
}

/// A file as it is on disk: its size and mtime (`None`: no such file).
type Stamp = Option<(u64, i64, i64)>;

/// `path`'s [`Stamp`] now.
fn stamp(path: &Path) -> Stamp {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.len(), m.mtime(), m.mtime_nsec()))
}

pub struct Ledger {
    runs: Mutex<HashMap<String, Run>>,
    idle: Duration,
    max_runs: usize,
}

impl Default for Ledger {
    fn default() -> Self {
        Ledger::new(DEFAULT_RUN_IDLE, DEFAULT_MAX_RUNS)
    }
}

impl Ledger {
    /// A ledger forgetting runs idle for `idle`, keeping at most `max_runs`.
    pub fn new(idle: Duration, max_runs: usize) -> Ledger {
        Ledger {
            runs: Mutex::new(HashMap::new()),
            idle,
            max_runs: max_runs.max(1),
        }
    }

    /// Record the file's current diagnostics for `run`; return the indices of those that are
    /// new: of each key, those past the number the run was told of before, chosen by line
    /// text (see the module doc).
    pub fn fold(&self, run: &str, path: &Path, current: &[Mark]) -> Vec<usize> {
        let now = Instant::now();
        let taken = stamp(path);
        let mut runs = self.runs.lock().unwrap_or_else(|p| p.into_inner());
        if !runs.contains_key(run) {
            self.prune(&mut runs, now, true);
        }
        let entry = runs.entry(run.to_string()).or_insert_with(|| Run {
            last: now,
            files: HashMap::new(),
        });
        entry.last = now;
        // An error now in this file or one beside it (a Go package is a directory).
        let dir = path.parent();
        let erring = current
            .iter()
            .any(|((severity, _, _), _)| *severity == ERROR)
            || entry
                .files
                .iter()
                .any(|(p, e)| p != path && p.parent() == dir && has_error(&e.told));
        let file = entry.files.entry(path.to_path_buf()).or_default();
        file.at = taken;
        let mut by_key: BTreeMap<&Key, Vec<usize>> = BTreeMap::new();
        for (i, (key, _)) in current.iter().enumerate() {
            by_key.entry(key).or_default().push(i);
        }
        let mut fresh = Vec::new();
        let mut gone: Lines = BTreeMap::new();
        for (key, indices) in &by_key {
            let mut old: Vec<&str> = file
                .told
                .get(*key)
                .map(|lines| lines.iter().map(String::as_str).collect())
                .unwrap_or_default();
            let mut unmatched = Vec::new();
            for &i in indices {
                match old.iter().position(|line| *line == current[i].1) {
                    Some(at) => {
                        old.swap_remove(at);
                    }
                    None => unmatched.push(i),
                }
            }
            // Old ones whose line was rewritten account for as many of the unmatched.
            let carried = old.len().min(unmatched.len());
            let mut unmatched = unmatched.split_off(carried);
            // Those kept aside while an error was there are back, not new.
            if let Some(aside) = file.aside.get_mut(*key) {
                unmatched.retain(|&i| match aside.iter().position(|l| *l == current[i].1) {
                    Some(at) => {
                        aside.swap_remove(at);
                        false
                    }
                    None => true,
                });
            }
            fresh.extend_from_slice(&unmatched);
        }
        // Warnings and information no longer reported while an error is there or beside.
        for (key, lines) in &file.told {
            if key.0 == ERROR || !erring {
                continue;
            }
            let now: Vec<&String> = current
                .iter()
                .filter(|(k, _)| k == key)
                .map(|(_, l)| l)
                .collect();
            let mut left: Vec<&String> = lines.iter().collect();
            for line in &now {
                if let Some(at) = left.iter().position(|l| l == line) {
                    left.swap_remove(at);
                }
            }
            // As many went as are fewer now (the others' lines were rewritten).
            left.truncate(lines.len().saturating_sub(now.len()));
            gone.entry(key.clone())
                .or_default()
                .extend(left.into_iter().cloned());
        }
        fresh.sort_unstable();
        let mut reported_now: Lines = BTreeMap::new();
        for (key, line) in current {
            reported_now
                .entry(key.clone())
                .or_default()
                .push(line.clone());
        }
        file.told = reported_now;
        if erring {
            for (key, lines) in gone {
                file.aside.entry(key).or_default().extend(lines);
            }
        } else {
            file.aside.clear();
        }
        fresh
    }

    /// A rename of `old` to `new` wrote `paths`: what `run` was told of them is told again with
    /// the new name (in each message and line text, as a whole word), so an error that only
    /// names the renamed symbol (pyright: "`width` is not a known attribute") is not news
    /// after the rename.
    pub fn renamed(&self, run: &str, paths: &[PathBuf], old: &str, new: &str) {
        let mut runs = self.runs.lock().unwrap_or_else(|p| p.into_inner());
        let Some(entry) = runs.get_mut(run) else {
            return;
        };
        let swap = |s: &str| replace_word(s, old, new);
        for path in paths {
            if let Some(file) = entry.files.get_mut(path) {
                for keys in [&mut file.told, &mut file.aside] {
                    *keys = std::mem::take(keys)
                        .into_iter()
                        .map(|((sev, code, message), lines)| {
                            (
                                (sev, code, swap(&message)),
                                lines.iter().map(|l| swap(l)).collect(),
                            )
                        })
                        .collect();
                }
            }
        }
    }

    /// Whether `run` holds a diagnostics list for `path` as it is now (it was told about the
    /// file, or took the file's diagnostics before a write as its baseline, and nothing
    /// changed the file since).
    pub fn knows(&self, run: &str, path: &Path) -> bool {
        let now = stamp(path);
        let runs = self.runs.lock().unwrap_or_else(|p| p.into_inner());
        runs.get(run).is_some_and(|r| {
            Instant::now().duration_since(r.last) < self.idle
                && r.files.get(path).is_some_and(|e| e.at == now)
        })
    }

    /// Runs held now, after dropping the idle ones.
    #[cfg(test)]
    pub fn runs(&self) -> usize {
        let mut runs = self.runs.lock().unwrap_or_else(|p| p.into_inner());
        self.prune(&mut runs, Instant::now(), false);
        runs.len()
    }

    /// Drops idle runs; with `make_room`, then the least recently used until one more fits.
    fn prune(&self, runs: &mut HashMap<String, Run>, now: Instant, make_room: bool) {
        runs.retain(|_, r| now.duration_since(r.last) < self.idle);
        while make_room && runs.len() >= self.max_runs {
            let Some(oldest) = runs
                .iter()
                .min_by_key(|(_, r)| r.last)
                .map(|(name, _)| name.clone())
            else {
                break;
            };
            runs.remove(&oldest);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(msg: &str) -> Mark {
        ((1, "E1".into(), msg.into()), String::new())
    }

    fn at(msg: &str, line: &str) -> Mark {
        ((1, "E1".into(), msg.into()), line.into())
    }

    #[test]
    fn a_rename_tells_the_run_its_old_errors_with_the_new_name() {
        let l = Ledger::default();
        let p = Path::new("/t.py");
        let e = "\"width\" is not a known attribute of module";
        assert_eq!(l.fold("r", p, &[at(e, "x = w.width(s)")]), vec![0]);
        l.renamed("r", &[p.to_path_buf()], "width", "text_width");
        let renamed = "\"text_width\" is not a known attribute of module";
        assert!(
            l.fold("r", p, &[at(renamed, "x = w.text_width(s)")])
                .is_empty(),
            "the old error with the new name is news"
        );
        assert_eq!(
            replace_word("width widths _width width", "width", "w2"),
            "w2 widths _width w2"
        );
    }

    #[test]
    fn a_type_printed_partly_unknown_keys_the_same_each_time() {
        let a = "Type \"list[list[Unknown]]\" is not assignable to declared type \"int\"";
        let b = "Type \"list[list[int | Unknown]]\" is not assignable to declared type \"int\"";
        assert_eq!(key_message(a), key_message(b));
        assert_eq!(
            key_message(a),
            "Type \"…Unknown…\" is not assignable to declared type \"int\""
        );
        // Known types stay: another mismatch is another error.
        let c = "Type \"str\" is not assignable to declared type \"int\"";
        let d = "Type \"bytes\" is not assignable to declared type \"int\"";
        assert_ne!(key_message(c), key_message(d));
        assert_eq!(key_message("odd \" quote Unknown"), "odd \" quote Unknown");
    }

    #[test]
    fn the_new_one_of_a_message_is_the_one_on_a_new_line() {
        let l = Ledger::default();
        let p = Path::new("/a.py");
        let e = "Type \"Literal['s']\" is not assignable to declared type \"int\"";
        assert_eq!(l.fold("r", p, &[at(e, "a: int = \"s\"")]), vec![0]);
        // A second one added above the old one: the added line is the news, not the old
        // one that moved down.
        assert_eq!(
            l.fold("r", p, &[at(e, "b: int = \"s\""), at(e, "a: int = \"s\"")]),
            vec![0]
        );
        // The old line rewritten and a third added: one is news, the last in order.
        assert_eq!(
            l.fold(
                "r",
                p,
                &[
                    at(e, "b: int = \"s\""),
                    at(e, "a: int = 's'"),
                    at(e, "c: int = \"s\"")
                ]
            ),
            vec![2]
        );
    }

    #[test]
    fn positions_in_a_message_are_not_part_of_it() {
        let at = |l: u32| {
            format!(
                "No member named 'start_bytes' in 'struct S'; did you mean 'start_byte'? (fix available)\n\n/src/x.c:{l}:16: note: 'start_byte' declared here"
            )
        };
        assert_eq!(without_positions(&at(3)), without_positions(&at(7)));
        assert!(without_positions(&at(3)).contains("/src/x.c:#:#: note"));
        assert_eq!(
            without_positions("redefinition of `f` (first defined on line 12, lines 3-4)"),
            "redefinition of `f` (first defined on line #, lines #-#)"
        );
        // Other numbers are the message's own.
        assert_eq!(
            without_positions("expected 2 arguments, found 3"),
            "expected 2 arguments, found 3"
        );
    }

    #[test]
    fn a_file_changed_since_its_entry_is_not_known() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys.py");
        std::fs::write(&path, "def typedkey(arg): ...\n").unwrap();
        let l = Ledger::default();
        assert!(!l.knows("r", &path));
        l.fold("r", &path, &[k("missing argument")]);
        assert!(l.knows("r", &path));
        // Put back as it was outside the daemon (`git checkout`): another file now.
        std::fs::write(&path, "def typedkey(*args, **kwargs): ...\n").unwrap();
        assert!(
            !l.knows("r", &path),
            "an entry of the file before the checkout"
        );
        l.fold("r", &path, &[]);
        assert!(l.knows("r", &path));
    }

    #[test]
    fn moved_is_old_fixed_and_back_is_new() {
        let l = Ledger::default();
        let p = Path::new("/a.py");
        assert_eq!(l.fold("r", p, &[k("undefined x")]), vec![0]);
        // Same diagnostic elsewhere in the file (position is not part of the key).
        assert_eq!(l.fold("r", p, &[k("undefined x")]), Vec::<usize>::new());
        // Another run, another file: news there.
        assert_eq!(l.fold("r2", p, &[k("undefined x")]), vec![0]);
        assert_eq!(
            l.fold("r", Path::new("/b.py"), &[k("undefined x")]),
            vec![0]
        );
        // A second one with the same message is news; two of them again are not.
        assert_eq!(
            l.fold("r", p, &[k("undefined x"), k("undefined x")]),
            vec![1]
        );
        assert_eq!(
            l.fold("r", p, &[k("undefined x"), k("undefined x")]),
            Vec::<usize>::new()
        );
        // Down to one: nothing new; back to three: two are news.
        assert_eq!(l.fold("r", p, &[k("undefined x")]), Vec::<usize>::new());
        assert_eq!(
            l.fold(
                "r",
                p,
                &[k("undefined x"), k("undefined x"), k("undefined x")]
            ),
            vec![1, 2]
        );
        assert_eq!(l.fold("r", p, &[k("undefined x")]), Vec::<usize>::new());
        // Fixed, then back.
        assert!(l.knows("r", p) && !l.knows("r3", p));
        assert_eq!(l.fold("r", p, &[]), Vec::<usize>::new());
        assert!(l.knows("r", p), "an empty list is known too");
        assert_eq!(
            l.fold("r", p, &[k("undefined x"), k("undefined y")]),
            vec![0, 1]
        );
    }

    fn warn(msg: &str, line: &str) -> Mark {
        ((2, "W1".into(), msg.into()), line.into())
    }

    #[test]
    fn a_warning_gone_while_an_error_was_there_is_not_news_when_it_comes_back() {
        let l = Ledger::default();
        let (a, b) = (Path::new("/p/a.go"), Path::new("/p/b.go"));
        let w = warn("unusedresult", "fmt.Sprintf(\"x\")");
        assert_eq!(l.fold("r", a, std::slice::from_ref(&w)), vec![0]);
        assert_eq!(l.fold("r", b, &[warn("printf", "log.Printf(x)")]), vec![0]);
        // The edit breaks a.go: its error is news, the analyzers' warnings go (gopls).
        assert_eq!(l.fold("r", a, &[at("undefined: y", "y()")]), vec![0]);
        assert!(l.fold("r", b, &[]).is_empty());
        // The fix: the warnings come back, the error goes: nothing is news.
        assert!(l.fold("r", a, std::slice::from_ref(&w)).is_empty());
        assert!(
            l.fold("r", b, &[warn("printf", "log.Printf(x)")])
                .is_empty()
        );
        // Gone with no error around, a warning back later is news again.
        assert!(l.fold("r", a, &[]).is_empty());
        assert_eq!(l.fold("r", a, std::slice::from_ref(&w)), vec![0]);
        // An error fixed and back is news, error or not around.
        assert_eq!(l.fold("r", a, &[w.clone(), at("e", "x")]), vec![1]);
        assert!(l.fold("r", a, std::slice::from_ref(&w)).is_empty());
        assert_eq!(l.fold("r", a, &[w, at("e", "x")]), vec![1]);
        // A file elsewhere does not count as beside.
        let c = Path::new("/q/c.go");
        let v = warn("shadow", "x := 1");
        assert_eq!(l.fold("r", c, std::slice::from_ref(&v)), vec![0]);
        assert!(l.fold("r", c, &[]).is_empty());
        assert_eq!(l.fold("r", c, &[v]), vec![0]);
    }

    #[tokio::test(start_paused = true)]
    async fn runs_that_come_and_go_are_forgotten_and_the_count_is_bounded() {
        let l = Ledger::new(Duration::from_secs(60), 100);
        let p = Path::new("/a.py");
        for i in 0..2000 {
            l.fold(&format!("run{i}"), p, &[k("undefined x")]);
            // Paused time: each run seen at its own instant.
            tokio::time::advance(Duration::from_millis(1)).await;
        }
        assert_eq!(l.runs(), 100, "bounded while every run is recent");
        // The most recent runs are the ones kept: run1999 has been told already.
        assert_eq!(
            l.fold("run1999", p, &[k("undefined x")]),
            Vec::<usize>::new()
        );
        // The oldest was evicted: told again.
        assert_eq!(l.fold("run0", p, &[k("undefined x")]), vec![0]);
        tokio::time::advance(Duration::from_secs(61)).await;
        assert_eq!(l.runs(), 0, "idle runs are forgotten");
        // A run still in use stays while others idle out.
        l.fold("busy", p, &[k("undefined x")]);
        tokio::time::advance(Duration::from_secs(40)).await;
        l.fold("busy", p, &[k("undefined x")]);
        l.fold("late", p, &[]);
        tokio::time::advance(Duration::from_secs(40)).await;
        assert_eq!(l.fold("busy", p, &[k("undefined x")]), Vec::<usize>::new());
    }
}
