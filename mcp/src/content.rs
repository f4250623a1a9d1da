//! Daemon outcomes as MCP tool results (JSON text, image content, resource links to stored
//! results, `isError` with `{kind, message, hint}`), and `toolvisor://result/<ref>` URIs.

use serde_json::{Map, Value as Json, json};
use toolvisor_protocol::wire::Outcome;
use toolvisor_protocol::{ErrorKind, ToolError};

/// The scheme and path of a stored result's URI.
pub const RESULT_URI: &str = "toolvisor://result/";

pub fn error_json(e: &ToolError) -> Json {
    json!({"kind": e.kind.as_str(), "message": e.message, "hint": e.hint})
}

/// An error as an MCP tool result: `isError`, the structured error as JSON text, and the
/// same object as structured content.
pub fn error_result(e: &ToolError) -> Json {
    let err = json!({ "error": error_json(e) });
    let mut text = format!("error {}: {}", e.kind.as_str(), e.message);
    if !e.hint.is_empty() {
        text.push_str(&format!("\nhint: {}", e.hint));
    }
    json!({
        "content": [{"type": "text", "text": text}],
        "structuredContent": err,
        "isError": true,
        // rmcp drops it for peers before 2026-07-28, which require it.
        "resultType": "complete",
    })
}

/// A daemon outcome as an MCP `CallToolResult` (JSON).
pub fn outcome_result(tool: &str, outcome: Outcome) -> Json {
    let mut value = match outcome {
        Outcome::Err(e) => return error_result(&e),
        Outcome::Ok(v) => v.0,
    };
    let mut content = Vec::new();
    let mut images = Vec::new();
    // `read` of an image: the whole result is one image.
    if value.get("kind").and_then(Json::as_str) == Some("image")
        && let Some(map) = value.as_object_mut()
        && let Some(image) = take_image(map)
    {
        images.push(image);
    }
    // `eval`'s figures: an `images` list.
    if let Some(list) = value.get_mut("images").and_then(Json::as_array_mut) {
        for item in list.iter_mut() {
            if let Some(map) = item.as_object_mut()
                && let Some(image) = take_image(map)
            {
                images.push(image);
            }
        }
    }
    let mut links = Vec::new();
    collect_refs(&value, tool, &mut links);
    // The model reads the rendering; programs read the whole JSON as structured content.
    content.push(json!({"type": "text", "text": crate::render::render(tool, &value)}));
    content.extend(images);
    content.extend(links);
    let mut result = json!({ "content": content, "isError": false, "resultType": "complete" });
    if value.is_object() {
        result["structuredContent"] = value;
    }
    result
}

/// Move an image's base64 `data` out of `map` into MCP image content; the map keeps a
/// note of where it went.
fn take_image(map: &mut Map<String, Json>) -> Option<Json> {
    let mime = map
        .get("mime_type")
        .or_else(|| map.get("mime"))
        .and_then(Json::as_str)?
        .to_string();
    let data = map.get("data").and_then(Json::as_str)?.to_string();
    map.insert(
        "data".into(),
        Json::String("(sent as MCP image content)".into()),
    );
    Some(json!({"type": "image", "data": data, "mimeType": mime}))
}

/// Every stored-result reference in a result (`{"ref": "tr_…", "total_chars": …}`, as in
/// `projected`) becomes a resource link.
fn collect_refs(value: &Json, tool: &str, out: &mut Vec<Json>) {
    match value {
        Json::Object(map) => {
            if let Some(r) = map.get("ref").and_then(Json::as_str)
                && map.contains_key("total_chars")
                && valid_ref(r)
            {
                let total = map.get("total_chars").and_then(Json::as_u64).unwrap_or(0);
                let mime = map
                    .get("content_type")
                    .and_then(Json::as_str)
                    .unwrap_or("text/plain");
                out.push(json!({
                    "type": "resource_link",
                    "uri": format!("{RESULT_URI}{r}"),
                    "name": r,
                    "description": format!("the whole of a projected {tool} result: {total} characters; resources/read pages it (add ?offset=N)"),
                    "mimeType": mime,
                }));
            }
            for v in map.values() {
                collect_refs(v, tool, out);
            }
        }
        Json::Array(items) => {
            for v in items {
                collect_refs(v, tool, out);
            }
        }
        _ => {}
    }
}

fn valid_ref(r: &str) -> bool {
    !r.is_empty()
        && r.len() <= 64
        && r.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// A page of a stored result named by a `toolvisor://result/<ref>[?offset=N&limit=M]` URI.
#[derive(Debug, PartialEq, Eq)]
pub struct Page {
    pub reference: String,
    pub offset: Option<u64>,
    pub limit: Option<u64>,
}

impl Page {
    pub fn args(&self) -> Json {
        let mut args = json!({ "ref": self.reference });
        if let Some(o) = self.offset {
            args["offset"] = o.into();
        }
        if let Some(l) = self.limit {
            args["limit"] = l.into();
        }
        args
    }
}

fn bad_uri(uri: &str, why: &str) -> ToolError {
    ToolError::new(
        ErrorKind::InvalidArgs,
        format!("{uri:?} is not a stored-result URI: {why}"),
        "use a toolvisor://result/<ref> link from a tool result, optionally with ?offset=N&limit=M (characters)",
    )
}

pub fn parse_result_uri(uri: &str) -> Result<Page, ToolError> {
    let rest = uri
        .strip_prefix(RESULT_URI)
        .ok_or_else(|| bad_uri(uri, "it does not start with toolvisor://result/"))?;
    let (reference, query) = match rest.split_once('?') {
        Some((r, q)) => (r, Some(q)),
        None => (rest, None),
    };
    if !valid_ref(reference) {
        return Err(bad_uri(
            uri,
            "the ref is empty or has characters a ref never has",
        ));
    }
    let mut page = Page {
        reference: reference.to_string(),
        offset: None,
        limit: None,
    };
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair
            .split_once('=')
            .ok_or_else(|| bad_uri(uri, "a query parameter has no value"))?;
        let n: u64 = v
            .parse()
            .map_err(|_| bad_uri(uri, &format!("{k}={v:?} is not a whole number")))?;
        match k {
            "offset" => page.offset = Some(n),
            "limit" => page.limit = Some(n),
            other => return Err(bad_uri(uri, &format!("unknown parameter {other:?}"))),
        }
    }
    Ok(page)
}

/// The `resources/read` answer for one page: its text, and in `_meta` where the next page
/// starts (`toolvisor/next`, absent at the end).
pub fn resource_page(uri: &str, page: &Page, read: &Json) -> Json {
    let text = read.get("text").and_then(Json::as_str).unwrap_or("");
    let mime = read
        .get("content_type")
        .and_then(Json::as_str)
        .unwrap_or("text/plain");
    let eof = read.get("eof").and_then(Json::as_bool).unwrap_or(true);
    let mut meta = json!({
        "toolvisor/offset": read.get("offset").cloned().unwrap_or(Json::Null),
        "toolvisor/next_offset": read.get("next_offset").cloned().unwrap_or(Json::Null),
        "toolvisor/total_chars": read.get("total_chars").cloned().unwrap_or(Json::Null),
        "toolvisor/eof": eof,
    });
    if !eof && let Some(next) = read.get("next_offset").and_then(Json::as_u64) {
        let mut uri = format!("{RESULT_URI}{}?offset={next}", page.reference);
        if let Some(l) = page.limit {
            uri.push_str(&format!("&limit={l}"));
        }
        meta["toolvisor/next"] = uri.into();
    }
    json!({"contents": [{"uri": uri, "mimeType": mime, "text": text, "_meta": meta}], "resultType": "complete"})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_uri_parses_with_and_without_a_page() {
        assert_eq!(
            parse_result_uri("toolvisor://result/tr_ab12").unwrap(),
            Page {
                reference: "tr_ab12".into(),
                offset: None,
                limit: None
            }
        );
        let p = parse_result_uri("toolvisor://result/tr_ab12?offset=10&limit=5").unwrap();
        assert_eq!((p.offset, p.limit), (Some(10), Some(5)));
        for bad in [
            "file:///etc/passwd",
            "toolvisor://result/",
            "toolvisor://result/../x",
            "toolvisor://result/tr?offset=x",
            "toolvisor://result/tr?path=1",
        ] {
            let e = parse_result_uri(bad).unwrap_err();
            assert_eq!(e.kind, ErrorKind::InvalidArgs, "{bad}");
        }
    }

    #[test]
    fn images_become_image_content_and_refs_become_links() {
        let v = json!({"kind": "image", "mime_type": "image/png", "data": "AAAA", "width": 1});
        let r = outcome_result("read", Outcome::Ok(toolvisor_protocol::Value(v)));
        let content = r["content"].as_array().unwrap();
        assert_eq!(content[1]["type"], "image");
        assert_eq!(content[1]["data"], "AAAA");
        assert!(!content[0]["text"].as_str().unwrap().contains("AAAA"));
        let v = json!({"projected": {"stdout": {"ref": "tr_1", "total_chars": 9}}});
        let r = outcome_result("bash", Outcome::Ok(toolvisor_protocol::Value(v)));
        assert_eq!(r["content"][1]["uri"], "toolvisor://result/tr_1");
    }
}
