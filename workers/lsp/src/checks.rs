//! The checks a server runs after a save and reports only by pushing diagnostics:
//! rust-analyzer's "flycheck" (`cargo check` on save, its `$/progress` titled "cargo check",
//! token `rust-analyzer/flycheck/N`). Its errors (E0425, type mismatches) are not in the
//! pulled list, so a document's diagnostics after a save wait until a check that began after
//! that save has ended ([`Checks::covered`]), and then take the pushed list too.

use std::collections::HashMap;

use serde_json::Value;

/// Saves sent and checks seen, of one server.
#[derive(Debug, Default)]
pub struct Checks {
    /// didSave notifications sent so far (never reset: documents remember theirs).
    saves: u64,
    /// Running checks: progress token → `saves` when it began.
    running: HashMap<String, u64>,
    /// The highest `saves` a finished check began after.
    done_through: u64,
    /// A source file changed on disk was handed to the server since the last save sent for
    /// that reason: rust-analyzer checks only after a save, so the last check's errors may be
    /// stale for every file until a save starts another.
    pub outside_pending: bool,
}

/// Whether a progress (its token and title) is a check after a save.
pub fn is_check(token: &str, title: &str) -> bool {
    token.contains("flycheck") || title == "cargo check" || title == "cargo clippy"
}

impl Checks {
    /// A didSave was sent; returns its number.
    pub fn saved(&mut self) -> u64 {
        self.saves += 1;
        self.saves
    }

    pub fn begin(&mut self, token: &str) {
        self.running.insert(token.to_string(), self.saves);
    }

    pub fn end(&mut self, token: &str) {
        if let Some(after) = self.running.remove(token) {
            self.done_through = self.done_through.max(after);
        }
    }

    /// A new incarnation: nothing of the old one's runs, and no save it was sent is pending.
    pub fn restart(&mut self) {
        self.running.clear();
        self.done_through = self.saves;
    }

    /// Whether save `n` has been checked: a check that began after it has ended, and none runs.
    pub fn covered(&self, n: u64) -> bool {
        self.running.is_empty() && self.done_through >= n
    }
}

/// Whether rust-analyzer settings `config` (its `initializationOptions`, or the answer to
/// `workspace/configuration`) leave check on save on: `checkOnSave: false` (or the older
/// `{"enable": false}`) turns it off; it is on by default.
pub fn check_on_save(config: Option<&Value>) -> bool {
    match config.and_then(|c| c.get("checkOnSave")) {
        Some(Value::Bool(b)) => *b,
        Some(v) => v.get("enable").and_then(Value::as_bool).unwrap_or(true),
        None => true,
    }
}

/// Two diagnostics that say the same about the same place (a pulled one and a pushed one).
pub fn same(a: &Value, b: &Value) -> bool {
    a.pointer("/range/start") == b.pointer("/range/start") && a.get("message") == b.get("message")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_save_is_covered_only_by_a_check_that_began_after_it() {
        let mut c = Checks::default();
        let first = c.saved();
        assert!(!c.covered(first));
        c.begin("rust-analyzer/flycheck/0");
        let second = c.saved();
        c.end("rust-analyzer/flycheck/0");
        assert!(
            c.covered(first) && !c.covered(second),
            "that check began before save 2"
        );
        c.begin("rust-analyzer/flycheck/0");
        assert!(!c.covered(first), "a check runs");
        c.end("rust-analyzer/flycheck/0");
        assert!(c.covered(second));
        c.saved();
        c.restart();
        assert!(c.covered(c.saves), "a new incarnation owes nothing");
        assert!(is_check("rust-analyzer/flycheck/0", "cargo check"));
        assert!(!is_check("rustAnalyzer/Indexing", "Indexing"));
    }

    #[test]
    fn check_on_save_is_on_unless_turned_off() {
        assert!(check_on_save(None));
        assert!(check_on_save(Some(&json!({"cargo": {}}))));
        assert!(!check_on_save(Some(&json!({"checkOnSave": false}))));
        assert!(!check_on_save(Some(
            &json!({"checkOnSave": {"enable": false}})
        )));
    }
}
