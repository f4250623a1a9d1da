//! Index-wide answers across nested roots. A file in a root nested inside another root of its
//! language (a monorepo: `lib/pyproject.toml` under `./pyproject.toml`) gets the innermost
//! root's server, which searches that root only. For `references` and `implementation` the
//! servers of the enclosing roots within the workdir are asked the same question about the
//! same file (it lies under their roots too), their answers merged with the inner one
//! (locations de-duplicated), and the answer says which roots it covers (`roots`, `merged`).
//! An enclosing server that cannot answer (not installed, untrusted, still indexing) leaves
//! the answer partial, naming why.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::answers::show_dir;
use crate::call::{CallCtx, Opened};
use crate::servers::Servers;

/// Enclosing roots asked at most.
const ENCLOSING_MAX: usize = 3;

/// Where the question is, to be asked again in another server's position encoding.
pub(crate) struct At<'a> {
    /// 0-based line.
    pub line: usize,
    /// The line's text.
    pub src: &'a str,
    /// The symbol's byte offset in the line.
    pub byte: usize,
}

/// What asking the enclosing roots' servers gave.
pub(crate) struct Merged {
    /// The enclosing roots whose servers answered, innermost first.
    pub roots: Vec<PathBuf>,
    /// Their raw answers.
    pub answers: Vec<Value>,
    /// Why an enclosing root's server gave no answer, one note each.
    pub failed: Vec<String>,
    /// Every enclosing root within the workdir was searched.
    pub covered: bool,
}

impl Servers {
    /// The roots of `opened`'s language enclosing its server's root within the workdir,
    /// innermost first (at most [`ENCLOSING_MAX`]).
    fn enclosing_roots(&self, workdir: &Path, opened: &Opened) -> Vec<PathBuf> {
        let Some(spec) = self.languages().get(&opened.shared.language) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let mut inner = opened.shared.root.clone();
        while out.len() < ENCLOSING_MAX {
            let Some(outer) = inner
                .parent()
                .and_then(|up| crate::locate::find_root(up, &spec.markers))
                .filter(|outer| outer.starts_with(workdir))
            else {
                break;
            };
            out.push(outer.clone());
            inner = outer;
        }
        out
    }

    /// Ask `method` with `params` (about `opened`'s document) of the servers of every root
    /// enclosing `opened`'s within the workdir.
    pub(crate) async fn ask_enclosing(
        &self,
        ctx: &CallCtx,
        opened: &Opened,
        method: &str,
        params: &Value,
        at: At<'_>,
    ) -> Merged {
        let mut merged = Merged {
            roots: Vec::new(),
            answers: Vec::new(),
            failed: Vec::new(),
            covered: true,
        };
        let Some(spec) = self.languages().get(&opened.shared.language).cloned() else {
            return merged;
        };
        for root in self.enclosing_roots(&ctx.workdir, opened) {
            let shown = show_dir(&root, &ctx.workdir);
            let answer = async {
                let plan = self
                    .plan_for(&opened.shared.language, &spec, &root, &ctx.run)
                    .map_err(|e| e.to_error())?;
                let mut other = self.open_planned(&plan, &opened.path, &ctx.run).await?;
                self.ready_for(&other.shared, &other.uri).await?;
                let mut params = params.clone();
                let column = other.conn.encoding.column(at.src, at.byte);
                params["position"] = json!({"line": at.line, "character": column});
                self.request(&mut other, method, params).await
            }
            .await;
            match answer {
                Ok(v) => {
                    merged.roots.push(root);
                    merged.answers.push(v);
                }
                Err(e) => {
                    merged.covered = false;
                    merged.failed.push(format!(
                        "the enclosing root {shown}'s server gave no answer ({}: {}), so its files outside {} were not searched",
                        e.kind.as_str(),
                        e.message,
                        show_dir(&opened.shared.root, &ctx.workdir)
                    ));
                }
            }
        }
        merged
    }
}

/// The key two servers' locations agree on: the document and the range (a `LocationLink`'s
/// target range).
fn key(loc: &Value) -> Option<(String, String)> {
    let uri = loc.get("uri").or_else(|| loc.get("targetUri"))?.as_str()?;
    let range = loc
        .get("range")
        .or_else(|| loc.get("targetSelectionRange"))
        .or_else(|| loc.get("targetRange"))?;
    Some((uri.to_string(), range.to_string()))
}

/// Merge the other servers' location lists into `result` (a list, or null), each location
/// once.
pub(crate) fn merge_into(result: &mut Value, others: &[Value]) {
    let mut all: Vec<Value> = match result.take() {
        Value::Array(a) => a,
        Value::Null => Vec::new(),
        one => vec![one],
    };
    let mut seen: std::collections::HashSet<(String, String)> =
        all.iter().filter_map(key).collect();
    for other in others {
        let list = match other {
            Value::Array(a) => a.clone(),
            Value::Null => Vec::new(),
            one => vec![one.clone()],
        };
        for loc in list {
            if key(&loc).is_none_or(|k| seen.insert(k)) {
                all.push(loc);
            }
        }
    }
    *result = Value::Array(all);
}

/// Says in the answer's text which roots it covers, and returns them (its `roots`, the
/// innermost first).
pub(crate) fn say_merged(
    text: &mut String,
    inner: &Path,
    m: &Merged,
    workdir: &Path,
) -> Vec<String> {
    let mut roots = vec![show_dir(inner, workdir)];
    roots.extend(m.roots.iter().map(|r| show_dir(r, workdir)));
    text.push_str(&format!(
        "(merged: the answers of the servers of {} — {} is nested inside {})\n",
        roots.join(", "),
        roots[0],
        roots[1..].join(" and ")
    ));
    roots
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_locations_appear_once() {
        let at = |uri: &str, line: u64| json!({"uri": uri, "range": {"start": {"line": line, "character": 0}, "end": {"line": line, "character": 3}}});
        let mut inner = json!([at("file:///w/lib/a.py", 0), at("file:///w/lib/b.py", 2)]);
        let outer = json!([at("file:///w/lib/a.py", 0), at("file:///w/app.py", 2)]);
        merge_into(&mut inner, &[outer, Value::Null]);
        let uris: Vec<&str> = inner
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["uri"].as_str().unwrap())
            .collect();
        assert_eq!(
            uris,
            [
                "file:///w/lib/a.py",
                "file:///w/lib/b.py",
                "file:///w/app.py"
            ]
        );
        let mut none = Value::Null;
        merge_into(&mut none, &[json!([at("file:///w/app.py", 1)])]);
        assert_eq!(none.as_array().unwrap().len(), 1);
    }
}
