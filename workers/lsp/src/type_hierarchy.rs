//! `lsp type_hierarchy`: the direct supertypes and subtypes of the type at line + symbol
//! (`textDocument/prepareTypeHierarchy`, then `typeHierarchy/supertypes` and
//! `typeHierarchy/subtypes`), each list bounded. clangd before 15 advertises
//! `typeHierarchyProvider` for its own earlier protocol only (`textDocument/typeHierarchy`
//! with `parents` and `children`, the standard methods are "method not found"): that one is
//! asked then, and at once on the later calls to the same incarnation.

use std::path::Path;
use std::sync::atomic::Ordering;

use serde_json::{Value, json};
use toolvisor_protocol::error::{ErrorKind, ToolError};
use toolvisor_protocol::results::{LspHierarchyType, LspServed, LspTypeHierarchy};
use toolvisor_protocol::tools::LspArgs;

use crate::answers::Sources;
use crate::call::{CallCtx, Opened};
use crate::hierarchy::site;
use crate::ops::require;
use crate::servers::Servers;
use crate::uri;

/// Types listed per direction; the total is always counted.
pub const TYPES_MAX: usize = 50;

const NEED: &str = "type_hierarchy needs `file`, `line` (1-based) and `symbol` (a substring on that line naming a class, struct or interface)";

impl Servers {
    /// `lsp type_hierarchy {file, line, symbol, occurrence?}`.
    pub async fn type_hierarchy(
        &self,
        ctx: &CallCtx,
        args: &LspArgs,
    ) -> Result<LspTypeHierarchy, ToolError> {
        let mut at = self.open_at(ctx, args, NEED).await?;
        require(&at.opened, "typeHierarchyProvider", "type hierarchy")?;
        // Subtypes are index-wide: a list from a server still indexing looks complete.
        self.ready(&at.opened.shared).await?;
        let here = at.here();
        let params =
            json!({"textDocument": {"uri": at.opened.uri}, "position": at.position(at.byte)});
        let asked = std::time::Instant::now();
        let (item, supers, subs) = self.ask_types(&mut at.opened, params, &here).await?;
        let request_ms = asked.elapsed().as_secs_f64() * 1000.0;
        let opened = &at.opened;
        let open_text = |p: &Path| opened.shared.doc(&uri::from_path(p)).map(|d| d.text);
        let readable = |p: &Path| ctx.may_read(p);
        let read = |p: &Path| ctx.read_text(p).ok();
        let mut sources = Sources::new(&open_text, &readable, &read);
        let name = item.get("name").and_then(Value::as_str).unwrap_or("");
        let (mut text, supertypes, supertypes_total) =
            types_of(&supers, "supertypes", name, ctx, &mut sources);
        let (lines, subtypes, subtypes_total) =
            types_of(&subs, "subtypes", name, ctx, &mut sources);
        text.push_str(&lines);
        let mut server = self.server_of(opened);
        server.request_ms = Some(request_ms);
        let cut = supertypes_total > TYPES_MAX || subtypes_total > TYPES_MAX;
        let served = LspServed::of(server, false, cut);
        Ok(LspTypeHierarchy {
            text,
            symbol: name.to_string(),
            supertypes,
            supertypes_total: supertypes_total as u64,
            supertypes_truncated: supertypes_total > TYPES_MAX,
            subtypes,
            subtypes_total: subtypes_total as u64,
            subtypes_truncated: subtypes_total > TYPES_MAX,
            served,
        })
    }

    /// The type at `params` with its supertypes and subtypes: the standard protocol's three
    /// requests, else clangd 14's one (both directions, one level deep), remembered per
    /// incarnation once it answered.
    async fn ask_types(
        &self,
        opened: &mut Opened,
        params: Value,
        here: &str,
    ) -> Result<(Value, Value, Value), ToolError> {
        let not_a_type = || {
            ToolError::new(
                ErrorKind::InvalidArgs,
                format!("{here} is not a type the server can show the hierarchy of"),
                "point at the name of a class, struct, interface or enum (its definition or a use)",
            )
        };
        // The standard protocol's refusal, returned if the earlier one fails too.
        let mut refused = None;
        let standard = if opened.conn.legacy_type_hierarchy.load(Ordering::Relaxed) {
            None
        } else {
            match self
                .request(opened, "textDocument/prepareTypeHierarchy", params.clone())
                .await
            {
                Ok(items) => Some(items),
                Err(e) if e.kind == ErrorKind::NotAvailable => {
                    refused = Some(e);
                    None
                }
                Err(e) => return Err(e),
            }
        };
        let (item, supers, subs) = match standard {
            Some(items) => {
                let item = items
                    .as_array()
                    .and_then(|a| a.first())
                    .cloned()
                    .ok_or_else(not_a_type)?;
                let supers = self
                    .request(opened, "typeHierarchy/supertypes", json!({"item": item}))
                    .await?;
                let subs = self
                    .request(opened, "typeHierarchy/subtypes", json!({"item": item}))
                    .await?;
                (item, supers, subs)
            }
            // clangd 14: both directions one level deep in one answer; once it answered, its
            // protocol is asked at once (for this incarnation).
            None => {
                let mut legacy = params;
                legacy["direction"] = json!(2);
                legacy["resolve"] = json!(1);
                let item = self
                    .request(opened, "textDocument/typeHierarchy", legacy)
                    .await
                    .map_err(|e| refused.take().unwrap_or(e))?;
                if refused.is_some() {
                    let conn = &opened.conn;
                    conn.legacy_type_hierarchy.store(true, Ordering::Relaxed);
                }
                if item.is_null() {
                    return Err(not_a_type());
                }
                let supers = item.get("parents").cloned().unwrap_or(json!([]));
                let subs = item.get("children").cloned().unwrap_or(json!([]));
                (item, supers, subs)
            }
        };
        Ok((item, supers, subs))
    }
}

/// One direction's lines of the answer (`word` of `name`), its items (at most [`TYPES_MAX`])
/// and how many there are.
fn types_of(
    list: &Value,
    word: &str,
    name: &str,
    ctx: &CallCtx,
    sources: &mut Sources<'_>,
) -> (String, Vec<LspHierarchyType>, usize) {
    let mut types = Vec::new();
    for t in list.as_array().into_iter().flatten() {
        let range = t
            .get("selectionRange")
            .or_else(|| t.get("range"))
            .cloned()
            .unwrap_or(Value::Null);
        if let Some((s, _)) = site(t, &range, ctx, sources) {
            types.push(s);
        }
    }
    types.sort_by(|a, b| (&a.path, a.line).cmp(&(&b.path, b.line)));
    let total = types.len();
    let mut text = format!("{word} of {name} ({total}):\n");
    if types.is_empty() {
        text.push_str("  none found\n");
    }
    let mut items = Vec::new();
    for s in types.iter().take(TYPES_MAX) {
        let item = LspHierarchyType {
            name: s.name.clone(),
            kind: s.kind.to_string(),
            path: s.path.clone(),
            line: s.line,
            text: s.text.clone(),
            outside: s.outside,
        };
        text.push_str(&format!("  {}\n", item.line()));
        items.push(item);
    }
    if total > TYPES_MAX {
        text.push_str(&format!(
            "  (showing {TYPES_MAX} of {total} {word}; the list was cut)\n"
        ));
    }
    (text, items, total)
}
