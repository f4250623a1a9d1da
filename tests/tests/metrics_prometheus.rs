//! The opt-in metrics endpoint, scraped over its Unix socket and parsed with the Prometheus
//! project's own parser (`prometheus_client`'s OpenMetrics parser, in the test venv): the
//! exposition is well-formed, and its counters move with the calls made between two scrapes.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value as Json, json};
use toolvisor_protocol::wire::Outcome;
use toolvisor_tests::TestDaemon;

/// `GET path` over the endpoint's socket: (status line, content type, body).
fn get(socket: &Path, path: &str) -> (String, String, String) {
    let mut s = UnixStream::connect(socket).expect("connect to the metrics socket");
    write!(s, "GET {path} HTTP/1.1\r\nHost: toolvisor\r\n\r\n").unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").expect("an HTTP answer");
    let status = head.lines().next().unwrap_or("").to_string();
    let content_type = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Type: "))
        .unwrap_or("")
        .to_string();
    (status, content_type, body.to_string())
}

/// Every sample, as the reference parser reads it: `[name, labels, value]`.
fn parse(text: &str) -> Vec<(String, Json, f64)> {
    let python = toolvisor_tests::eval::python();
    let script = "import sys, json\n\
        from prometheus_client.openmetrics.parser import text_string_to_metric_families\n\
        out = []\n\
        for fam in text_string_to_metric_families(sys.stdin.read()):\n\
        \x20   for s in fam.samples:\n\
        \x20       out.append([s.name, s.labels, s.value])\n\
        print(json.dumps(out))\n";
    let mut child = Command::new(python)
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the Prometheus parser refused the exposition: {}\n--- exposition ---\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    let samples: Vec<(String, Json, f64)> = serde_json::from_slice(&out.stdout).unwrap();
    samples
}

fn value(samples: &[(String, Json, f64)], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .find(|(n, l, _)| n == name && labels.iter().all(|(k, v)| l[*k] == *v))
        .map(|s| s.2)
}

#[test]
fn the_exposition_parses_and_its_counters_move_with_the_calls() {
    let dir = tempfile::tempdir().unwrap();
    let metrics = dir.path().join("metrics").join("metrics.sock");
    let d = TestDaemon::start_in(
        dir,
        &format!("[metrics]\nlisten = \"unix:{}\"\n", metrics.display()),
    );
    let (status, content_type, body) = get(&metrics, "/metrics");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(
        content_type.starts_with("application/openmetrics-text"),
        "{content_type}"
    );
    let before = parse(&body);
    let ls_ok = [("tool", "ls"), ("outcome", "ok")];
    let read_missing = [("tool", "read"), ("outcome", "not_found")];
    let count = |s: &[(String, Json, f64)], l: &[(&str, &str)]| {
        value(s, "toolvisor_calls_total", l).unwrap_or(0.0)
    };

    for _ in 0..3 {
        d.ok("c", "ls", json!({"path": "."}));
    }
    match d.call("c", "read", json!({"path": "no-such-file.txt"})) {
        Outcome::Err(e) => assert_eq!(e.kind.as_str(), "not_found"),
        Outcome::Ok(v) => panic!("read of a missing file answered {v:?}"),
    }
    let started = d.ok(
        "c",
        "process",
        json!({"op": "start", "command": "sleep 300"}),
    );
    assert_eq!(started["state"], "running");

    let (_, _, body) = get(&metrics, "/metrics");
    let after = parse(&body);
    assert_eq!(
        count(&after, &ls_ok) - count(&before, &ls_ok),
        3.0,
        "{body}"
    );
    assert_eq!(
        count(&after, &read_missing) - count(&before, &read_missing),
        1.0,
        "{body}"
    );
    // Every call of a tool lands in its latency histogram once.
    let ls_calls: f64 = after
        .iter()
        .filter(|(n, l, _)| n == "toolvisor_calls_total" && l["tool"] == "ls")
        .map(|s| s.2)
        .sum();
    assert_eq!(
        value(
            &after,
            "toolvisor_call_duration_seconds_count",
            &[("tool", "ls")]
        ),
        Some(ls_calls)
    );
    // Gauges read at the scrape: the running process, the scraping-free session count, the
    // result store, the daemon's memory.
    assert!(
        value(
            &after,
            "toolvisor_resources",
            &[("kind", "processes"), ("state", "ready")]
        )
        .or_else(|| value(
            &after,
            "toolvisor_resources",
            &[("kind", "processes"), ("state", "busy")]
        ))
        .is_some_and(|n| n >= 1.0),
        "{body}"
    );
    assert!(
        after
            .iter()
            .any(|(n, l, v)| n == "toolvisor_resource_rss_bytes"
                && l["kind"] == "processes"
                && *v > 0.0),
        "{body}"
    );
    for name in [
        "toolvisor_sessions",
        "toolvisor_result_store_bytes",
        "toolvisor_daemon_rss_bytes",
        "toolvisor_lane_queue_depth",
        "toolvisor_calls_in_flight",
        "toolvisor_draining",
    ] {
        assert!(value(&after, name, &[]).is_some(), "no {name}:\n{body}");
    }
    assert_eq!(value(&after, "toolvisor_draining", &[]), Some(0.0));

    let (status, _, _) = get(&metrics, "/elsewhere");
    assert_eq!(status, "HTTP/1.1 404 Not Found");
}

#[test]
fn a_metrics_endpoint_off_loopback_is_refused_at_start_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "[metrics]\nlisten = \"0.0.0.0:9464\"\n").unwrap();
    let out = Command::new(toolvisor_tests::bin())
        .arg("serve")
        .arg("--socket")
        .arg(dir.path().join("s.sock"))
        .arg("--config")
        .arg(&config)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("metrics.listen") && err.contains("loopback"),
        "{err}"
    );
}
