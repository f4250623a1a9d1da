//! What one call carries into the language servers: [`CallCtx`], the caller's workdir, run and
//! file `Scope` (every file argument resolves through it, and every location's text is read
//! beneath the scope's root, `CallCtx::read_text`, or not at all), and [`Opened`], a file
//! synced to its server for the call's requests.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use toolvisor_files::Error as FilesError;
use toolvisor_files::Scope;
use toolvisor_files::paths::Access;
use toolvisor_protocol::error::ToolError;

use crate::server::{Conn, ServerShared};

/// Who is calling: the workdir relative paths resolve against, the run whose ledger
/// diagnostics are folded into, and the file tools' scope every path goes through.
#[derive(Clone, Debug)]
pub struct CallCtx {
    /// The workdir's real path (`scope.root()`): answers show paths relative to it.
    pub workdir: PathBuf,
    pub run: String,
    /// The same confinement as the file tools (`[files] read_roots`,
    /// `allow_outside_workdir`): file arguments resolve through it (reads for `lsp` and
    /// `synced_write`, writes for `lsp_rename`), every file a workspace edit touches is
    /// checked for writing, and no text is read from a location outside it.
    pub scope: Scope,
    /// The crash journal of multi-file writes (`lsp_rename`), as `apply_patch` uses it.
    pub journal: Option<std::sync::Arc<toolvisor_files::journal::Journal>>,
}

impl CallCtx {
    /// The real path of a file argument of `tool`, if `access` to it is in scope; else the
    /// file tools' `out_of_scope` answer.
    pub fn resolve(&self, tool: &str, file: &str, access: Access) -> Result<PathBuf, ToolError> {
        self.scope
            .resolve(file, access)
            .map(|r| r.real)
            .map_err(|e| e.to_tool_error(tool))
    }

    /// Like [`CallCtx::resolve`] for a path a server named (absolute).
    pub fn check(&self, path: &Path, access: Access) -> Result<PathBuf, FilesError> {
        let text = path
            .to_str()
            .ok_or_else(|| FilesError::bad("path", format!("{} is not UTF-8", path.display())))?;
        self.scope.resolve(text, access).map(|r| r.real)
    }

    /// Whether toolvisor may read text from `path` (a location a server named) to show it.
    pub fn may_read(&self, path: &Path) -> bool {
        self.check(path, Access::Read).is_ok()
    }

    /// The text of `path`, a real path already checked, opened beneath the scope's root
    /// (`Scope::open_found`), never by name: a directory on it swapped for a symbolic link
    /// since the check is not followed.
    pub fn read_text(&self, path: &Path) -> std::io::Result<String> {
        use std::io::Read as _;
        let mut text = String::new();
        self.scope.open_found(path)?.read_to_string(&mut text)?;
        Ok(text)
    }
}

/// A file synced to its server, ready for a request.
pub struct Opened {
    pub shared: Arc<ServerShared>,
    pub conn: Arc<Conn>,
    pub path: PathBuf,
    pub uri: String,
    pub text: String,
    pub version: i32,
    /// Whether the sync sent anything (the server's view changed).
    pub changed: bool,
    /// The highest diagnostics sequence number seen before the sync.
    pub seq_before: u64,
    /// The run it was opened for (its trust picks the server's mode).
    pub run: String,
    /// The server's readiness when the last request was sent: what its answer rests on (a
    /// server reports progress of the request itself, e.g. pyright's "Finding references",
    /// which is no indexing of the answer's).
    pub asked: Option<crate::server::Readiness>,
}
