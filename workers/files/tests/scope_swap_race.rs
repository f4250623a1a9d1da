//! A directory inside the workdir swapped for a symlink to an outside directory,
//! as fast as the kernel allows, while reads (`read`, `ls`, `find`, `grep`) and writes (`write`,
//! `edit`) run on several threads through the real functions: none of them may reach the
//! outside directory, and each refused call says `out_of_scope`.
//!
//! 100,000 reads and 10,000 writes by default; `TOOLVISOR_RACE_READS` and
//! `TOOLVISOR_RACE_WRITES` change the counts (run longer to look harder).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;

use rustix::fs::{CWD, RenameFlags};
use toolvisor_files::image::ImageLimits;
use toolvisor_files::read::ReadLimits;
use toolvisor_files::search::{FindRequest, GrepRequest, SearchLimits, Visibility};
use toolvisor_files::{Cancel, Error, Scope};
use toolvisor_protocol::results::ReadResult;

const READERS: u64 = 3;
const WRITERS: u64 = 2;
const SECRET: &str = "OUTSIDE SECRET";

fn count(var: &str, default: u64) -> u64 {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// `base/work` is the workdir; `base/work/d` and `base/work/d.swap` (a symlink to
/// `base/outside`) trade places again and again. Both directories hold the same names.
struct Tree {
    _dir: tempfile::TempDir,
    work: PathBuf,
    outside: PathBuf,
    /// The outside directory's files and contents before the run.
    outside_before: BTreeMap<String, String>,
}

fn tree() -> Tree {
    // tmpfs when there is one: the writes fsync, and the race is about paths, not disks.
    let dir = match Path::new("/dev/shm").is_dir() {
        true => tempfile::tempdir_in("/dev/shm").unwrap(),
        false => tempfile::tempdir().unwrap(),
    };
    let work = dir.path().join("work");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(work.join("d")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(work.join("d/f.txt"), "inside\n").unwrap();
    std::fs::write(outside.join("f.txt"), format!("{SECRET}\n")).unwrap();
    std::fs::write(outside.join("outside-marker"), format!("{SECRET}\n")).unwrap();
    for t in 0..WRITERS {
        for d in [work.join("d"), outside.clone()] {
            std::fs::write(d.join(format!("e-{t}.txt")), "count=0\n").unwrap();
            std::fs::write(d.join(format!("o-{t}.txt")), "original\n").unwrap();
        }
    }
    std::os::unix::fs::symlink(&outside, work.join("d.swap")).unwrap();
    let outside_before = snapshot(&outside);
    Tree {
        _dir: dir,
        work,
        outside,
        outside_before,
    }
}

fn snapshot(dir: &Path) -> BTreeMap<String, String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let body = std::fs::read_to_string(e.path()).unwrap_or_default();
            (e.file_name().to_string_lossy().into_owned(), body)
        })
        .collect()
}

/// Sets its flag when dropped.
struct Stop<'a>(&'a AtomicBool);

impl Drop for Stop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// A kind of refused call: tool, `ToolError` kind, the crate error's variant.
type Refusal = (&'static str, String, String);

#[derive(Default)]
struct Tally {
    reads_ok: AtomicU64,
    writes_ok: AtomicU64,
    /// Reads that returned outside content or names, by tool.
    read_escapes: Mutex<BTreeMap<&'static str, u64>>,
    /// Every refused call: how many, with a sample message.
    errors: Mutex<BTreeMap<Refusal, (u64, String)>>,
}

impl Tally {
    fn error(&self, tool: &'static str, e: &Error) {
        let t = e.to_tool_error(tool);
        let mut errors = self.errors.lock().unwrap();
        let variant = format!("{e:?}");
        let variant = variant.split([' ', '{', '(']).next().unwrap_or_default();
        let slot = errors
            .entry((tool, format!("{:?}", t.kind), variant.to_string()))
            .or_insert((0, t.message));
        slot.0 += 1;
    }
}

#[test]
fn a_directory_swapped_for_a_symlink_never_leads_outside() {
    let reads = count("TOOLVISOR_RACE_READS", 100_000);
    let writes = count("TOOLVISOR_RACE_WRITES", 10_000);
    let t = tree();
    let stop = AtomicBool::new(false);
    let swaps = AtomicU64::new(0);
    let tally = Tally::default();
    let (d, swap) = (t.work.join("d"), t.work.join("d.swap"));

    thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                rustix::fs::renameat_with(CWD, &d, CWD, &swap, RenameFlags::EXCHANGE).unwrap();
                swaps.fetch_add(1, Ordering::Relaxed);
                // Let the calls run between swaps too (two cores are shared with them).
                thread::yield_now();
            }
        });
        // However the workers end (a panic included), the swapper stops with them.
        let _stop = Stop(&stop);
        let mut workers = Vec::new();
        for r in 0..READERS {
            let (tally, work) = (&tally, &t.work);
            workers.push(s.spawn(move || {
                let scope = Scope::new(work, &[], false).unwrap();
                let (limits, images) = (ReadLimits::default(), ImageLimits::default());
                let search = SearchLimits {
                    threads: 1,
                    ..SearchLimits::default()
                };
                for i in (r..reads).step_by(READERS as usize) {
                    let tool = match i % 10 {
                        0 => "ls",
                        3 => "find",
                        5 => "grep",
                        _ => "read",
                    };
                    let escaped = match i % 10 {
                        // `ls` of the swapped directory: an outside name is an escape.
                        0 => match toolvisor_files::list::ls(&scope, Some("d"), 100) {
                            Ok(l) => l.entries.iter().any(|e| e.name == "outside-marker"),
                            Err(e) => {
                                tally.error("ls", &e);
                                continue;
                            }
                        },
                        // `find` under it: an outside name is an escape.
                        3 => {
                            let req = FindRequest {
                                pattern: "*marker*",
                                path: Some("d"),
                                visibility: Visibility::default(),
                                max_results: 100,
                            };
                            match toolvisor_files::search::find(
                                &scope,
                                &req,
                                &search,
                                Cancel::default(),
                            ) {
                                Ok(f) => !f.paths.is_empty(),
                                Err(e) => {
                                    tally.error("find", &e);
                                    continue;
                                }
                            }
                        }
                        // `grep` under it: outside content is an escape.
                        5 => {
                            let req = GrepRequest {
                                pattern: "SECRET|inside",
                                path: Some("d"),
                                glob: None,
                                case: Default::default(),
                                context: 0,
                                max_results: 100,
                                visibility: Visibility::default(),
                                multiline: false,
                            };
                            match toolvisor_files::search::grep(
                                &scope,
                                &req,
                                &search,
                                Cancel::default(),
                            ) {
                                Ok(g) => g.output.contains(SECRET),
                                Err(e) => {
                                    tally.error("grep", &e);
                                    continue;
                                }
                            }
                        }
                        _ => match toolvisor_files::read::read(
                            &scope, "d/f.txt", None, None, &limits, &images,
                        ) {
                            Ok(ReadResult::Text(text)) => text.content.contains(SECRET),
                            Ok(_) => panic!("d/f.txt read as an image"),
                            Err(e) => {
                                tally.error("read", &e);
                                continue;
                            }
                        },
                    };
                    tally.reads_ok.fetch_add(1, Ordering::Relaxed);
                    if escaped {
                        *tally.read_escapes.lock().unwrap().entry(tool).or_default() += 1;
                    }
                }
            }));
        }
        for w in 0..WRITERS {
            let (tally, work) = (&tally, &t.work);
            workers.push(s.spawn(move || {
                let scope = Scope::new(work, &[], false).unwrap();
                let mut edits = 0u64;
                for i in (w..writes).step_by(WRITERS as usize) {
                    let done = match i % 3 {
                        // A new file in the swapped directory.
                        0 => toolvisor_files::write::write(
                            &scope,
                            &format!("d/w-{w}-{i}.txt"),
                            "written\n",
                        )
                        .map(|_| ()),
                        // An existing file replaced whole.
                        1 => toolvisor_files::write::write(
                            &scope,
                            &format!("d/o-{w}.txt"),
                            &format!("replaced {i}\n"),
                        )
                        .map(|_| ()),
                        // An existing file edited in place.
                        _ => toolvisor_files::edit::edit(
                            &scope,
                            &format!("d/e-{w}.txt"),
                            &format!("count={edits}\n"),
                            &format!("count={}\n", edits + 1),
                            false,
                        )
                        .map(|_| edits += 1),
                    };
                    match done {
                        Ok(()) => {
                            tally.writes_ok.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => tally.error(if i % 3 == 2 { "edit" } else { "write" }, &e),
                    }
                }
            }));
        }
        for worker in workers {
            worker.join().unwrap();
        }
    });

    // What reached the outside directory: new names (files or temp files) or new contents.
    let after = snapshot(&t.outside);
    let write_escapes: Vec<String> = after
        .iter()
        .filter(|(name, body)| t.outside_before.get(*name) != Some(*body))
        .map(|(name, _)| name.clone())
        .collect();
    let errors = tally.errors.into_inner().unwrap();
    let read_escapes = tally.read_escapes.into_inner().unwrap();
    let summary = format!(
        "{} swaps; {reads} reads: {} answered, {read_escapes:?} with outside content or names; \
         {writes} writes: {} done, {} outside ({:?}); refusals: {errors:#?}",
        swaps.load(Ordering::Relaxed),
        tally.reads_ok.load(Ordering::Relaxed),
        tally.writes_ok.load(Ordering::Relaxed),
        write_escapes.len(),
        write_escapes.iter().take(5).collect::<Vec<_>>(),
    );
    eprintln!("{summary}");
    assert!(read_escapes.is_empty(), "reads escaped: {summary}");
    assert!(write_escapes.is_empty(), "writes escaped: {summary}");
    // The race really ran: the directory moved, and calls got through as well as refused.
    assert!(swaps.load(Ordering::Relaxed) > 0, "{summary}");
    assert!(tally.reads_ok.load(Ordering::Relaxed) > 0, "{summary}");
    assert!(tally.writes_ok.load(Ordering::Relaxed) > 0, "{summary}");
    assert!(!errors.is_empty(), "no call was ever refused: {summary}");
    // A refusal is `out_of_scope` (resolved outside, or changed while the call ran), never
    // an I/O error or a miss that an unconfined open would have made.
    for ((tool, kind, _), (n, sample)) in &errors {
        assert_eq!(kind, "OutOfScope", "{n} {tool} calls: {sample}");
    }
}
