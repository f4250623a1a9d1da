//! The last `code_actions` answer of each run, as listed: what `lsp_edit apply_code_action`
//! applies an action of by its index. [`crate::edit::Edits`] holds it.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Mutex;

use serde_json::Value;

/// Runs whose last `code_actions` answer is remembered; the oldest is forgotten first.
pub const REMEMBERED_RUNS: usize = 256;

/// One `code_actions` answer as listed: the actions in the order of their indexes.
#[derive(Clone, Debug)]
pub struct Listed {
    /// The server that offered them (`ServerShared::id`).
    pub server: String,
    pub path: PathBuf,
    /// The document version the actions were computed for.
    pub version: i32,
    /// The server's actions (`CodeAction` or `Command`), raw, in index order.
    pub actions: Vec<Value>,
}

/// The last `code_actions` answer of each run (bounded by [`REMEMBERED_RUNS`]).
#[derive(Debug, Default)]
pub struct Memory {
    runs: Mutex<VecDeque<(String, Listed)>>,
}

impl Memory {
    pub fn remember(&self, run: &str, listed: Listed) {
        let mut runs = crate::lock(&self.runs);
        runs.retain(|(r, _)| r != run);
        runs.push_back((run.to_string(), listed));
        while runs.len() > REMEMBERED_RUNS {
            runs.pop_front();
        }
    }

    pub fn get(&self, run: &str) -> Option<Listed> {
        crate::lock(&self.runs)
            .iter()
            .find(|(r, _)| r == run)
            .map(|(_, l)| l.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_keeps_the_last_answer_per_run_and_is_bounded() {
        let m = Memory::default();
        let listed = |n: usize| Listed {
            server: "s".into(),
            path: PathBuf::from("/a"),
            version: n as i32,
            actions: vec![],
        };
        m.remember("r", listed(1));
        m.remember("r", listed(2));
        assert_eq!(m.get("r").unwrap().version, 2);
        for i in 0..REMEMBERED_RUNS {
            m.remember(&format!("other{i}"), listed(0));
        }
        assert!(m.get("r").is_none(), "the oldest run is forgotten");
        assert!(m.get("other1").is_some());
    }
}
