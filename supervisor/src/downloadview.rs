//! `toolvisor downloads [--watch]`: the download jobs for an operator — a text table of each
//! job and its files, or, with `--watch` on a terminal, indicatif progress bars redrawn until
//! every job has ended (plain tables on change when stdout is not a terminal). Jobs come in
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
            for job in &jobs {
                let id = job["job_id"].as_str().unwrap_or("?").to_string();
                let rows = std::iter::once((id.clone(), job.clone(), true)).chain(
                    job["files"].as_array().into_iter().flatten().map(|f| {
                        (
                            format!("{id}/{}", f["name"].as_str().unwrap_or("?")),
                            f.clone(),
                            false,
                        )
                    }),
                );
                for (key, row, is_job) in rows {
                    let pb = bars.entry(key).or_insert_with(|| {
                        let pb = multi.add(ProgressBar::new(0));
                        pb.set_style(style.clone());
                        pb
                    });
                    let (done, total) = if is_job {
                        (row["bytes_done"].as_u64(), row["bytes_total"].as_u64())
                    } else {
                        (row["bytes_done"].as_u64(), row["size"].as_u64())
                    };
                    pb.set_length(total.unwrap_or(0));
                    pb.set_position(done.unwrap_or(0));
                    if is_job {
                        pb.set_prefix(id.clone());
                        pb.set_message(format!(
                            "{} [{}] {}{}{}",
                            row["repo"].as_str().unwrap_or("?"),
                            row["variant"].as_str().unwrap_or("?"),
                            row["state"].as_str().unwrap_or("?"),
                            rate_text(&row),
                            row["error"]
                                .as_str()
                                .map(|e| format!(" — {e}"))
                                .unwrap_or_default()
                        ));
                    } else {
                        pb.set_prefix("  file");
                        pb.set_message(format!(
                            "{} {}",
                            row["state"].as_str().unwrap_or("?"),
                            row["name"].as_str().unwrap_or("?")
                        ));
                    }
                }
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
