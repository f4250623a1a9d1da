//! Shared machinery of every worker: guarded child processes, the shim, the spawn ledger,
//! restart policy, shared node status, and the generic per-kind supervisor actor.

pub mod ids;
pub mod launch;
pub mod memory;
pub mod output;
pub mod private;
pub mod process;
pub mod restart;
pub mod status;
pub mod supervise;
pub mod systemd;
pub mod ttl;
