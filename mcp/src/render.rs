//! The text a model reads of a tool's result: `toolvisor_protocol::render`, beside the result
//! types it renders.

pub use toolvisor_protocol::render::generic as render;
