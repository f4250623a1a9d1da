//! Which server a `ServerShared` runs, where that changes how it is read: rust-analyzer
//! reports quiescence (`experimental/serverStatus`) and checks on save, typescript-language-
//! server loads projects lazily, pyright reports its workspace scan only in a log line, and
//! clangd keeps an index of files it is not told about. Decided once, from the program's name.

use std::path::Path;

/// The server-specific habits toolvisor reads a server's state by.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Flavor {
    /// rust-analyzer: readiness waits for `quiescent`, and saves start `cargo check`.
    pub rust_analyzer: bool,
    /// typescript-language-server loads a document's project lazily, after it is opened, and
    /// answers index-wide requests from the files loaded so far until then: a document's
    /// project counts as loaded once the server published diagnostics for it (it does so
    /// only after loading the project, an empty list included).
    pub loads_projects_lazily: bool,
    /// clangd: its background index is built once, and a file changed on disk is seen only
    /// when it is opened.
    pub clangd: bool,
    /// clangd with its background index on (the default; off with `--background-index=false`):
    /// the first document opened under a compilation database starts a pass over every file
    /// the database lists, reported as `$/progress` `backgroundIndexProgress`
    /// (`Progress::opened_with_database`).
    pub background_index: bool,
    /// A log line some servers write when their workspace scan is done (pyright: "Found N
    /// source files"); until it comes, the server counts as indexing.
    pub ready_log: Option<&'static str>,
    /// pyright: uses of a module's names resolve to its stub when one is beside it.
    pub pyright: bool,
    /// pylsp: jedi's references, with no index and a cut search.
    pub pylsp: bool,
    /// gopls: it loads only the files of this machine's GOOS and GOARCH.
    pub gopls: bool,
    /// The most workspace symbols the server answers with, where it cuts its answer
    /// silently (gopls: 100; clangd: `--limit-results`, 100; rust-analyzer:
    /// `workspace.symbol.search.limit`, 128): an answer that long may not be all.
    pub symbols_cap: Option<usize>,
}

impl Flavor {
    /// The flavor of `program`, started with `args` (the command after the program).
    pub fn of(program: &Path, args: &[String]) -> Flavor {
        let name = program
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        let index_off = args.iter().any(|a| {
            let a = a.trim_start_matches('-');
            ["background-index=false", "background-index=0"].contains(&a)
        });
        Flavor {
            background_index: name.starts_with("clangd") && !index_off,
            rust_analyzer: name.contains("rust-analyzer"),
            loads_projects_lazily: name.contains("typescript-language-server"),
            clangd: name.starts_with("clangd"),
            // pyright answers "cannot rename" or "no definition" for files its workspace scan
            // has not found yet, and reports the scan only in a log line.
            ready_log: name.starts_with("pyright").then_some(" source file"),
            pyright: name.starts_with("pyright"),
            pylsp: name.starts_with("pylsp"),
            gopls: name.starts_with("gopls"),
            symbols_cap: match () {
                _ if name.starts_with("gopls") || name.starts_with("clangd") => Some(100),
                _ if name.contains("rust-analyzer") => Some(128),
                _ => None,
            },
        }
    }

    /// Whether the server publishes nothing for a document whose list was empty and stays
    /// empty (typescript-language-server: `FileDiagnostics.update` returns early when an
    /// empty list is followed by an empty one), so no publish after a change can also mean
    /// "still none".
    pub fn drops_unchanged_empty_lists(&self) -> bool {
        self.loads_projects_lazily
    }

    /// How long after a change the server may take to start diagnosing the documents that
    /// did not change, with nothing yet to show it is at work; once it is, its progress
    /// says so. gopls diagnoses the packages that depend on a change only after its
    /// `diagnosticsDelay` (1 s by default, set to 0 here) and reports it as progress only
    /// with `verboseWorkDoneProgress` (set here), so a document's list taken at the first
    /// quiet was its list from before the change (go-cmp: `report_reflect.go` "no
    /// diagnostics" right after the signature it calls changed). `None`: the server's own
    /// quiet (`settle_ms`) says it.
    pub fn dependents_delay(&self) -> Option<std::time::Duration> {
        self.gopls
            .then_some(std::time::Duration::from_millis(1_000))
    }

    /// Whether the server keeps an index of files it is not told about and watches no files
    /// itself (clangd: its background index is built once; a file changed on disk is seen
    /// only when it is opened): such files are opened for it (`crate::outside`), a deleted
    /// one as an empty document, which hides what the index held for it.
    pub fn opens_unwatched(&self) -> bool {
        self.clangd
    }
}
