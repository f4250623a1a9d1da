//! The loopback Hugging Face-compatible hub of the download tests (crate `toolvisor-testhub`,
//! shared with the benches and the chaos runner).

pub use toolvisor_testhub::*;
