//! `[mcp]`: what `toolvisor mcp --config PATH` reads from the daemon's config file. The
//! daemon itself never uses it (it checks the value at start so a typo is found early).

use serde::Deserialize;

/// `[mcp]`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct McpConfig {
    /// Who approves calls that need approval: `elicit` (a person, through MCP elicitation;
    /// the default), `harness` (the MCP client's own permission system) or `deny`. The
    /// command line's `--approvals` wins.
    pub approvals: Option<String>,
}
