//! The renderings of `lsp`'s results (`results/lsp.rs`), and what the lsp tools' renderings
//! share (the write tools' own are in `lsp_edits.rs`). Every lsp result has its own `text`
//! (the server's answer as `path:line: text` lines, an edit and its new diagnostics) and
//! reads as it: the lists that text renders (locations, diagnostics, symbols…) are not
//! written again. Which server answered is no model's business ([`server`]).

use super::Doc;
use crate::results::{LspServer, LspServerState};

/// The server of an answer that says no `readiness` (an edit's): only one still starting
/// shows, as `server: NAME starting`.
pub(super) fn server(doc: &mut Doc, server: &LspServer) {
    if server.state == LspServerState::Starting {
        doc.fact("server", format!("{} starting", server.name));
    }
}

/// A string field when there is one (a fact, or a block when long: a `partial_reason`).
pub(super) fn opt_string(doc: &mut Doc, key: &str, value: &Option<String>) {
    if let Some(value) = value {
        doc.string(key, value);
    }
}
