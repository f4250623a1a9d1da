//! The opt-in Prometheus endpoint (`[metrics] listen`): counters kept as calls end
//! ([`calls::Metrics`], the daemon's) and gauges read from the live tree at each scrape
//! ([`render`]), encoded by `prometheus-client` in the OpenMetrics text format that
//! Prometheus scrapes. The endpoint answers `GET /metrics` on a loopback TCP port or a
//! private Unix socket; its HTTP is the few lines a scrape needs (one request per
//! connection, bounded header, a deadline), not a web server.
//!
//! It never listens beyond the host: a loopback address or a private Unix socket, anything else
//! refused at start (`crate::config::metrics`). Its labels are bounded: `tool` is a registered
//! tool's name or `unknown`, kinds and states are fixed sets, resource ids only of live resources.
//! A scrape reads the facts `status` and the tree give an ops client (counts, states, memory), no
//! command lines and no conversations; at most four scrapes are answered at once. A server
//! framework would be the largest dependency of the binary for this.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use toolvisor_protocol::tree::TreeSnapshot;

use crate::daemon::Daemon;

pub mod calls;

use calls::Labels;

fn gauge_family() -> Family<Labels, Gauge> {
    Family::default()
}

fn set(family: &Family<Labels, Gauge>, labels: &[(&str, &str)], value: u64) {
    let labels: Labels = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    family
        .get_or_create(&labels)
        .set(i64::try_from(value).unwrap_or(i64::MAX));
}

/// The whole exposition now: the call counters, and gauges read from the tree, the sessions,
/// the lanes and the result store at this moment.
pub async fn render(daemon: &Daemon) -> String {
    let mut registry = Registry::with_prefix("toolvisor");
    let m = daemon.metrics();
    registry.register(
        "calls",
        "Calls that ended, by tool and outcome (ok or the error kind)",
        m.calls.clone(),
    );
    registry.register_with_unit(
        "call_duration",
        "Call latency from admission to the queued result, by tool",
        Unit::Seconds,
        m.durations.clone(),
    );
    let snapshot = daemon.snapshot().await;
    register_resources(&mut registry, &snapshot);
    register_resource_events(&mut registry);
    register_daemon_gauges(&mut registry, daemon, &snapshot);
    let mut text = String::new();
    if let Err(e) = encode(&mut text, &registry) {
        tracing::error!(error = %e, "cannot encode the metrics");
    }
    text
}

/// The resources under each kind supervisor, by state, and each live one's memory.
fn register_resources(registry: &mut Registry, snapshot: &TreeSnapshot) {
    let resources = gauge_family();
    let rss = gauge_family();
    for sup in snapshot
        .root
        .children
        .iter()
        .filter(|n| n.kind == "supervisor")
    {
        let kind = sup.id.as_str();
        // Every state of every kind, zeros included, so a state emptying shows as 0.
        for state in [
            "starting", "ready", "busy", "backoff", "failed", "stopping", "exited",
        ] {
            let n = sup
                .children
                .iter()
                .filter(|c| c.state.as_str() == state)
                .count();
            set(&resources, &[("kind", kind), ("state", state)], n as u64);
        }
        for child in &sup.children {
            if let Some(bytes) = child.rss_bytes {
                set(&rss, &[("kind", kind), ("id", &child.id)], bytes);
            }
        }
    }
    registry.register(
        "resources",
        "Resources under each kind supervisor, by state",
        resources,
    );
    registry.register_with_unit(
        "resource_rss",
        "Resident memory of each live resource's process tree",
        Unit::Bytes,
        rss,
    );
}

/// The supervisors' restarts and TTL expiries so far, by kind.
fn register_resource_events(registry: &mut Registry) {
    let restarts: Family<Labels, Counter> = Family::default();
    let expiries: Family<Labels, Counter> = Family::default();
    for (kind, event, n) in toolvisor_kit::status::events() {
        let family = match event {
            "restart" => &restarts,
            "ttl_expiry" => &expiries,
            _ => continue,
        };
        family.get_or_create(&vec![("kind".into(), kind)]).inc_by(n);
    }
    registry.register(
        "resource_restarts",
        "Restarts of resources by their supervisor, by kind",
        restarts,
    );
    registry.register(
        "ttl_expiries",
        "Resources stopped because their idle or hard TTL expired, by kind",
        expiries,
    );
}

/// The daemon's own gauges: sessions, calls in flight, lane queue, result store, memory,
/// draining.
fn register_daemon_gauges(registry: &mut Registry, daemon: &Daemon, snapshot: &TreeSnapshot) {
    // The one snapshot serves the session count too (`status` would take a second one).
    let sessions = snapshot
        .root
        .children
        .iter()
        .filter(|n| n.kind == "sessions")
        .map(|n| n.children.len() as u64)
        .sum::<u64>();
    let plain = |registry: &mut Registry, name: &str, help: &str, unit: Option<Unit>, v: u64| {
        let gauge: Gauge = Gauge::default();
        gauge.set(i64::try_from(v).unwrap_or(i64::MAX));
        match unit {
            Some(unit) => registry.register_with_unit(name, help, unit, gauge),
            None => registry.register(name, help, gauge),
        }
    };
    plain(registry, "sessions", "Connected clients", None, sessions);
    plain(
        registry,
        "calls_in_flight",
        "Calls running now, over every session",
        None,
        daemon.calls_in_flight(),
    );
    plain(
        registry,
        "lane_queue_depth",
        "Calls of serial tools (debug, eval) waiting for their conversation's lane",
        None,
        daemon.lanes().queued(),
    );
    plain(
        registry,
        "result_store",
        "Stored large results on disk",
        Some(Unit::Bytes),
        daemon.services().files.store.bytes(),
    );
    plain(
        registry,
        "daemon_rss",
        "Resident memory of the daemon itself",
        Some(Unit::Bytes),
        toolvisor_kit::process::rss_bytes(std::process::id()).unwrap_or(0),
    );
    plain(
        registry,
        "draining",
        "1 while the daemon drains before it exits",
        None,
        u64::from(daemon.is_draining()),
    );
}

pub use crate::config::metrics::Endpoint;

/// How long a scraper may take to send its request.
const REQUEST_DEADLINE: Duration = Duration::from_secs(5);
/// The most request bytes read (request line and headers).
const MAX_REQUEST: usize = 8 * 1024;
/// Scrapes answered at once; more wait for their turn.
const SCRAPES_AT_ONCE: usize = 4;

/// A bound endpoint, ready to [`serve`](Listener::serve).
pub enum Listener {
    Tcp(tokio::net::TcpListener),
    Unix(tokio::net::UnixListener, PathBuf),
}

impl Listener {
    /// Bind `endpoint`. A Unix socket goes in a private directory (0700, ours) with mode
    /// 0600; a stale socket file of a killed daemon is replaced.
    pub async fn bind(endpoint: &Endpoint) -> anyhow::Result<Listener> {
        match endpoint {
            Endpoint::Tcp(addr) => Ok(Listener::Tcp(
                tokio::net::TcpListener::bind(addr)
                    .await
                    .map_err(|e| anyhow::anyhow!("cannot listen for metrics on {addr}: {e}"))?,
            )),
            Endpoint::Unix(path) => {
                use std::os::unix::fs::PermissionsExt;
                if let Some(dir) = path.parent() {
                    toolvisor_kit::private::ensure_private_dir(
                        dir,
                        "the metrics socket directory",
                    )?;
                }
                if std::fs::symlink_metadata(path).is_ok()
                    && std::os::unix::net::UnixStream::connect(path).is_err()
                {
                    let _ = std::fs::remove_file(path);
                }
                let listener = tokio::net::UnixListener::bind(path).map_err(|e| {
                    anyhow::anyhow!("cannot listen for metrics on {}: {e}", path.display())
                })?;
                std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
                Ok(Listener::Unix(listener, path.clone()))
            }
        }
    }

    /// Answer scrapes until the task is dropped.
    pub async fn serve(self, daemon: Arc<Daemon>) {
        let permits = Arc::new(tokio::sync::Semaphore::new(SCRAPES_AT_ONCE));
        loop {
            let accepted: std::io::Result<Box<dyn Conn>> = match &self {
                Listener::Tcp(l) => l.accept().await.map(|(s, _)| Box::new(s) as Box<dyn Conn>),
                Listener::Unix(l, _) => l.accept().await.map(|(s, _)| Box::new(s) as Box<dyn Conn>),
            };
            let stream = match accepted {
                Ok(stream) => stream,
                Err(e) => {
                    tracing::warn!(error = %e, "metrics: accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let daemon = daemon.clone();
            let permits = permits.clone();
            tokio::spawn(async move {
                let Ok(_permit) = permits.acquire_owned().await else {
                    return;
                };
                if let Err(e) = answer(stream, &daemon).await {
                    tracing::debug!(error = %e, "metrics: scrape failed");
                }
            });
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Listener::Unix(_, path) = self {
            let _ = std::fs::remove_file(path);
        }
    }
}

trait Conn: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Conn for T {}

/// Read one request and answer it: `GET /metrics` gets the exposition, anything else 404 or
/// 405 with a line saying what is served.
async fn answer(mut stream: Box<dyn Conn>, daemon: &Daemon) -> std::io::Result<()> {
    let request = tokio::time::timeout(REQUEST_DEADLINE, read_head(&mut stream))
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "request deadline"))??;
    let mut parts = request.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let (status, content_type, body) = match (method, path) {
        ("GET" | "HEAD", "/metrics") => (
            "200 OK",
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            render(daemon).await,
        ),
        ("GET" | "HEAD", _) => (
            "404 Not Found",
            "text/plain; charset=utf-8",
            "toolvisor serves its metrics at /metrics\n".to_string(),
        ),
        _ => (
            "405 Method Not Allowed",
            "text/plain; charset=utf-8",
            "use GET /metrics\n".to_string(),
        ),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    if method != "HEAD" {
        stream.write_all(body.as_bytes()).await?;
    }
    stream.shutdown().await
}

/// The request line, once the whole head (up to the blank line) has arrived.
async fn read_head(stream: &mut Box<dyn Conn>) -> std::io::Result<String> {
    let mut buf = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.windows(4).any(|w| w == b"\r\n\r\n") || buf.windows(2).any(|w| w == b"\n\n") {
            break;
        }
        if buf.len() > MAX_REQUEST {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "request head too long",
            ));
        }
    }
    let text = String::from_utf8_lossy(&buf);
    Ok(text.lines().next().unwrap_or("").to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_loopback_ports_or_absolute_unix_paths() {
        assert_eq!(
            Endpoint::parse("127.0.0.1:9464"),
            Ok(Endpoint::Tcp("127.0.0.1:9464".parse().unwrap()))
        );
        assert!(Endpoint::parse("[::1]:9464").is_ok());
        assert_eq!(
            Endpoint::parse("unix:/run/toolvisor/metrics.sock"),
            Ok(Endpoint::Unix("/run/toolvisor/metrics.sock".into()))
        );
        let public = Endpoint::parse("0.0.0.0:9464").unwrap_err();
        assert!(public.contains("loopback"), "{public}");
        let relative = Endpoint::parse("unix:metrics.sock").unwrap_err();
        assert!(relative.contains("absolute"), "{relative}");
        let garbage = Endpoint::parse("metrics").unwrap_err();
        assert!(garbage.contains("HOST:PORT"), "{garbage}");
    }
}
