//! A language server's memory limit: the daemon samples the resident memory of the server's
//! whole process tree and kills the server when it is over its limit; the end is reported
//! as a kill at the limit and the supervisor restarts the server like any crash.
//!
//! Why a sampling watchdog and not a kernel limit:
//! - `RLIMIT_AS` breaks node (V8 reserves large virtual ranges up front), and pyright and
//!   typescript-language-server are node programs; `RLIMIT_DATA` makes allocations fail inside
//!   the server, which then dies in its own way (or limps on), never reported as the limit.
//! - cgroup v2 `memory.max` is the true bound, but only where the daemon may create a child
//!   cgroup with the memory controller enabled; many hosts (containers, cgroup v1 or hybrid
//!   hierarchies, like this project's CI) give it none, and a limit that exists only on some
//!   hosts is no rule.
//! - The watchdog works on every Linux (it is how `eval`'s kernels keep their memory cap), covers every process of the server (tsserver,
//!   helpers), and the daemon knows for certain that it killed the server and why.
//!
//! The price: between two samples ([`SAMPLE`]) a server can allocate past the limit; the limit
//! bounds how long it stays over, not how far. For node servers the V8 heap is also capped at
//! the limit (`--max-old-space-size` through `NODE_OPTIONS`), so V8 collects garbage before it
//! grows past it, and a V8 that gives up ("JavaScript heap out of memory") is reported as the
//! same limit.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::lock;
use crate::server::ServerShared;

/// Default `[lsp] memory_limit_mb`: pyright grew to 4.4 GiB on a 43 MB file before it
/// aborted; a server past this is broken for the agent anyway.
pub const DEFAULT_LIMIT_MB: u64 = 4096;

/// How often a server's memory is sampled.
pub const SAMPLE: Duration = Duration::from_millis(250);

/// What V8 prints when its heap limit is reached, just before it aborts.
const V8_OUT_OF_HEAP: &str = "JavaScript heap out of memory";

/// The report of a server killed at its limit.
pub fn killed_message(id: &str, limit: u64, resident: Option<u64>) -> String {
    format!(
        "language server {id} was killed at its memory limit of {} MiB{} ([lsp] memory_limit_mb, or memory_limit_mb of its language)",
        limit >> 20,
        match resident {
            Some(r) => format!(" ({} MiB resident)", r >> 20),
            None => " (its JavaScript heap was full)".to_string(),
        }
    )
}

/// Whether `program` runs on node: a `node` binary, or a script whose `#!` line names node.
pub fn is_node_program(program: &Path) -> bool {
    use std::io::Read as _;
    if program
        .file_name()
        .is_some_and(|n| n == "node" || n == "nodejs")
    {
        return true;
    }
    let mut head = [0u8; 128];
    let Ok(mut file) = std::fs::File::open(program) else {
        return false;
    };
    let n = file.read(&mut head).unwrap_or(0);
    let first = head[..n].split(|b| *b == b'\n').next().unwrap_or_default();
    first.starts_with(b"#!") && String::from_utf8_lossy(first).contains("node")
}

/// `NODE_OPTIONS` for a node server under `limit` bytes: the V8 heap capped at the limit,
/// after what the environment already holds.
pub fn node_options(existing: Option<&str>, limit: u64) -> String {
    let flag = format!("--max-old-space-size={}", (limit >> 20).max(16));
    match existing.map(str::trim).filter(|e| !e.is_empty()) {
        Some(e) => format!("{e} {flag}"),
        None => flag,
    }
}

/// Whether a server's stderr says V8 gave up at its heap limit.
pub fn v8_out_of_heap(stderr: &str) -> bool {
    stderr.contains(V8_OUT_OF_HEAP)
}

/// Resident bytes of `root` and all its descendants.
pub fn tree_resident(root: u32) -> Option<u64> {
    let own = toolvisor_kit::process::rss_bytes(root)?;
    Some(
        toolvisor_kit::process::descendants(root)
            .into_iter()
            .filter_map(toolvisor_kit::process::rss_bytes)
            .fold(own, u64::saturating_add),
    )
}

/// Sample incarnation `generation` of a server (its tree under `tree`, the shim; `main` the
/// server itself) until it ends; over `limit`, record why in `shared` and kill the server
/// (the shim then tears down the rest of its tree).
pub(crate) async fn watch(
    shared: Arc<ServerShared>,
    generation: u64,
    tree: u32,
    main: u32,
    limit: u64,
) {
    loop {
        tokio::time::sleep(SAMPLE).await;
        if shared.generation.load(Ordering::SeqCst) != generation {
            return;
        }
        let Ok(Some(resident)) = tokio::task::spawn_blocking(move || tree_resident(tree)).await
        else {
            return;
        };
        if resident <= limit {
            continue;
        }
        let why = killed_message(&shared.id, limit, Some(resident));
        tracing::warn!(server = shared.id, resident, limit, "{why}");
        *lock(&shared.memory_kill) = Some((generation, why));
        if main > 1 {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(main as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        return;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kill_report_names_the_server_and_the_limit() {
        let text = killed_message("python:/x", 2048 << 20, Some(2100 << 20));
        assert!(
            text.starts_with(
                "language server python:/x was killed at its memory limit of 2048 MiB (2100 MiB resident)"
            ),
            "{text}"
        );
        assert!(text.contains("memory_limit_mb"), "{text}");
    }

    #[test]
    fn node_servers_are_told_apart_and_get_a_heap_cap() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("pyright-langserver");
        std::fs::write(&script, "#!/usr/bin/env node\nrequire('x')\n").unwrap();
        let python = dir.path().join("pylsp");
        std::fs::write(&python, "#!/usr/bin/python3\nimport x\n").unwrap();
        assert!(is_node_program(&script));
        assert!(!is_node_program(&python));
        assert!(is_node_program(Path::new("/usr/bin/node")));
        assert_eq!(node_options(None, 2048 << 20), "--max-old-space-size=2048");
        assert_eq!(
            node_options(Some("--enable-source-maps"), 64 << 20),
            "--enable-source-maps --max-old-space-size=64"
        );
        assert!(v8_out_of_heap(
            "FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory"
        ));
    }

    #[test]
    fn a_tree_is_measured_with_its_descendants() {
        let me = std::process::id();
        let own = toolvisor_kit::process::rss_bytes(me).unwrap();
        assert!(tree_resident(me).unwrap() >= own);
        assert!(tree_resident(u32::MAX - 1).is_none());
    }
}
