//! Wire types and the frame codec shared by the daemon, its CLI, the tests and any harness.
//!
//! Everything that crosses the Unix socket is defined here and nowhere else: frames
//! ([`wire`]), the tool-facing value type ([`value::Value`]), errors as data
//! ([`error::ToolError`]), the supervisor tree snapshot ([`tree`]) and the typed
//! arguments of each tool ([`tools`]), their typed results ([`results`]) and the text a
//! model reads of them ([`render`]). The codec ([`codec`]) is one `encode`/`decode`
//! pair over bincode 2 or JSON. A small blocking client ([`client`]) speaks it over a
//! `std` Unix socket, for the CLI, the tests and the chaos runner.

#![forbid(unsafe_code)]

pub mod answer;
pub mod client;
pub mod codec;
pub mod error;
pub mod render;
pub mod results;
pub mod tools;
pub mod tree;
pub mod value;
pub mod wire;

pub use codec::{Codec, CodecError};
pub use error::{ErrorKind, ToolError};
pub use value::Value;

/// The protocol version spoken by this build. A `Hello` with another version is refused
/// with a message naming both.
pub const PROTOCOL_VERSION: u32 = 1;

/// Default cap on one frame's payload, in bytes (16 MiB). Configurable on the daemon.
pub const DEFAULT_MAX_FRAME: u32 = 16 * 1024 * 1024;
