//! Which rendering a tool's result gets: each tool's own, from its result type
//! (`toolvisor_protocol::render`, carried by the daemon's `ToolSpec` of the tool and handed
//! over by the binary as [`Renderer`]); for a tool it does not hold (a daemon of another
//! build, a test's probe tool), the generic rules. No tool is named here.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value as Json;
use toolvisor_protocol::render::{Outward, RenderFn, render_json};

/// Each tool's rendering of its results, by tool name.
#[derive(Clone, Default)]
pub struct Renderer(Arc<HashMap<String, RenderFn>>);

impl Renderer {
    /// The renderings of `tools` (name and rendering: `ToolSpec::render`).
    pub fn new(tools: impl IntoIterator<Item = (String, RenderFn)>) -> Renderer {
        Renderer(Arc::new(tools.into_iter().collect()))
    }

    /// The model's text of `tool`'s result `value` (its images' `data` as their fates' notes,
    /// `Outward::note`), its images where `outward` says.
    pub fn render(&self, tool: &str, value: &Json, outward: &Outward) -> String {
        match self.0.get(tool) {
            Some(render) => render(tool, value, outward),
            None => render_json(tool, value, outward),
        }
    }
}

impl std::fmt::Debug for Renderer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "<renderings of {} tools>", self.0.len())
    }
}

/// The same renderings.
impl PartialEq for Renderer {
    fn eq(&self, other: &Renderer) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Renderer {}
