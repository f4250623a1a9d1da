//! The toolvisor daemon as a library: configuration, the socket listener and accept loop
//! (`server`), the shared state (`daemon`), sessions, the tool registry, lanes, the root actor
//! and the tool handlers (`tools`). `main.rs` is the CLI over it.

#![forbid(unsafe_code)]

pub mod admission;
pub mod audit;
pub mod autostart;
pub mod config;
pub mod conversations;
pub mod daemon;
pub mod doctor;
pub mod downloadview;
pub mod lanes;
pub mod listener;
pub mod logjson;
pub mod logtext;
pub mod mcpconfig;
pub mod metrics;
pub mod operator;
pub mod outbox;
pub mod questions;
pub mod registry;
pub mod root;
pub mod server;
pub mod session;
pub mod tools;
pub mod treeview;
