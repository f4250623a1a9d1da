//! A position op's common first half, for the ops that ask about one place in a file
//! (the navigation ops, `type_hierarchy`, `signature_help`, `completions`): the file resolved
//! through the call's
//! scope, synced, the symbol located on its line (`position::locate`), and a file-local request
//! that is asked again after readiness when a server not yet settled answered nothing.

use std::time::Instant;

use serde_json::{Value, json};
use toolvisor_files::paths::Access;
use toolvisor_protocol::error::{ErrorKind, ToolError};
use toolvisor_protocol::tools::{LspArgs, LspOp};

use crate::answers;
use crate::call::{CallCtx, Opened};
use crate::ops::is_empty;
use crate::position;
use crate::servers::Servers;

/// A file opened for a position op, with the symbol located on its line.
pub struct At {
    pub opened: Opened,
    /// The file as answers show it (relative to the workdir).
    pub shown: String,
    /// The 1-based line.
    pub line: usize,
    /// The line's text and the byte offset of the chosen occurrence of `symbol` in it.
    pub src: String,
    pub byte: usize,
    pub symbol: String,
}

impl At {
    /// The server position of byte `byte` of the line, in the negotiated encoding.
    pub fn position(&self, byte: usize) -> Value {
        json!({"line": self.line - 1, "character": self.opened.conn.encoding.column(&self.src, byte)})
    }

    /// "`symbol` at path:line", for answers and errors.
    pub fn here(&self) -> String {
        format!("`{}` at {}:{}", self.symbol, self.shown, self.line)
    }
}

/// `invalid_args` for a missing argument of `op`; `what` says what the op needs.
pub fn missing(op: &str, field: &str, what: &str) -> ToolError {
    let tail = if field == "symbol" {
        "; a position is never guessed"
    } else {
        ""
    };
    ToolError::new(
        ErrorKind::InvalidArgs,
        format!("lsp {op}: missing required argument `{field}`{tail}"),
        what,
    )
}

impl Servers {
    /// `file`, `line` and `symbol` of `args`, resolved for reading through the call's scope,
    /// synced to the server and located; `need` says what the op needs, for the errors.
    pub(crate) async fn open_at(
        &self,
        ctx: &CallCtx,
        args: &LspArgs,
        need: &str,
    ) -> Result<At, ToolError> {
        let op = &args.op.to_string();
        let file = args
            .file
            .as_deref()
            .ok_or_else(|| missing(op, "file", need))?;
        let line = args.line.ok_or_else(|| missing(op, "line", need))? as usize;
        let symbol = args
            .symbol
            .as_deref()
            .filter(|s| !s.is_empty())
            .ok_or_else(|| missing(op, "symbol", need))?;
        let path = ctx.resolve("lsp", file, Access::Read)?;
        let opened = self.open(&path, &ctx.run).await?;
        let shown = answers::show_path(&path, &ctx.workdir);
        // Completions complete a prefix; every other op is about the name itself.
        let locate = match args.op {
            LspOp::Completions => position::locate,
            _ => position::locate_name,
        };
        let (src, byte) = locate(
            &opened.text,
            &shown,
            line,
            symbol,
            args.occurrence.map(|o| o as usize),
        )?;
        Ok(At {
            opened,
            shown,
            line,
            src,
            byte,
            symbol: symbol.to_string(),
        })
    }

    /// A file-local request: asked at once; an empty answer (`empty`) from a server that is
    /// not ready and settled waits for readiness and is asked again, so "nothing" only ever
    /// comes from a settled server. Returns the answer and the last request's milliseconds.
    pub(crate) async fn ask_settled(
        &self,
        opened: &mut Opened,
        method: &str,
        params: Value,
        empty: fn(&Value) -> bool,
    ) -> Result<(Value, f64), ToolError> {
        let mut asked = Instant::now();
        let mut result = self.request(opened, method, params.clone()).await?;
        if (is_empty(&result) || empty(&result)) && !opened.shared.settled() {
            self.ready(&opened.shared).await?;
            asked = Instant::now();
            result = self.request(opened, method, params).await?;
        }
        Ok((result, asked.elapsed().as_secs_f64() * 1000.0))
    }
}
