//! The audit log: one JSON line per denied call (policy, surface, approval) and per approved
//! one (with who approved it: the answer's reason), appended and
//! flushed before the caller hears the answer. Private: created 0600 (its directory 0700).

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde_json::json;

pub struct AuditLog {
    path: PathBuf,
    file: Mutex<Option<std::fs::File>>,
}

impl AuditLog {
    pub fn new(path: &Path) -> Self {
        AuditLog {
            path: path.to_path_buf(),
            file: Mutex::new(None),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Append one record. A failure to write is logged, never fatal to the call.
    /// `call` is the call's id on its session (the `call` field of the daemon's log lines).
    pub fn record(
        &self,
        event: &str,
        conversation: &str,
        session: u64,
        call: u64,
        tool: &str,
        reason: &str,
    ) {
        let line = json!({
            "ts_ms": std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0),
            "event": event,
            "tool": tool,
            "conversation": conversation,
            "session": session,
            "call": call,
            "reason": reason,
        });
        let mut guard = self.file.lock().unwrap_or_else(|p| p.into_inner());
        if guard.is_none() {
            match open_private(&self.path) {
                Ok(f) => *guard = Some(f),
                Err(e) => {
                    tracing::error!(path = %self.path.display(), error = %e, "cannot open the audit log");
                    return;
                }
            }
        }
        if let Some(f) = guard.as_mut()
            && let Err(e) = writeln!(f, "{line}").and_then(|_| f.flush())
        {
            tracing::error!(path = %self.path.display(), error = %e, "cannot append to the audit log");
        }
    }
}

/// Opens the log for appending: created 0600 (a missing directory 0700) whatever the umask; a
/// log an older version left readable by others is narrowed to 0600.
fn open_private(path: &Path) -> std::io::Result<std::fs::File> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
        && !dir.exists()
    {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_CLOEXEC)
        .open(path)?;
    let meta = file.metadata()?;
    if meta.is_file()
        && meta.uid() == nix::unistd::geteuid().as_raw()
        && meta.permissions().mode() & 0o077 != 0
    {
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(file)
}
