//! Shared machinery of every worker: guarded child processes, the shim, the spawn ledger,
//! restart policy, shared node status, and the generic per-kind supervisor actor.
//!
//! The one crate of the daemon without `#![forbid(unsafe_code)]`: it keeps the few `unsafe` blocks
//! the daemon needs (fork and exec, reserving file descriptors, `malloc_trim` and `mallopt`,
//! adopting the socket-activated descriptor 3 in `systemd::listen_fds`, the pty relay's `setsid`
//! and ioctls, the `sock_diag` netlink dump), each with a `SAFETY` note, behind safe functions.

pub mod ids;
pub mod launch;
pub mod memory;
pub mod output;
pub mod peer;
pub mod private;
pub mod process;
pub mod restart;
pub mod special;
pub mod status;
pub mod supervise;
pub mod systemd;
pub mod ttl;
