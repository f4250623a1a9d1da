//! Language servers for the `lsp`, `lsp_rename`, `lsp_edit` and `synced_write` tools, and the
//! diagnostics folded into file writes.
//!
//! One server per (language, root, mode), shared by every conversation on that root whose run
//! has the same trust in it ([`trust`]: an untrusted root gets the restricted mode), each an
//! actor ([`server::ServerActor`]) under the daemon's `language_servers` kind supervisor; the
//! [`servers::LanguageServers`] manager applies the start rule (root marker AND binary),
//! starts servers, waits for readiness, and answers the ops ([`ops`], [`edit`], [`checker`],
//! [`hierarchy`], [`type_hierarchy`], [`signature`], [`completion`], [`inlay`],
//! [`workspace_diags`], [`check`], [`lsp_edit`], [`symbol_edit`], [`actions`]).

#![forbid(unsafe_code)]

mod actions;
mod actor;
mod at;
mod check;
mod checker;
mod checks;
mod completion;
mod config;
mod coverage;
mod dependents;
mod diagnostics;
mod edit;
mod hierarchy;
mod indent;
mod inlay;
mod ledger;
mod locate;
mod lsp_edit;
mod ops;
mod outside;
mod position;
mod render;
mod server;
mod servers;
mod signature;
mod symbol_edit;
mod symbols;
mod trust;
mod type_hierarchy;
mod uri;
mod watch;
mod watched;
mod workspace_diags;
mod write_diags;

pub use config::LspConfig;
pub use ops::CallCtx;
pub use servers::LanguageServers;
