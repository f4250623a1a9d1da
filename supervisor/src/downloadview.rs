//! `toolvisor downloads [--watch]`: the download jobs for an operator — a text table of each
//! job and its files, or, with `--watch` on a terminal, indicatif progress bars redrawn until
//! every job has ended (plain tables on change when stdout is not a terminal).

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::{Value as Json, json};
use toolvisor_protocol::client::Client;
use toolvisor_protocol::wire::Outcome;

/// The jobs `list_downloads` answers, or its error as text.
pub fn fetch(client: &mut Client) -> Result<Vec<Json>, String> {
    let reply = client
        .call("operator", "list_downloads", json!({}))
        .map_err(|e| format!("lost the daemon: {e}"))?;
    match reply.outcome {
        Outcome::Ok(v) => Ok(v.0["jobs"].as_array().cloned().unwrap_or_default()),
        Outcome::Err(e) => Err(e.to_string()),
    }
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
    if let Some(rate) = job["rate_bytes_per_s"].as_u64() {
        s.push_str(&format!(", {}/s", human(rate)));
    }
    if let Some(eta) = job["eta_s"].as_u64() {
        s.push_str(&format!(", {eta} s left"));
    }
    if let Some(e) = job["error"].as_str() {
        s.push_str(&format!(" — {e}"));
    }
    s
}

/// The jobs as text: a line per job, a bar per file under it.
pub fn render_text(jobs: &[Json]) -> String {
    if jobs.is_empty() {
        return "no download jobs\n".into();
    }
    let mut out = String::new();
    for job in jobs {
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
    let style = ProgressStyle::with_template(
        "{prefix:<14} {bar:30} {bytes:>10}/{total_bytes:<10} {binary_bytes_per_sec:>12} {eta:>4} {msg}",
    )
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
                            "{} [{}] {}{}",
                            row["repo"].as_str().unwrap_or("?"),
                            row["variant"].as_str().unwrap_or("?"),
                            row["state"].as_str().unwrap_or("?"),
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
