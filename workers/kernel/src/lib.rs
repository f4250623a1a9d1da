//! `eval`'s persistent Python and JavaScript kernels: one actor per (conversation, language)
//! under the `kernels` supervisor, each owning one interpreter child that runs an embedded
//! driver script and speaks length-prefixed JSON frames over its own stdin and stdout.
//!
//! - [`Kernels`] is the tool's state: it finds or starts a conversation's kernel, runs a
//!   cell (inactivity budget, interrupt, kill and restart), and turns deaths into plain
//!   answers.
//! - `kernel.rs` is the actor and one incarnation's pipes; `pipe.rs` the frames;
//!   `magic.rs` the IPython idioms; `output.rs` the bounded outputs; `interpreter.rs` finds
//!   the interpreters and builds their command lines; `drivers/` are the scripts.

#![forbid(unsafe_code)]

mod interpreter;
mod kernel;
mod kernels;
pub mod magic;
pub mod output;
mod pipe;

use std::time::Duration;

use toolvisor_protocol::error::{ErrorKind, ToolError};

pub use kernels::{Bridge, BridgeFuture, CellRequest, KernelLimits, Kernels};
pub use output::OutputLimits;

/// The Python driver, embedded in the daemon.
pub const PYTHON_DRIVER: &str = include_str!("../drivers/python_driver.py");
/// The JavaScript (Node) driver, embedded in the daemon.
pub const NODE_DRIVER: &str = include_str!("../drivers/node_driver.js");

/// A kernel's language.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Language {
    Python,
    Javascript,
}

impl Language {
    pub fn as_str(self) -> &'static str {
        match self {
            Language::Python => "python",
            Language::Javascript => "javascript",
        }
    }

    pub fn parse(s: &str) -> Option<Language> {
        match s {
            "python" => Some(Language::Python),
            "javascript" => Some(Language::Javascript),
            _ => None,
        }
    }
}

impl std::fmt::Display for Language {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a cell got no normal answer.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    /// The cell uses an IPython idiom that is not rewritten.
    #[error(transparent)]
    Magic(#[from] magic::MagicError),
    /// No interpreter to run the kernel with.
    #[error("no {language} interpreter: {message}")]
    NoInterpreter { language: Language, message: String },
    /// The interpreter started but the driver did not come up.
    #[error("the {language} kernel could not start: {message}")]
    Start { language: Language, message: String },
    /// The driver broke the kernel pipe (garbage, an oversized frame).
    #[error("the kernel pipe broke: {0}")]
    Protocol(String),
    /// The kernel died while running the cell (or before it).
    #[error(
        "the {language} kernel died: {cause}; its state (variables, imports, loaded data) is lost"
    )]
    Died {
        language: Language,
        cause: String,
        /// The end of what the cell printed before the kernel died.
        output: String,
    },
    /// The cell was silent for its whole inactivity budget.
    #[error("{}", timeout_message(*language, *budget, *recovered, output))]
    Timeout {
        language: Language,
        budget: Duration,
        /// The interrupt worked and the kernel (with its state) lives on.
        recovered: bool,
        output: String,
    },
    /// The kernels supervisor did not do what was asked.
    #[error("the kernels supervisor: {0}")]
    Supervisor(String),
}

fn timeout_message(language: Language, budget: Duration, recovered: bool, output: &str) -> String {
    let what = if recovered {
        format!(
            "the cell produced no output for {} s (its inactivity budget) and was interrupted; the {language} kernel and its state are kept",
            budget.as_secs()
        )
    } else {
        format!(
            "the cell produced no output for {} s (its inactivity budget) and did not stop when interrupted, so the {language} kernel was killed and a fresh one started: its state (variables, imports, loaded data) is lost",
            budget.as_secs()
        )
    };
    if output.trim().is_empty() {
        what
    } else {
        format!("{what}. Output before that ended with:\n{output}")
    }
}

impl KernelError {
    /// The error as a tool answers it.
    pub fn to_tool_error(&self) -> ToolError {
        let message = self.to_string();
        match self {
            KernelError::Magic(_) => ToolError::new(
                ErrorKind::InvalidArgs,
                format!("eval: {message}"),
                "write plain Python, or use one of the supported idioms",
            ),
            KernelError::NoInterpreter { language, .. } => ToolError::new(
                ErrorKind::NotAvailable,
                format!("eval: {message}"),
                match language {
                    Language::Python => {
                        "install python3, create the run's .venv, or set `[kernels] python` in the daemon's config"
                    }
                    Language::Javascript => {
                        "install node, or set `[kernels] node` in the daemon's config"
                    }
                },
            ),
            KernelError::Start { .. } | KernelError::Protocol(_) => ToolError::new(
                ErrorKind::ResourceFailed,
                format!("eval: {message}"),
                "call eval again to start a fresh kernel; `toolvisor tree` shows the kernel's last error",
            ),
            KernelError::Died { output, .. } => ToolError::new(
                ErrorKind::KernelDied,
                if output.trim().is_empty() {
                    format!("eval: {message}")
                } else {
                    format!("eval: {message}. The cell's output before that ended with:\n{output}")
                },
                "call eval again: a fresh kernel starts; re-run the cells that built the state you need (and use less memory if it hit the cap)",
            ),
            KernelError::Timeout { recovered, .. } => ToolError::new(
                ErrorKind::Timeout,
                format!("eval: {message}"),
                if *recovered {
                    "print progress from long cells (output resets the budget), pass a larger `timeout_s`, or run the work as a `process`"
                } else {
                    "re-run the cells that built your state; code that ignores interrupts (a C call, a busy loop after `await`) cannot be stopped gently"
                },
            ),
            KernelError::Supervisor(_) => ToolError::new(
                ErrorKind::ResourceFailed,
                format!("eval: {message}"),
                "the daemon is overloaded or stuck; `toolvisor tree` shows its state",
            ),
        }
    }
}

/// The crate's result.
pub type Result<T, E = KernelError> = std::result::Result<T, E>;
