//! `serve --log-format json`: every line on stderr is one JSON object, and a call's lines
//! carry its call id, session, conversation, tool and resource, the keys the audit log uses,
//! so the two join.

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value as Json, json};
use toolvisor_protocol::client::Client;
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::wire::{Outcome, Tier};
use toolvisor_tests::{bin, options, wait_for};

#[test]
fn json_log_lines_carry_the_call_and_join_with_the_audit_log() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("toolvisor.sock");
    let config = dir.path().join("config.toml");
    let state = dir.path().join("state");
    std::fs::write(
        &config,
        format!(
            "state_dir = {:?}\n[policy]\ndeny = [\"bash\"]\n",
            state.display().to_string()
        ),
    )
    .unwrap();
    let log = dir.path().join("daemon.log");
    let mut daemon = Command::new(bin())
        .args(["serve", "--log-format", "json", "--socket"])
        .arg(&socket)
        .arg("--config")
        .arg(&config)
        .env("TOOLVISOR_LOG", "debug")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut client = wait_for("the daemon to serve", Duration::from_secs(20), || {
        Client::connect(&socket, options(Codec::Json, Tier::Exec, true)).ok()
    });
    let reply = client
        .call_with("conv-json", "ls", json!({"path": "."}), |_| true)
        .unwrap();
    assert!(matches!(reply.outcome, Outcome::Ok(_)));
    // A denied call: the audit log records it.
    let denied = client
        .call_with("conv-json", "bash", json!({"command": "true"}), |_| true)
        .unwrap();
    assert!(matches!(denied.outcome, Outcome::Err(_)));
    drop(client);
    toolvisor_tests::sigterm(daemon.id()).expect("SIGTERM");
    wait_for("the daemon to exit", Duration::from_secs(20), || {
        daemon.try_wait().ok().flatten()
    });

    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<Json> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert!(lines.len() > 3, "{text}");
    // One key once per object: ractor's actor span has a `name` field beside the span's own
    // name, and `jq` keeps only the last of two.
    for l in text.lines() {
        if let Err(e) = serde_json::from_str::<NoDuplicateKeys>(l) {
            panic!("{e}: {l}");
        }
    }
    assert!(
        lines
            .iter()
            .any(|l| l["span"]["actor"] == "root" && l["span"]["name"] == "Actor"),
        "no line names its actor under span.actor:\n{text}"
    );
    let ended = |tool: &str| {
        lines
            .iter()
            .find(|l| l["fields"]["message"] == "call ended" && l["span"]["tool"] == tool)
            .unwrap_or_else(|| panic!("no `call ended` line of {tool}:\n{text}"))
            .clone()
    };
    let ls = ended("ls");
    assert_eq!(ls["span"]["conversation"], "conv-json");
    assert_eq!(ls["span"]["resource"], "files");
    assert!(
        ls["span"]["call"].is_u64() && ls["span"]["session"].is_u64(),
        "{ls}"
    );
    assert_eq!(ls["fields"]["outcome"], "ok");

    let bash = ended("bash");
    assert_eq!(bash["fields"]["outcome"], "policy_denied");
    let audit = std::fs::read_to_string(state.join("audit.jsonl"))
        .unwrap_or_else(|e| panic!("no audit log in {}: {e}", state.display()));
    let record: Json = audit
        .lines()
        .filter_map(|l| serde_json::from_str::<Json>(l).ok())
        .find(|r| r["tool"] == "bash")
        .unwrap_or_else(|| panic!("no audit record of the denied call:\n{audit}"));
    for key in ["call", "session", "conversation"] {
        assert_eq!(record[key], bash["span"][key], "{key}: {record} vs {bash}");
    }
}

/// Any JSON value, refused when an object repeats a key.
struct NoDuplicateKeys;

impl<'de> serde::Deserialize<'de> for NoDuplicateKeys {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = NoDuplicateKeys;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> Result<Self::Value, A::Error> {
                let mut seen = std::collections::HashSet::new();
                while let Some(k) = m.next_key::<String>()? {
                    if !seen.insert(k.clone()) {
                        return Err(serde::de::Error::custom(format!("duplicate key {k:?}")));
                    }
                    m.next_value::<NoDuplicateKeys>()?;
                }
                Ok(NoDuplicateKeys)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut s: A,
            ) -> Result<Self::Value, A::Error> {
                while s.next_element::<NoDuplicateKeys>()?.is_some() {}
                Ok(NoDuplicateKeys)
            }
            fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                Ok(NoDuplicateKeys)
            }
            fn visit_string<E>(self, _: String) -> Result<Self::Value, E> {
                Ok(NoDuplicateKeys)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(NoDuplicateKeys)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(NoDuplicateKeys)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(NoDuplicateKeys)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(NoDuplicateKeys)
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(NoDuplicateKeys)
            }
        }
        d.deserialize_any(V)
    }
}
