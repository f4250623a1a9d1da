//! Typed arguments and results of the tools, as the daemon parses and builds them. Clients
//! may send the same fields as plain JSON objects. Each argument struct derives its JSON
//! schema (`schemars`): the field docs are the descriptions clients see, and the registry
//! advertises exactly what the handler parses (`#[serde(deny_unknown_fields)]` where the
//! schema refuses unknown keys).
//!
//! One file per family of tools (`tools/<family>.rs`), all re-exported here.
//!
//! Bounds are attributes: `#[schemars(range(...))]` for ranges, and the non-standard
//! `minWords`/`maxWords` by `#[schemars(extend(...))]`; `deny_unknown_fields` gives
//! `additionalProperties: false`.

mod data;
mod debug;
mod eval;
mod files;
mod human;
mod jobs;
mod lsp;
mod models;
mod structural;

pub use data::*;
pub use debug::*;
pub use eval::*;
pub use files::*;
pub use human::*;
pub use jobs::*;
pub use lsp::*;
pub use models::*;
pub use structural::*;
