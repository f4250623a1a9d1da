//! What the test hub answers, shaped like the real Hugging Face Hub: repo listings and search
//! hits built on the recorded answer shapes in `testhub/fixtures/` (every field the Hub sends,
//! `_id`, `id` and `modelId`, `gated`, `cardData`, `gguf`, `safetensors`, …, with only the
//! repo's own id, commit and files put in), and errors with the Hub's `X-Error-Code` and
//! `X-Error-Message` headers (`RepoNotFound`, `RevisionNotFound`, `EntryNotFound`,
//! `GatedRepo`, invalid credentials).

use std::io::Write;
use std::net::TcpStream;
use std::sync::OnceLock;

use serde_json::{Value as Json, json};

/// `GET /api/models/{repo}/revision/{rev}?blobs=true` for a GGUF repo, as the Hub sends it.
pub const GGUF_REPO: &str = include_str!("../fixtures/gguf_repo.json");
/// The same for a safetensors repo.
pub const SAFETENSORS_REPO: &str = include_str!("../fixtures/safetensors_repo.json");
/// The same for a gated repo (`"gated": "manual"`).
pub const GATED_REPO: &str = include_str!("../fixtures/gated_repo.json");
/// `GET /api/models?search=…&full=true`: a list of hits.
pub const SEARCH_FULL: &str = include_str!("../fixtures/search_full.json");

/// The shape a repo's listing takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shape {
    Gguf,
    Safetensors,
    Gated,
}

fn parsed(text: &'static str, cell: &'static OnceLock<Json>) -> &'static Json {
    cell.get_or_init(|| serde_json::from_str(text).expect("a fixture of the test hub is JSON"))
}

fn template(shape: Shape) -> &'static Json {
    static GGUF: OnceLock<Json> = OnceLock::new();
    static ST: OnceLock<Json> = OnceLock::new();
    static GATED: OnceLock<Json> = OnceLock::new();
    match shape {
        Shape::Gguf => parsed(GGUF_REPO, &GGUF),
        Shape::Safetensors => parsed(SAFETENSORS_REPO, &ST),
        Shape::Gated => parsed(GATED_REPO, &GATED),
    }
}

fn search_template() -> &'static Json {
    static SEARCH: OnceLock<Json> = OnceLock::new();
    &parsed(SEARCH_FULL, &SEARCH)[0]
}

/// One file as a listing names it.
pub(crate) struct Listed<'a> {
    pub name: &'a str,
    pub size: u64,
    pub sha256: &'a str,
    pub lfs: bool,
}

/// A stand-in for an object id: 24 hex digits, stable per repo.
fn object_id(repo: &str) -> String {
    crate::sha256_hex(repo.as_bytes())[..24].to_string()
}

/// The repo's info at one commit: the shape's every field, with this repo's id, owner, commit,
/// gate and files. `blobs` adds `blobId`, `size` and `lfs` to each file (as `?blobs=true` does).
pub(crate) fn repo_info(
    shape: Shape,
    repo: &str,
    sha: &str,
    gated: bool,
    files: &[Listed],
    blobs: bool,
) -> Json {
    let mut info = template(shape).clone();
    let siblings: Vec<Json> = files
        .iter()
        .map(|f| {
            if !blobs {
                return json!({"rfilename": f.name});
            }
            let blob = crate::sha256_hex(format!("blob {}{}", f.name, f.sha256).as_bytes());
            let mut s = json!({"rfilename": f.name, "blobId": &blob[..40], "size": f.size});
            if f.lfs {
                s["lfs"] = json!({"sha256": f.sha256, "size": f.size, "pointerSize": 134});
            }
            s
        })
        .collect();
    info["_id"] = json!(object_id(repo));
    info["id"] = json!(repo);
    info["modelId"] = json!(repo);
    info["author"] = json!(repo.split('/').next().unwrap_or(repo));
    info["sha"] = json!(sha);
    info["gated"] = if gated { json!("manual") } else { json!(false) };
    info["siblings"] = Json::Array(siblings);
    info
}

/// One search hit (`full=true`): the recorded hit's fields, this repo's id, commit, gate and
/// file names (the Hub lists no sizes in a search).
pub(crate) fn search_hit(repo: &str, sha: &str, gated: bool, names: &[&str]) -> Json {
    let mut hit = search_template().clone();
    hit["_id"] = json!(object_id(repo));
    hit["id"] = json!(repo);
    hit["modelId"] = json!(repo);
    hit["author"] = json!(repo.split('/').next().unwrap_or(repo));
    hit["sha"] = json!(sha);
    hit["gated"] = if gated { json!("manual") } else { json!(false) };
    hit["downloads"] = json!(7);
    hit["siblings"] = names.iter().map(|n| json!({"rfilename": n})).collect();
    hit
}

/// The reason phrase of a status.
fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        206 => "Partial Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        416 => "Range Not Satisfiable",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Error",
    }
}

pub(crate) fn respond(
    conn: &mut TcpStream,
    status: u16,
    body: &[u8],
    ctype: &str,
) -> std::io::Result<()> {
    write!(
        conn,
        "HTTP/1.1 {status} {}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        reason(status),
        body.len()
    )?;
    conn.write_all(body)
}

/// 429 as the Hub's rate limit answers: `Retry-After` in seconds and its error headers.
pub(crate) fn rate_limited(conn: &mut TcpStream, secs: u64) -> std::io::Result<()> {
    let message = "You have exceeded our hourly quotas for action: resolve";
    let body = serde_json::json!({ "error": message }).to_string();
    write!(
        conn,
        "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json; charset=utf-8\r\nRetry-After: {secs}\r\nX-Error-Message: {message}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )?;
    conn.write_all(body.as_bytes())
}

/// `302 Found` to `location`.
pub(crate) fn redirect(conn: &mut TcpStream, location: &str) -> std::io::Result<()> {
    write!(
        conn,
        "HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
}

/// An error the way the Hub sends one: `X-Error-Code` (when it has one), `X-Error-Message`,
/// and `{"error": message}` as the body.
pub(crate) fn respond_error(
    conn: &mut TcpStream,
    status: u16,
    code: Option<&str>,
    message: &str,
) -> std::io::Result<()> {
    let body = json!({ "error": message }).to_string();
    let code = code
        .map(|c| format!("X-Error-Code: {c}\r\n"))
        .unwrap_or_default();
    write!(
        conn,
        "HTTP/1.1 {status} {}\r\nContent-Type: application/json; charset=utf-8\r\n{code}X-Error-Message: {message}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        reason(status),
        body.len()
    )?;
    conn.write_all(body.as_bytes())
}

/// What the Hub answers a request with a token it does not know (any endpoint).
pub(crate) const INVALID_CREDENTIALS: &str = "Invalid credentials in Authorization header";

/// A gated repo's files asked for without a token (401) or with a token whose account has no
/// access (403).
pub(crate) fn gated_message(repo: &str, with_token: bool) -> String {
    if with_token {
        format!(
            "Access to model {repo} is restricted and you are not in the authorized list. Visit https://huggingface.co/{repo} to ask for access."
        )
    } else {
        format!(
            "Access to model {repo} is restricted. You must have access to it and be authenticated to access it. Please log in."
        )
    }
}
