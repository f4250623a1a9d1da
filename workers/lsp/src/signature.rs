//! `lsp signature_help`: the signatures of a call, addressed by line + the callee's symbol
//! (the position is just inside the call's `(` after it), with the active signature and
//! parameter and their documentation as text (`textDocument/signatureHelp`).

use serde_json::{Value, json};
use toolvisor_protocol::error::{ErrorKind, ToolError};
use toolvisor_protocol::results::{LspServed, LspSignature, LspSignatureHelp};
use toolvisor_protocol::tools::LspArgs;

use crate::answers;
use crate::call::CallCtx;
use crate::ops::require;
use crate::position::Encoding;
use crate::servers::Servers;

/// Signatures listed (overloads); the total is always counted.
pub const SIGNATURES_MAX: usize = 20;

const NEED: &str = "signature_help needs `file`, `line` (1-based) and `symbol`: the called function's name on that line, followed there by the call's `(`";

/// Documentation of any of its shapes (a string, `MarkupContent`) as trimmed text.
fn doc_text(v: Option<&Value>) -> String {
    match v {
        Some(d) if !d.is_null() => answers::hover_markdown(&json!({"contents": d})),
        _ => String::new(),
    }
}

/// A parameter's label: a string, or offsets (UTF-16, by the protocol) into the signature's.
fn param_label(sig_label: &str, p: &Value) -> String {
    match p.get("label") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(a)) if a.len() == 2 => {
            let at = |i: usize| {
                let n = a[i].as_u64().unwrap_or(0) as u32;
                Encoding::Utf16.byte(sig_label, n)
            };
            let (s, e) = (at(0), at(1));
            sig_label.get(s..e.max(s)).unwrap_or("").to_string()
        }
        _ => String::new(),
    }
}

fn no_signatures(v: &Value) -> bool {
    v.get("signatures")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
}

impl Servers {
    /// `lsp signature_help {file, line, symbol, occurrence?}`.
    pub async fn signature_help(
        &self,
        ctx: &CallCtx,
        args: &LspArgs,
    ) -> Result<LspSignatureHelp, ToolError> {
        let mut at = self.open_at(ctx, args, NEED).await?;
        let after = at.byte + at.symbol.len();
        let Some(paren) = at.src[after..].find('(').map(|i| after + i) else {
            return Err(ToolError::new(
                ErrorKind::InvalidArgs,
                format!(
                    "no `(` after {} on the line: {}",
                    at.here(),
                    at.src.trim_end()
                ),
                "give the called function's name on the line where its call's `(` is",
            ));
        };
        require(&at.opened, "signatureHelpProvider", "signature help")?;
        // What a call offers depends on the project (an imported function): a server still
        // loading it would answer from part of it.
        self.ready_for(&at.opened.shared, &at.opened.uri).await?;
        let params = json!({"textDocument": {"uri": at.opened.uri},
            "position": at.position(paren + 1),
            "context": {"triggerKind": 1, "isRetrigger": false}});
        let (result, request_ms) = self
            .ask_settled(
                &mut at.opened,
                "textDocument/signatureHelp",
                params,
                no_signatures,
            )
            .await?;
        let sigs = result
            .get("signatures")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let active_sig = result
            .get("activeSignature")
            .and_then(Value::as_u64)
            .unwrap_or(0) as usize;
        let top_param = result.get("activeParameter").and_then(Value::as_u64);
        let mut text = String::new();
        let mut items = Vec::new();
        let name = crate::completion::typed_prefix(&at.symbol);
        for (i, s) in sigs.iter().enumerate().take(SIGNATURES_MAX) {
            let active = i == active_sig.min(sigs.len().saturating_sub(1));
            let (lines, item) = signature(s, active, top_param, name, sigs.len() > 1);
            text.push_str(&lines);
            items.push(item);
        }
        if sigs.is_empty() {
            text = format!("no signature help for a call of {}\n", at.here());
        } else if sigs.len() > SIGNATURES_MAX {
            text.push_str(&format!(
                "(showing {SIGNATURES_MAX} of {} signatures; the list was cut)\n",
                sigs.len()
            ));
        }
        let mut server = self.server_of(&at.opened);
        server.request_ms = Some(request_ms);
        // A list cut at its bound is not the server's whole answer.
        let served = LspServed::of(server, false, sigs.len() > SIGNATURES_MAX);
        Ok(LspSignatureHelp {
            text,
            signatures: items,
            total: sigs.len() as u64,
            active_signature: (!sigs.is_empty()).then(|| active_sig.min(sigs.len() - 1) as u64),
            served,
        })
    }
}

/// One signature of the answer: its lines of the text (the active one marked when there are
/// `several`, its active parameter and documentation) and its item. `name` is put before a
/// label that leaves it out (pyright's `(name: str) -> str`).
fn signature(
    s: &Value,
    active: bool,
    top_param: Option<u64>,
    name: &str,
    several: bool,
) -> (String, LspSignature) {
    let mut text = String::new();
    let label = s.get("label").and_then(Value::as_str).unwrap_or("");
    let params: Vec<String> = s
        .get("parameters")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|p| param_label(label, p))
        .collect();
    // A signature's own activeParameter overrides the answer's.
    let param = s
        .get("activeParameter")
        .and_then(Value::as_u64)
        .or(top_param)
        .map(|p| p as usize)
        .filter(|p| *p < params.len());
    let doc = doc_text(s.get("documentation"));
    let param_doc = param
        .and_then(|p| s.pointer(&format!("/parameters/{p}/documentation")))
        .map(|d| doc_text(Some(d)))
        .unwrap_or_default();
    let name = if label.starts_with('(') { name } else { "" };
    text.push_str(&format!(
        "{name}{label}{}\n",
        if active && several { "  (active)" } else { "" }
    ));
    if active && let Some(p) = param {
        text.push_str(&format!(
            "  active parameter {} of {}: {}{}\n",
            p + 1,
            params.len(),
            params[p],
            if param_doc.is_empty() {
                String::new()
            } else {
                format!(" — {}", param_doc.replace('\n', " "))
            }
        ));
    }
    for l in doc.lines() {
        text.push_str(&format!("  {l}\n"));
    }
    (
        text,
        LspSignature {
            label: label.to_string(),
            parameters: params,
            active,
            active_parameter: param.map(|p| p as u64),
            documentation: doc,
            parameter_documentation: param_doc,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parameter_label_is_a_string_or_utf16_offsets_into_the_signature() {
        let sig = "f(é: int, b: str)";
        assert_eq!(param_label(sig, &json!({"label": "a"})), "a");
        // `é` is one UTF-16 unit and two bytes: offsets 2..8 are `é: int`.
        assert_eq!(param_label(sig, &json!({"label": [2, 8]})), "é: int");
        assert_eq!(param_label(sig, &json!({"label": [10, 16]})), "b: str");
        assert_eq!(param_label(sig, &json!({"label": [16, 10]})), "");
    }
}
