//! `lsp workspace_diagnostics`: the whole project's diagnostics, from the server's
//! `workspace/diagnostic` pull where it offers one (`diagnosticProvider.workspaceDiagnostics`,
//! in `initialize` or a registration), else from the project checker (`diagnostics "*"`);
//! the answer says which (`source`).

use std::path::Path;
use std::time::Instant;

use serde_json::{Value, json};
use toolvisor_files::paths::Access;
use toolvisor_protocol::error::ToolError;
use toolvisor_protocol::results::{
    LspDiagnostic, LspDiagnosticsSource, LspResult, LspServed, LspWorkspacePull,
};
use toolvisor_protocol::tools::LspArgs;

use crate::answers::Diag;
use crate::call::{CallCtx, Opened};
use crate::checker::SHOWN_MAX;
use crate::servers::Servers;
use crate::uri;

impl Servers {
    /// `lsp workspace_diagnostics {file?}`: `file` picks the server (its language and root);
    /// without it, or when that server has no workspace pull, the project checker answers.
    pub async fn workspace_diagnostics(
        &self,
        ctx: &CallCtx,
        args: &LspArgs,
    ) -> Result<LspResult, ToolError> {
        let why = match args.file.as_deref().filter(|f| *f != "*") {
            None => "no `file` was given to pick a server (give one to ask its server)".to_string(),
            Some(f) => {
                let path = ctx.resolve("lsp", f, Access::Read)?;
                let mut opened = self.open(&path, &ctx.run).await?;
                if opened.shared.diags.pulls_workspace(&opened.conn) {
                    let pulled = self.pull_workspace(ctx, &mut opened).await?;
                    return Ok(LspResult::WorkspacePull(pulled));
                }
                format!(
                    "{} ({}) offers no workspace pull: it does not advertise `diagnosticProvider.workspaceDiagnostics`",
                    opened.conn.name, opened.shared.id
                )
            }
        };
        let mut answer = self.project_check(ctx).await?;
        answer.text.push_str(&format!(
            "(source: the project checker `{}`; {why})\n",
            answer.checker
        ));
        answer.source = Some(LspDiagnosticsSource::Checker);
        answer.source_reason = Some(why);
        Ok(LspResult::ProjectCheck(answer))
    }

    /// The server's `workspace/diagnostic` answer, every document's full report (an
    /// `unchanged` one cannot be, since no previous result ids are sent), bounded.
    async fn pull_workspace(
        &self,
        ctx: &CallCtx,
        opened: &mut Opened,
    ) -> Result<LspWorkspacePull, ToolError> {
        // The whole project's answer: only from a server that has loaded it.
        self.ready_for(&opened.shared, &opened.uri).await?;
        let asked = Instant::now();
        let result = self
            .request(
                opened,
                "workspace/diagnostic",
                json!({"previousResultIds": []}),
            )
            .await?;
        let request_ms = asked.elapsed().as_secs_f64() * 1000.0;
        let enc = opened.conn.encoding;
        let mut diags = Vec::new();
        for report in result
            .get("items")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let Some(path) = report
                .get("uri")
                .and_then(Value::as_str)
                .and_then(uri::to_path)
            else {
                continue;
            };
            // Columns are converted on the file's text where toolvisor may read it.
            let text = opened
                .shared
                .doc(&uri::from_path(&path))
                .map(|d| d.text)
                .or_else(|| {
                    ctx.check(&path, Access::Read)
                        .ok()
                        .and_then(|real| ctx.read_text(&real).ok())
                })
                .unwrap_or_default();
            for d in report
                .get("items")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                diags.push(Diag::from_lsp(&path, d, &text, enc));
            }
        }
        diags.sort_by(|a, b| (&a.path, a.line, a.column).cmp(&(&b.path, b.line, b.column)));
        let total = diags.len();
        let base: &Path = &ctx.workdir;
        let items: Vec<LspDiagnostic> = diags
            .iter()
            .take(SHOWN_MAX)
            .map(|d| d.to_result(base))
            .collect();
        let mut text: String = items.iter().map(|d| d.line() + "\n").collect();
        if total == 0 {
            text = format!("no diagnostics in the workspace of {}\n", opened.shared.id);
        } else if total > SHOWN_MAX {
            text.push_str(&format!("(showing {SHOWN_MAX} of {total})\n"));
        }
        text.push_str(&format!(
            "(source: the server's workspace pull, {})\n",
            opened.conn.name
        ));
        let mut server = self.server_of(opened);
        server.request_ms = Some(request_ms);
        // Cut at the bound: said, so the answer is not complete.
        let served = LspServed::of(server, false, total > SHOWN_MAX);
        Ok(LspWorkspacePull {
            text,
            source: LspDiagnosticsSource::Server,
            total: total as u64,
            diagnostics: items,
            truncated: total > SHOWN_MAX,
            served,
        })
    }
}
