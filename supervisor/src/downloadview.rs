//! `toolvisor downloads [--watch]`: the download jobs for an operator — a text table of each
//! job and its files, or, with `--watch` on a terminal, indicatif progress bars redrawn until
//! every job has ended (plain tables on change when stdout is not a terminal). The watch
//! screen draws the jobs not yet ended, moving before queued, and fits the terminal: ended
//! jobs (kept a day) are only counted, files go before jobs when rows run short. Jobs come in
//! id order (`dl2` before `dl10`). The rate and time left shown are the daemon's (over the
//! last seconds of the run, none until that means something), never indicatif's own estimate:
//! a resumed job's bar jumps to the bytes already on disk at once, which indicatif would show
//! as terabytes per second.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::{Value as Json, json};
use toolvisor_protocol::client::Client;
use toolvisor_protocol::wire::Outcome;

/// The jobs `list_downloads` answers, in id order, or its error as text.
pub fn fetch(client: &mut Client) -> Result<Vec<Json>, String> {
    let reply = client
        .call("operator", "list_downloads", json!({}))
        .map_err(|e| format!("lost the daemon: {e}"))?;
    match reply.outcome {
        Outcome::Ok(v) => Ok(in_order(
            v.0["jobs"].as_array().cloned().unwrap_or_default(),
        )),
        Outcome::Err(e) => Err(e.to_string()),
    }
}

/// `jobs` by id, numbers compared as numbers (`dl2` before `dl10`).
fn in_order(mut jobs: Vec<Json>) -> Vec<Json> {
    jobs.sort_by(|a, b| {
        let id = |j: &Json| j["job_id"].as_str().unwrap_or_default().to_string();
        let (a, b) = (id(a), id(b));
        toolvisor_downloads::id_order(&a).cmp(&toolvisor_downloads::id_order(&b))
    });
    jobs
}

/// The daemon's rate and time left of a running job (`, 1.2 MiB/s, 8 s left`), or nothing.
fn rate_text(job: &Json) -> String {
    let mut s = String::new();
    if let Some(rate) = job["rate_bytes_per_s"].as_u64() {
        s.push_str(&format!(", {}/s", human(rate)));
    }
    if let Some(eta) = job["eta_s"].as_u64() {
        s.push_str(&format!(", {eta} s left"));
    }
    s
}

fn human(bytes: u64) -> String {
    toolvisor_downloads::human(bytes)
}

fn finished(job: &Json) -> bool {
    matches!(job["state"].as_str(), Some("done" | "failed" | "cancelled"))
}

fn bar(done: u64, total: u64, width: usize) -> String {
    let filled = if total == 0 {
        width
    } else {
        ((done as u128 * width as u128) / total as u128) as usize
    };
    format!(
        "[{}{}]",
        "#".repeat(filled),
        "-".repeat(width - filled.min(width))
    )
}

/// One job's headline: id, repo, variant, state, bytes, rate, ETA, error.
fn headline(job: &Json) -> String {
    let done = job["bytes_done"].as_u64().unwrap_or(0);
    let total = job["bytes_total"].as_u64().unwrap_or(0);
    let mut s = format!(
        "{} {}@{} [{}] {} {:.1}% {} / {}",
        job["job_id"].as_str().unwrap_or("?"),
        job["repo"].as_str().unwrap_or("?"),
        job["revision"].as_str().unwrap_or("?"),
        job["variant"].as_str().unwrap_or("?"),
        job["state"].as_str().unwrap_or("?"),
        job["percent"].as_f64().unwrap_or(0.0),
        human(done),
        human(total)
    );
    s.push_str(&rate_text(job));
    if let Some(e) = job["error"].as_str() {
        s.push_str(&format!(" — {e}"));
    }
    s
}

/// The jobs as text, in id order: a line per job, a bar per file under it.
pub fn render_text(jobs: &[Json]) -> String {
    if jobs.is_empty() {
        return "no download jobs\n".into();
    }
    let mut out = String::new();
    for job in &in_order(jobs.to_vec()) {
        out.push_str(&headline(job));
        out.push('\n');
        for f in job["files"].as_array().into_iter().flatten() {
            let done = f["bytes_done"].as_u64().unwrap_or(0);
            let size = f["size"].as_u64().unwrap_or(0);
            out.push_str(&format!(
                "  {} {:<11} {:>10} / {:<10} {}\n",
                bar(done, size, 24),
                f["state"].as_str().unwrap_or("?"),
                human(done),
                human(size),
                f["name"].as_str().unwrap_or("?")
            ));
        }
    }
    out
}

/// One row of the watch screen.
#[derive(Clone, Debug, PartialEq)]
enum Row {
    /// A job (`job`) or one of its files (`file` set), as a progress bar.
    Bar { job: Json, file: Option<Json> },
    /// A line of text.
    Note(String),
}

impl Row {
    /// The bar's key (stable across redraws), or `None` for a note.
    fn key(&self) -> Option<String> {
        match self {
            Row::Bar { job, file } => {
                let id = job["job_id"].as_str().unwrap_or("?");
                Some(match file {
                    Some(f) => format!("{id}/{}", f["name"].as_str().unwrap_or("?")),
                    None => id.to_string(),
                })
            }
            Row::Note(_) => None,
        }
    }
}

/// What the watch screen shows on a terminal of `height` rows: the jobs not yet ended, moving
/// before queued (each in id order), each with its files while they fit; ended jobs (kept a
/// day) only counted on the last line. Past the height, files go first (their jobs stay),
/// then the latest jobs, each counted.
fn screen(jobs: &[Json], height: usize) -> Vec<Row> {
    let room = height.saturating_sub(1).max(2);
    // Moving (downloading, verifying, …) before waiting.
    let rank = |j: &Json| u8::from(j["state"].as_str() == Some("queued"));
    let mut live: Vec<&Json> = jobs.iter().filter(|j| !finished(j)).collect();
    live.sort_by_key(|j| rank(j));
    let ended = jobs.len() - live.len();
    let files = |j: &Json| j["files"].as_array().map_or(0, Vec::len);
    let with_files: usize = live.iter().map(|j| 1 + files(j)).sum();
    let show_files = with_files < room;
    let mut rows = Vec::new();
    let mut shown = 0;
    for job in &live {
        let need = 1 + if show_files { files(job) } else { 0 };
        if rows.len() + need > room - 1 && shown > 0 {
            break;
        }
        rows.push(Row::Bar {
            job: (*job).clone(),
            file: None,
        });
        if show_files {
            for f in job["files"].as_array().into_iter().flatten() {
                rows.push(Row::Bar {
                    job: (*job).clone(),
                    file: Some(f.clone()),
                });
            }
        }
        shown += 1;
    }
    let mut last = Vec::new();
    if shown < live.len() {
        last.push(format!("{} more not ended", live.len() - shown));
    }
    if !show_files && !live.is_empty() {
        last.push("files hidden to fit the terminal".into());
    }
    if ended > 0 {
        last.push(format!("{ended} ended (`toolvisor downloads` lists them)"));
    }
    if !last.is_empty() {
        rows.push(Row::Note(format!("… {}", last.join("; "))));
    }
    rows
}

/// The key of the watch screen's last line.
const NOTE: &str = "\u{0}note";

/// Redraw until every job listed has ended (at once when there are none).
pub fn watch(mut client: Client) -> Result<(), String> {
    let tty = std::io::stdout().is_terminal();
    let multi = MultiProgress::with_draw_target(if tty {
        ProgressDrawTarget::stdout()
    } else {
        ProgressDrawTarget::hidden()
    });
    let style =
        ProgressStyle::with_template("{prefix:<14} {bar:30} {bytes:>10}/{total_bytes:<10} {msg}")
            .map_err(|e| e.to_string())?;
    let mut bars: BTreeMap<String, ProgressBar> = BTreeMap::new();
    let mut last_text = String::new();
    loop {
        let jobs = fetch(&mut client)?;
        if tty {
            let height = crossterm::terminal::size().map_or(24, |(_, rows)| rows as usize);
            let rows = screen(&jobs, height);
            // Bars that left the screen (their job ended, or they no longer fit) go.
            let keep: std::collections::BTreeSet<String> =
                rows.iter().filter_map(Row::key).collect();
            bars.retain(|key, pb| {
                let stays = keep.contains(key) || key == NOTE;
                if !stays {
                    pb.finish_and_clear();
                    multi.remove(pb);
                }
                stays
            });
            for row in &rows {
                let key = row.key().unwrap_or_else(|| NOTE.to_string());
                let pb = bars.entry(key).or_insert_with(|| {
                    let pb = multi.add(ProgressBar::new(0));
                    pb.set_style(style.clone());
                    pb
                });
                match row {
                    Row::Note(text) => {
                        pb.set_style(
                            ProgressStyle::with_template("{msg}").map_err(|e| e.to_string())?,
                        );
                        pb.set_message(text.clone());
                    }
                    Row::Bar { job, file: None } => {
                        pb.set_length(job["bytes_total"].as_u64().unwrap_or(0));
                        pb.set_position(job["bytes_done"].as_u64().unwrap_or(0));
                        pb.set_prefix(job["job_id"].as_str().unwrap_or("?").to_string());
                        pb.set_message(format!(
                            "{} [{}] {}{}{}",
                            job["repo"].as_str().unwrap_or("?"),
                            job["variant"].as_str().unwrap_or("?"),
                            job["state"].as_str().unwrap_or("?"),
                            rate_text(job),
                            job["error"]
                                .as_str()
                                .map(|e| format!(" — {e}"))
                                .unwrap_or_default()
                        ));
                    }
                    Row::Bar { file: Some(f), .. } => {
                        pb.set_length(f["size"].as_u64().unwrap_or(0));
                        pb.set_position(f["bytes_done"].as_u64().unwrap_or(0));
                        pb.set_prefix("  file");
                        pb.set_message(format!(
                            "{} {}",
                            f["state"].as_str().unwrap_or("?"),
                            f["name"].as_str().unwrap_or("?")
                        ));
                    }
                }
            }
            if !rows.iter().any(|r| matches!(r, Row::Note(_)))
                && let Some(pb) = bars.remove(NOTE)
            {
                pb.finish_and_clear();
                multi.remove(&pb);
            }
        } else {
            let text = render_text(&jobs);
            if text != last_text {
                print!("{text}");
                last_text = text;
            }
        }
        if jobs.iter().all(finished) {
            for pb in bars.values() {
                pb.abandon();
            }
            if tty {
                print!("{}", render_text(&jobs));
            }
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: &str, rate: Option<u64>) -> Json {
        json!({"job_id": id, "repo": "o/m", "revision": "main", "variant": "Q4_0",
            "state": "downloading", "percent": 50.0, "bytes_done": 5, "bytes_total": 10,
            "rate_bytes_per_s": rate, "eta_s": rate.map(|_| 3), "files": []})
    }

    fn with(id: &str, state: &str, files: usize) -> Json {
        let mut j = job(id, None);
        j["state"] = json!(state);
        j["files"] = (0..files)
            .map(|i| json!({"name": format!("f{i}.gguf"), "state": state, "bytes_done": 1, "size": 2}))
            .collect();
        j
    }

    fn keys(rows: &[Row]) -> Vec<String> {
        rows.iter()
            .map(|r| match r {
                Row::Note(t) => t.clone(),
                bar => bar.key().unwrap(),
            })
            .collect()
    }

    #[test]
    fn the_watch_shows_moving_jobs_first_counts_ended_ones_and_fits_the_terminal() {
        // A day of ended jobs before the ones that move: only the moving ones are drawn.
        let mut jobs: Vec<Json> = (1..=40)
            .map(|i| with(&format!("dl{i}"), "done", 3))
            .collect();
        jobs.push(with("dl41", "queued", 1));
        jobs.push(with("dl42", "downloading", 2));
        let rows = screen(&jobs, 30);
        assert_eq!(
            keys(&rows),
            [
                "dl42",
                "dl42/f0.gguf",
                "dl42/f1.gguf",
                "dl41",
                "dl41/f0.gguf",
                "… 40 ended (`toolvisor downloads` lists them)",
            ]
        );
        // A small terminal: files go first, then the latest jobs, each counted.
        let many: Vec<Json> = (1..=10)
            .map(|i| with(&format!("dl{i}"), "downloading", 4))
            .collect();
        let rows = screen(&many, 8);
        assert!(rows.len() <= 7, "{:?}", keys(&rows));
        assert!(
            rows.iter()
                .all(|r| !matches!(r, Row::Bar { file: Some(_), .. }))
        );
        let last = keys(&rows).pop().unwrap();
        assert!(
            last.contains("more not ended") && last.contains("files hidden"),
            "{last}"
        );
        // Nothing left to move: only the count.
        let rows = screen(&jobs[..3], 30);
        assert_eq!(
            keys(&rows),
            ["… 3 ended (`toolvisor downloads` lists them)"]
        );
    }

    #[test]
    fn jobs_are_listed_by_their_number_with_the_daemons_rate() {
        let jobs: Vec<Json> = ["dl1", "dl10", "dl129", "dl13", "dl2"]
            .into_iter()
            .map(|id| job(id, None))
            .collect();
        let text = render_text(&jobs);
        let order: Vec<&str> = text
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        assert_eq!(order, ["dl1", "dl2", "dl10", "dl13", "dl129"], "{text}");
        assert!(
            !text.contains("/s"),
            "no rate before the daemon has one: {text}"
        );
        let one = render_text(&[job("dl3", Some(3 << 20))]);
        assert!(one.contains(", 3.0 MiB/s, 3 s left"), "{one}");
    }
}
