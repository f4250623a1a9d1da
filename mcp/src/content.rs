//! Daemon outcomes as MCP tool results: the rendering as text (each tool's, from its result
//! type: `render.rs`'s `Renderer`, which says where the images went), images as image
//! content or, for a client that drops image content, as files under the workdir named in the
//! text, resource links to stored results, and `isError` with the error's kind, message and
//! hint as text. With `--structured` a result also carries its whole JSON as
//! `structuredContent`; without it there is none, because the harnesses give the model
//! `structuredContent` in place of `content` when it is there. Also `toolvisor://result/<ref>`
//! URIs.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde_json::{Map, Value as Json, json};
use toolvisor_protocol::render::{ImageFate, Outward};
use toolvisor_protocol::wire::Outcome;
use toolvisor_protocol::{ErrorKind, ToolError};

use crate::Images;
use crate::render::Renderer;

/// The scheme and path of a stored result's URI.
pub const RESULT_URI: &str = "toolvisor://result/";

/// The `clientInfo.name` prefixes of clients that accept MCP image content but never show it
/// to the model: the Codex CLI (`codex-mcp-client`, 0.171) keeps the text and drops the image.
pub const NO_IMAGE_CLIENTS: &[&str] = &["codex"];

/// Where the images of a client that does not show image content are written, beneath the
/// workdir.
pub const IMAGE_DIR: &str = ".toolvisor/images";

/// How one client gets its results.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shape {
    /// The whole JSON as `structuredContent` too (`--structured`).
    pub structured: bool,
    /// Where images go.
    pub images: ImageSink,
    /// Each tool's rendering of its results (`Options::renderer`).
    pub renderer: Renderer,
}

/// Where a result's images go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ImageSink {
    /// MCP image content.
    Inline,
    /// Files beneath this workdir, in [`IMAGE_DIR`].
    Files(PathBuf),
}

impl Shape {
    /// The shape for the client that named itself `client` (its `clientInfo.name`), as the
    /// operator's options say.
    pub fn for_client(opts: &crate::Options, client: Option<&str>) -> Shape {
        let drops_images = client.is_some_and(|name| {
            let name = name.to_ascii_lowercase();
            NO_IMAGE_CLIENTS.iter().any(|p| name.starts_with(p))
        });
        let files = match opts.images {
            Images::Inline => false,
            Images::File => true,
            Images::Auto => drops_images,
        };
        Shape {
            structured: opts.structured,
            images: if files {
                ImageSink::Files(PathBuf::from(&opts.workdir))
            } else {
                ImageSink::Inline
            },
            renderer: opts.renderer.clone(),
        }
    }

    /// Text and image content, nothing typed, every result by the generic rules.
    pub fn plain() -> Shape {
        Shape {
            structured: false,
            images: ImageSink::Inline,
            renderer: Renderer::default(),
        }
    }
}

pub fn error_json(e: &ToolError) -> Json {
    json!({"kind": e.kind.as_str(), "message": e.message, "hint": e.hint})
}

/// An error as an MCP tool result: `isError`, and its kind, message and hint as text (with
/// `--structured`, the same as `{"error": {kind, message, hint}}` structured content).
pub fn error_result(e: &ToolError, shape: &Shape) -> Json {
    let mut text = format!("error {}: {}", e.kind.as_str(), e.message);
    if !e.hint.is_empty() {
        text.push_str(&format!("\nhint: {}", e.hint));
    }
    let mut result = json!({
        "content": [{"type": "text", "text": text}],
        "isError": true,
        // rmcp drops it for peers before 2026-07-28, which require it.
        "resultType": "complete",
    });
    if shape.structured {
        result["structuredContent"] = json!({ "error": error_json(e) });
    }
    result
}

/// A daemon outcome as an MCP `CallToolResult` (JSON).
pub fn outcome_result(tool: &str, outcome: Outcome, shape: &Shape) -> Json {
    let mut value = match outcome {
        Outcome::Err(e) => return error_result(&e, shape),
        Outcome::Ok(v) => v.0,
    };
    let mut images = Vec::new();
    let mut fates = Vec::new();
    // `read` of an image: the whole result is one image.
    if value.get("kind").and_then(Json::as_str) == Some("image")
        && let Some(map) = value.as_object_mut()
        && let Some((fate, block)) = take_image(map, tool, &shape.images)
    {
        images.extend(block);
        fates.push((None, fate));
    }
    // `eval`'s figures: an `images` list.
    if let Some(list) = value.get_mut("images").and_then(Json::as_array_mut) {
        for (i, item) in list.iter_mut().enumerate() {
            if let Some(map) = item.as_object_mut()
                && let Some((fate, block)) = take_image(map, tool, &shape.images)
            {
                images.extend(block);
                fates.push((Some(i), fate));
            }
        }
    }
    // The typed result keeps its schema's shape: `data` says where the image went; it is
    // what the rendering reads too, which says it in keys of its own (`shown`, `file` and
    // `file_bytes`, `not_shown`).
    let outward = Outward { images: fates };
    outward.note(&mut value);
    let text = shape.renderer.render(tool, &value, &outward);
    let structured = shape.structured.then(|| value.clone());
    outward.show(&mut value);
    let mut links = Vec::new();
    collect_refs(&value, tool, &mut links);
    let mut content = vec![json!({"type": "text", "text": text})];
    content.extend(images);
    content.extend(links);
    let mut result = json!({ "content": content, "isError": false, "resultType": "complete" });
    if let Some(typed) = structured.filter(Json::is_object) {
        result["structuredContent"] = typed;
    }
    result
}

/// Take an image's base64 `data` out of `map`: into MCP image content (returned with it), or
/// into a file under the workdir; what became of it.
fn take_image(
    map: &mut Map<String, Json>,
    tool: &str,
    sink: &ImageSink,
) -> Option<(ImageFate, Option<Json>)> {
    let mime = map
        .get("mime_type")
        .or_else(|| map.get("mime"))
        .and_then(Json::as_str)?
        .to_string();
    let data = map.get("data").and_then(Json::as_str)?.to_string();
    map.remove("data");
    Some(match sink {
        ImageSink::Inline => (
            ImageFate::Shown,
            Some(json!({"type": "image", "data": data, "mimeType": mime})),
        ),
        ImageSink::Files(workdir) => match write_image(workdir, tool, &mime, &data) {
            Ok((rel, n)) => (ImageFate::Written(rel, n), None),
            Err(why) => (
                ImageFate::NotShown(format!(
                    "this client shows no image content, and writing the image under {IMAGE_DIR} failed: {why}"
                )),
                None,
            ),
        },
    })
}

/// Write a base64 image beneath `workdir` in [`IMAGE_DIR`], named by its content
/// (`<tool>-<hash>.png`); the path relative to the workdir and the size in bytes. The
/// directories are made and opened one at a time without following a symbolic link (one
/// planted at `.toolvisor` or `images` is refused), and the file is a new temp file renamed
/// into place, so a link at the name is replaced, never written through.
fn write_image(
    workdir: &Path,
    tool: &str,
    mime: &str,
    data: &str,
) -> Result<(String, u64), String> {
    use nix::fcntl::{OFlag, openat, renameat};
    use nix::sys::stat::{Mode, mkdirat};
    use std::hash::{Hash, Hasher};
    use std::io::Write as _;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data.as_bytes())
        .map_err(|e| format!("its data is not base64: {e}"))?;
    let ext = match mime {
        "image/jpeg" => "jpg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        _ => "png",
    };
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    let tool: String = tool
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    let name = format!("{tool}-{:016x}.{ext}", h.finish());
    let dir_flags = OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_RDONLY;
    let mut dir = openat(
        nix::fcntl::AT_FDCWD,
        workdir,
        OFlag::O_DIRECTORY | OFlag::O_CLOEXEC | OFlag::O_RDONLY,
        Mode::empty(),
    )
    .map_err(|e| format!("the workdir {}: {e}", workdir.display()))?;
    for part in IMAGE_DIR.split('/') {
        match mkdirat(&dir, part, Mode::from_bits_truncate(0o755)) {
            Ok(()) | Err(nix::errno::Errno::EEXIST) => {}
            Err(e) => return Err(format!("make {part}: {e}")),
        }
        dir = openat(&dir, part, dir_flags, Mode::empty()).map_err(|e| match e {
            nix::errno::Errno::ELOOP | nix::errno::Errno::ENOTDIR => {
                format!("{part} is not a directory (a symbolic link or a file is in its place)")
            }
            e => format!("open {part}: {e}"),
        })?;
    }
    let tmp = toolvisor_kit::private::temp_name(std::ffi::OsStr::new(&name));
    let fd = openat(
        &dir,
        tmp.as_str(),
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o644),
    )
    .map_err(|e| format!("create a temp file for {name}: {e}"))?;
    let mut file = std::fs::File::from(fd);
    let written = file
        .write_all(&bytes)
        .map_err(|e| format!("write {name}: {e}"))
        .and_then(|()| {
            renameat(&dir, tmp.as_str(), &dir, name.as_str())
                .map_err(|e| format!("rename into {name}: {e}"))
        });
    if let Err(e) = written {
        let _ = nix::unistd::unlinkat(&dir, tmp.as_str(), nix::unistd::UnlinkatFlags::NoRemoveDir);
        return Err(e);
    }
    Ok((format!("{IMAGE_DIR}/{name}"), bytes.len() as u64))
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
        let r = outcome_result(
            "read",
            Outcome::Ok(toolvisor_protocol::Value(v)),
            &Shape::plain(),
        );
        let content = r["content"].as_array().unwrap();
        assert_eq!(content[1]["type"], "image");
        assert_eq!(content[1]["data"], "AAAA");
        assert!(!content[0]["text"].as_str().unwrap().contains("AAAA"));
        let v = json!({"projected": {"stdout": {"ref": "tr_1", "total_chars": 9}}});
        let r = outcome_result(
            "bash",
            Outcome::Ok(toolvisor_protocol::Value(v)),
            &Shape::plain(),
        );
        assert_eq!(r["content"][1]["uri"], "toolvisor://result/tr_1");
    }

    fn files(dir: &Path) -> Shape {
        Shape {
            structured: false,
            images: ImageSink::Files(dir.to_path_buf()),
            renderer: Renderer::default(),
        }
    }

    /// A 1×1 PNG.
    const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

    #[test]
    fn by_default_a_result_is_its_rendering_with_no_structured_content() {
        let v = json!({"locations": [{"abs_path": "/r/a.py", "path": "a.py", "line": 3, "text": "x"}],
            "text": "a.py:3: x\n", "total": 1, "complete": true});
        let r = outcome_result(
            "lsp",
            Outcome::Ok(toolvisor_protocol::Value(v.clone())),
            &Shape::plain(),
        );
        assert!(r.get("structuredContent").is_none(), "{r}");
        let text = r["content"][0]["text"].as_str().unwrap();
        assert!(
            text.contains("a.py:3: x") && !text.contains("abs_path"),
            "{text}"
        );
        let structured = Shape {
            structured: true,
            images: ImageSink::Inline,
            renderer: Renderer::default(),
        };
        let r = outcome_result(
            "lsp",
            Outcome::Ok(toolvisor_protocol::Value(v.clone())),
            &structured,
        );
        assert_eq!(r["structuredContent"], v);
    }

    #[test]
    fn an_error_is_kind_message_and_hint_as_text() {
        let e = ToolError::new(
            ErrorKind::NotFound,
            "no such file: a.py",
            "list the directory with ls",
        );
        let r = error_result(&e, &Shape::plain());
        assert_eq!(r["isError"], true);
        assert!(r.get("structuredContent").is_none(), "{r}");
        assert_eq!(
            r["content"][0]["text"],
            "error not_found: no such file: a.py\nhint: list the directory with ls"
        );
        let structured = Shape {
            structured: true,
            images: ImageSink::Inline,
            renderer: Renderer::default(),
        };
        assert_eq!(
            error_result(&e, &structured)["structuredContent"]["error"]["kind"],
            "not_found"
        );
    }

    #[test]
    fn for_a_client_without_images_the_image_is_a_file_the_text_names() {
        let dir = tempfile::tempdir().unwrap();
        let v = json!({"text": "plotted\n", "images": [{"mime": "image/png", "data": PNG, "bytes": 70, "width": 1, "height": 1}]});
        let r = outcome_result(
            "eval",
            Outcome::Ok(toolvisor_protocol::Value(v)),
            &files(dir.path()),
        );
        let content = r["content"].as_array().unwrap();
        assert_eq!(content.len(), 1, "no image content: {r}");
        let text = content[0]["text"].as_str().unwrap();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(PNG)
            .unwrap();
        let rel = text
            .split_whitespace()
            .find_map(|w| w.strip_prefix("file="))
            .unwrap_or_else(|| panic!("no file named: {text}"));
        assert!(
            rel.starts_with(".toolvisor/images/eval-") && rel.ends_with(".png"),
            "{text}"
        );
        assert!(
            text.contains(&format!("file_bytes={}", bytes.len())),
            "{text}"
        );
        assert!(!text.contains("sent") && !text.contains(PNG), "{text}");
        assert_eq!(std::fs::read(dir.path().join(rel)).unwrap(), bytes);
        // Inline: image content, and the text says so.
        let v = json!({"text": "plotted\n", "images": [{"mime": "image/png", "data": PNG, "bytes": 70}]});
        let r = outcome_result(
            "eval",
            Outcome::Ok(toolvisor_protocol::Value(v)),
            &Shape::plain(),
        );
        assert_eq!(r["content"][1]["type"], "image");
        assert!(
            r["content"][0]["text"]
                .as_str()
                .unwrap()
                .contains("shown=as image content"),
            "{r}"
        );
        // A typed result keeps its schema's shape: `data` says where the image went.
        let v = json!({"kind": "image", "mime_type": "image/png", "data": PNG});
        let shape = Shape {
            structured: true,
            images: ImageSink::Files(dir.path().to_path_buf()),
            renderer: Renderer::default(),
        };
        let r = outcome_result("read", Outcome::Ok(toolvisor_protocol::Value(v)), &shape);
        let data = r["structuredContent"]["data"].as_str().unwrap();
        assert!(
            data.starts_with("(written to .toolvisor/images/read-"),
            "{r}"
        );
        assert!(r["structuredContent"].get("file").is_none(), "{r}");
    }

    #[test]
    fn a_link_planted_in_the_image_dir_is_refused_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), dir.path().join(".toolvisor")).unwrap();
        let v = json!({"kind": "image", "mime_type": "image/png", "data": PNG});
        let r = outcome_result(
            "read",
            Outcome::Ok(toolvisor_protocol::Value(v)),
            &files(dir.path()),
        );
        let text = r["content"][0]["text"].as_str().unwrap();
        assert!(
            text.contains("not_shown") && text.contains("symbolic link"),
            "{text}"
        );
        assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0);
    }

    #[test]
    fn codex_gets_files_and_other_clients_image_content_unless_forced() {
        let mut opts = crate::Options {
            socket: "/nonexistent".into(),
            surface: toolvisor_protocol::wire::Tier::Read,
            conversation: None,
            run_id: None,
            workdir: "/w".into(),
            poll: std::time::Duration::from_secs(1),
            approvals: crate::Approvals::Elicit,
            questions: crate::Questions::None,
            structured: false,
            images: Images::Auto,
            run_token: None,
            renderer: Default::default(),
        };
        let files = ImageSink::Files("/w".into());
        assert_eq!(
            Shape::for_client(&opts, Some("codex-mcp-client")).images,
            files
        );
        assert_eq!(
            Shape::for_client(&opts, Some("claude-code")).images,
            ImageSink::Inline
        );
        assert_eq!(Shape::for_client(&opts, None).images, ImageSink::Inline);
        opts.images = Images::File;
        assert_eq!(Shape::for_client(&opts, Some("claude-code")).images, files);
        opts.images = Images::Inline;
        assert_eq!(
            Shape::for_client(&opts, Some("codex-mcp-client")).images,
            ImageSink::Inline
        );
    }
}
