//! The text a model reads of a tool's result (`toolvisor mcp` sends it as the result's text
//! content; the whole JSON goes to programs as `structuredContent` with `--structured`),
//! written the way a person would read it: the generic rules over a result's JSON
//! ([`generic`]).

mod generic;

pub use generic::json as generic;
