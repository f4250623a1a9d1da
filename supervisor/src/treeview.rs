//! Showing the supervisor tree to a person: a fixed-width text table, redrawn on every
//! change by `toolvisor tree --watch` (a ratatui screen on a terminal, plain text otherwise).

use std::io::{IsTerminal, Write};
use std::sync::mpsc;
use std::time::Duration;

use toolvisor_protocol::client::Client;
use toolvisor_protocol::tree::TreeSnapshot;
use toolvisor_protocol::wire::{ClientFrame, DaemonFrame, Topic};

fn human_ms(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0 => format!("{ms}ms"),
        1..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

fn human_bytes(b: u64) -> String {
    match b {
        0..=1023 => format!("{b}B"),
        1024..=1_048_575 => format!("{:.1}K", b as f64 / 1024.0),
        _ => format!("{:.1}M", b as f64 / 1_048_576.0),
    }
}

/// The tree as a table, one node per line, children indented under their parent.
pub fn render_text(snapshot: &TreeSnapshot) -> String {
    let rows: Vec<_> = snapshot
        .root
        .walk()
        .into_iter()
        .map(|(depth, node)| {
            (
                format!("{}{} {}", "  ".repeat(depth), node.kind, node.id),
                node,
            )
        })
        .collect();
    // The name column is as wide as the widest name (ids can be long: a server's root path).
    let w = rows
        .iter()
        .map(|(name, _)| name.chars().count())
        .max()
        .unwrap_or(0)
        .max(28);
    let mut out = format!(
        "{:<w$} {:>8} {:<9} {:>7} {:>7} {:>4} {:>5} {:>7}  {}\n",
        "KIND/ID", "PID", "STATE", "UPTIME", "TTL", "RST", "CALLS", "RSS", "DETAIL"
    );
    for (name, node) in rows {
        let mut detail = node.detail.clone();
        if let Some(err) = &node.last_error {
            detail = format!("{detail} [last error: {err}]");
        }
        out.push_str(&format!(
            "{:<w$} {:>8} {:<9} {:>7} {:>7} {:>4} {:>5} {:>7}  {}\n",
            name,
            node.pid
                .map(|p| p.to_string())
                .unwrap_or_else(|| "-".into()),
            node.state.as_str(),
            human_ms(node.uptime_ms),
            node.ttl_left_ms.map(human_ms).unwrap_or_else(|| "-".into()),
            node.restarts,
            node.mailbox,
            node.rss_bytes
                .map(human_bytes)
                .unwrap_or_else(|| "-".into()),
            detail.trim()
        ));
    }
    out
}

/// Subscribe to tree updates and redraw on each until the daemon goes away (or `q`).
pub fn watch(mut client: Client) -> anyhow::Result<()> {
    client.send(&ClientFrame::Subscribe { topic: Topic::Tree })?;
    let (tx, rx) = mpsc::channel::<Result<TreeSnapshot, String>>();
    std::thread::spawn(move || {
        loop {
            match client.recv() {
                Ok(DaemonFrame::TreeUpdate(snap)) | Ok(DaemonFrame::Tree(snap)) => {
                    if tx.send(Ok(snap)).is_err() {
                        return;
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    let _ = tx.send(Err(e.to_string()));
                    return;
                }
            }
        }
    });
    if std::io::stdout().is_terminal() {
        watch_tui(rx)
    } else {
        let mut stdout = std::io::stdout();
        for update in rx {
            match update {
                Ok(snap) => {
                    writeln!(
                        stdout,
                        "--- generation {} ---\n{}",
                        snap.generation,
                        render_text(&snap)
                    )?;
                    stdout.flush()?;
                }
                Err(e) => anyhow::bail!("lost the daemon: {e}"),
            }
        }
        Ok(())
    }
}

fn watch_tui(rx: mpsc::Receiver<Result<TreeSnapshot, String>>) -> anyhow::Result<()> {
    use crossterm::event::{self, Event, KeyCode, KeyModifiers};
    use ratatui::text::Line;
    use ratatui::widgets::{Block, Borders, Paragraph};

    let mut terminal = ratatui::init();
    let result = (|| -> anyhow::Result<()> {
        let mut text = String::from("waiting for the first snapshot...");
        let mut title = String::from(" toolvisor tree ");
        loop {
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(Ok(snap)) => {
                    text = render_text(&snap);
                    title = format!(
                        " toolvisor tree — generation {} — q quits ",
                        snap.generation
                    );
                }
                Ok(Err(e)) => anyhow::bail!("lost the daemon: {e}"),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(()),
            }
            terminal.draw(|frame| {
                let lines: Vec<Line> = text.lines().map(|l| Line::raw(l.to_string())).collect();
                let widget = Paragraph::new(lines)
                    .block(Block::default().borders(Borders::ALL).title(title.clone()));
                frame.render_widget(widget, frame.area());
            })?;
            while event::poll(Duration::ZERO)? {
                if let Event::Key(key) = event::read()? {
                    let ctrl_c = key.code == KeyCode::Char('c')
                        && key.modifiers.contains(KeyModifiers::CONTROL);
                    if key.code == KeyCode::Char('q') || key.code == KeyCode::Esc || ctrl_c {
                        return Ok(());
                    }
                }
            }
        }
    })();
    ratatui::restore();
    result
}
