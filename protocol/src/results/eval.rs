//! The results of the eval tools: `eval`.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

/// The result of `eval`: what the cell printed and displayed, in order and bounded, its
/// error if it raised, and the kernel it ran on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EvalResult {
    /// Everything the cell produced as plain text, in order (past the limit: its first and last halves).
    pub text: String,
    /// The rich outputs in order, each with `at`, its character offset in `text`.
    pub outputs: Vec<EvalOutput>,
    /// The figures (base64), referenced from `outputs` by index.
    pub images: Vec<EvalImage>,
    /// What the cell raised; null when it did not.
    pub error: Option<EvalError>,
    /// Whether any output was cut or dropped by the limits.
    pub truncated: bool,
    /// What to know: the output was bounded, the kernel was reset or restarted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// `ok`, or `error` when the cell raised.
    pub status: EvalStatus,
    /// The kernel's language (TypeScript runs on the javascript kernel).
    pub language: EvalKernelLanguage,
    /// The cell's number in this kernel's run.
    pub cell: u64,
    /// Wall-clock time of the call, in milliseconds.
    pub wall_ms: u64,
    /// The kernel the cell ran on.
    pub kernel: EvalKernel,
}

/// One rich output of a cell, by `type`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EvalOutput {
    /// A figure: its entry in `images`.
    Image {
        /// Index into `images`.
        image: u64,
        /// Character offset in `text` where it appeared.
        at: u64,
    },
    /// The echo of the cell's last expression: a MIME bundle.
    Result {
        /// MIME type → rendering (`text/plain`, `text/html`, …).
        data: BTreeMap<String, Json>,
        /// Character offset in `text` where it appeared.
        at: u64,
    },
    /// A `display()`: a MIME bundle.
    Display {
        /// MIME type → rendering (`text/plain`, `text/html`, …).
        data: BTreeMap<String, Json>,
        /// Character offset in `text` where it appeared.
        at: u64,
    },
    /// The cell raised (the traceback is in `text` and `error`).
    Error {
        /// The exception's class.
        ename: String,
        /// The exception's message.
        evalue: String,
        /// Character offset in `text` where it appeared.
        at: u64,
    },
}

/// A figure a cell displayed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EvalImage {
    /// Its format.
    pub mime: EvalImageMime,
    /// The image, base64.
    pub data: String,
    /// Its decoded size in bytes (about).
    pub bytes: u64,
    /// Width in pixels (PNG only; null otherwise).
    pub width: Option<u32>,
    /// Height in pixels (PNG only; null otherwise).
    pub height: Option<u32>,
    /// The chart's data where the figure came with it, or `{error}` when it was too large.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chart: Option<Json>,
}

impl EvalOutput {
    /// Where it appeared: its character offset in `text`.
    pub fn at_mut(&mut self) -> &mut u64 {
        match self {
            EvalOutput::Image { at, .. }
            | EvalOutput::Result { at, .. }
            | EvalOutput::Display { at, .. }
            | EvalOutput::Error { at, .. } => at,
        }
    }
}

/// An image's format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum EvalImageMime {
    #[serde(rename = "image/png")]
    Png,
    #[serde(rename = "image/jpeg")]
    Jpeg,
}

/// What a cell raised.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EvalError {
    /// The exception's class.
    pub ename: String,
    /// The exception's message.
    pub evalue: String,
    /// The traceback as text.
    pub traceback: String,
}

/// How a cell ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EvalStatus {
    Ok,
    Error,
}

/// A kernel's language.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EvalKernelLanguage {
    Python,
    Javascript,
}

/// The kernel a cell ran on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EvalKernel {
    /// The interpreter's process id.
    pub pid: u32,
    /// The interpreter's version.
    pub version: String,
    /// The interpreter's executable.
    pub executable: String,
    /// Cells this kernel has run, this one included.
    pub cells: u64,
    /// Whether this kernel started for this cell (state from earlier cells is gone).
    pub fresh: bool,
}
