//! Language servers for the `lsp`, `lsp_rename`, `lsp_edit` and `synced_write` tools, and the
//! diagnostics folded into file writes.
//!
//! One server per (language, root, mode), shared by every conversation on that root whose run
//! has the same trust in it ([`trust`]: an untrusted root gets the restricted mode), each an
//! actor ([`server::ServerActor`]) under the daemon's `language_servers` kind supervisor;
//! [`servers::Servers`] applies the start rule (root marker AND binary), starts servers, waits
//! for readiness, and the [`manager::LanguageServers`] manager answers the ops by concern
//! ([`ops`], [`edit`], [`checker`],
//! [`hierarchy`], [`type_hierarchy`], [`signature`], [`completion`], [`inlay`],
//! [`workspace_diags`], [`check`], [`lsp_edit`], [`symbol_edit`], [`actions`]). Every server
//! runs under a memory limit, killed and restarted past it ([`memory`]).
//!
//! The modules are private; the crate exports what the daemon uses: `LanguageServers`, `CallCtx`,
//! `LspConfig`.
//!
//! The `lsp-types` crate is not used (it was a dependency with no use, removed with `fluent-uri`,
//! `serde_repr` and an old `bitflags`). What toolvisor sends is a dozen small shapes (`initialize`
//! with its capabilities, the `didOpen`/`didChange`/`didSave`/`didClose` notifications, position,
//! rename and diagnostic requests), each one `json!` line in `actor.rs`, `server.rs` or `ops.rs`;
//! in `lsp-types` each is a nested struct with `..Default::default()` and its own fallible `Uri`
//! type, and the non-standard fields servers need (clangd's `offsetEncoding`, rust-analyzer's
//! `serverStatusNotification`, pyright's scan log) are not in it. What toolvisor parses it parses
//! leniently, item by item (`answers.rs`: a location without a range still shows its file, a
//! malformed symbol is skipped, hover contents of any of the three shapes): `lsp-types`' untagged
//! enums (`GotoDefinitionResponse`, `DocumentSymbolResponse`, `HoverContents`) reject a whole
//! answer for one bad item, so typed parsing would need a fallback per shape to keep today's
//! answers to the fake servers' garbage: more code, not less.

#![forbid(unsafe_code)]

mod actions;
mod actor;
mod answers;
mod at;
mod call;
mod change;
mod check;
mod checker;
mod checks;
mod completion;
mod config;
mod coverage;
mod dependents;
mod diagnostics;
mod edit;
mod hidden_uses;
mod hierarchy;
mod indent;
mod inlay;
mod ledger;
mod locate;
mod lsp_edit;
mod manager;
mod memory;
mod navigate;
mod ops;
mod outside;
mod position;
mod rename_preview;
mod roots;
mod server;
mod servers;
mod signature;
mod symbol_edit;
mod symbols;
mod trust;
mod type_hierarchy;
mod unlisted_calls;
mod uri;
mod watch;
mod watched;
mod workspace_diags;
mod write_diags;

pub use call::CallCtx;
pub use config::LspConfig;
pub use manager::LanguageServers;

/// A mutex's guard, also when a panic poisoned it (the state is plain data, valid at every
/// step).
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
