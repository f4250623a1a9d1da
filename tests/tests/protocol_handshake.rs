//! The handshake in both codecs, version refusal, and the frames around tool lists and pings.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;

use serde_json::json;
use toolvisor_protocol::client::Client;
use toolvisor_protocol::codec::{self, Codec};
use toolvisor_protocol::error::ErrorKind;
use toolvisor_protocol::wire::{ClientFrame, DaemonFrame, Tier};
use toolvisor_tests::{TestDaemon, ok_of, options};

#[test]
fn both_codecs_handshake_list_tools_and_call() {
    let d = TestDaemon::start("");
    for codec in [Codec::Bincode, Codec::Json] {
        let mut c = d.client(codec, Tier::Exec, true);
        let w = c.welcome().clone();
        assert_eq!(w.codec, codec);
        assert_eq!(w.protocol_version, toolvisor_protocol::PROTOCOL_VERSION);
        let names: Vec<_> = w.tools.iter().map(|t| t.name.as_str()).collect();
        assert!(
            names.contains(&"bash") && names.contains(&"process"),
            "{names:?}"
        );
        match c.request(&ClientFrame::Ping { nonce: 42 }).unwrap() {
            DaemonFrame::Pong { nonce } => assert_eq!(nonce, 42),
            other => panic!("expected Pong, got {other:?}"),
        }
        let reply = c
            .call_with(
                "conv",
                "bash",
                json!({"command": "printf 'héllo %s' $((6*7))"}),
                |_| true,
            )
            .unwrap();
        assert_eq!(ok_of(&reply)["stdout"], "héllo 42");
        match c.request(&ClientFrame::ListTools { all: true }).unwrap() {
            DaemonFrame::Tools { tools } => {
                let vibe = tools
                    .iter()
                    .find(|t| t.name == "vibe_spawn")
                    .expect("vibe_spawn registered");
                assert!(!vibe.available);
                assert!(
                    vibe.unavailable_reason
                        .as_deref()
                        .unwrap()
                        .contains("vibe mode is off")
                );
                let downloads = tools
                    .iter()
                    .find(|t| t.name == "list_downloads")
                    .expect("list_downloads registered");
                assert!(downloads.available);
            }
            other => panic!("expected Tools, got {other:?}"),
        }
    }
}

#[test]
fn a_version_mismatch_is_refused_naming_both_versions() {
    let d = TestDaemon::start("");
    let mut opts = options(Codec::Json, Tier::Read, false);
    opts.protocol_version = 999;
    match Client::connect(&d.socket, opts) {
        Err(toolvisor_protocol::client::ClientError::Refused(e)) => {
            assert_eq!(e.kind, ErrorKind::VersionMismatch);
            assert!(
                e.message.contains("999")
                    && e.message
                        .contains(&toolvisor_protocol::PROTOCOL_VERSION.to_string()),
                "{}",
                e.message
            );
        }
        Err(e) => panic!("expected a refusal, got {e}"),
        Ok(_) => panic!("a client of protocol 999 was accepted"),
    }
    // The daemon is still fine.
    d.client(Codec::Bincode, Tier::Read, false);
}

#[test]
fn a_raw_json_client_needs_nothing_but_a_socket() {
    let d = TestDaemon::start("");
    let mut s = UnixStream::connect(&d.socket).unwrap();
    let send = |s: &mut UnixStream, text: &str| {
        s.write_all(&(text.len() as u32).to_be_bytes()).unwrap();
        s.write_all(text.as_bytes()).unwrap();
    };
    let recv = |s: &mut UnixStream| -> serde_json::Value {
        let mut len = [0u8; 4];
        s.read_exact(&mut len).unwrap();
        let mut buf = vec![0u8; u32::from_be_bytes(len) as usize];
        s.read_exact(&mut buf).unwrap();
        serde_json::from_slice(&buf).unwrap()
    };
    send(
        &mut s,
        r#"{"hello":{"protocol_version":1,"codec":"json","client_kind":"harness","surface":{"max_tier":"read"}}}"#,
    );
    let welcome = recv(&mut s);
    let tools = welcome["welcome"]["tools"]
        .as_array()
        .expect("tools in welcome");
    // A read surface sees no exec tools.
    assert!(tools.iter().all(|t| t["tier"] == "read"), "{tools:?}");
    // The Welcome names the tools without their schemas, which come with `list_tools`: a
    // connection that only calls does not pay for them.
    assert!(
        tools
            .iter()
            .all(|t| t["schema"].is_null() && t.get("output_schema").is_none_or(|o| o.is_null())),
        "{tools:?}"
    );
    let welcome_len = welcome.to_string().len();
    send(&mut s, r#"{"list_tools":{"all":false}}"#);
    let listed = recv(&mut s);
    let full = listed["tools"]["tools"].as_array().expect("tools");
    assert_eq!(full.len(), tools.len(), "{listed}");
    assert!(
        full.iter().all(|t| t["schema"]["type"] == "object"),
        "{listed}"
    );
    assert!(
        welcome_len * 4 < listed.to_string().len(),
        "the Welcome ({welcome_len} bytes) is not much smaller than the list with schemas ({})",
        listed.to_string().len()
    );
    send(
        &mut s,
        r#"{"call":{"id":7,"conversation":"c","tool":"bash","args":{"command":"true"}}}"#,
    );
    let result = recv(&mut s);
    assert_eq!(result["result"]["id"], 7);
    assert_eq!(result["result"]["outcome"]["err"]["kind"], "surface_denied");
    send(&mut s, r#""status""#);
    let status = recv(&mut s);
    assert_eq!(status["status"]["pid"], d.pid());
}

#[test]
fn the_first_frame_must_be_a_hello() {
    let d = TestDaemon::start("");
    let mut s = UnixStream::connect(&d.socket).unwrap();
    let frame = codec::encode_frame(Codec::Json, &ClientFrame::Status, 1 << 20).unwrap();
    s.write_all(&frame).unwrap();
    let payload = codec::read_frame(&mut s, 1 << 20).unwrap();
    match codec::decode::<DaemonFrame>(Codec::Json, &payload).unwrap() {
        DaemonFrame::Refused(e) => assert!(e.message.contains("must be a Hello"), "{}", e.message),
        other => panic!("expected a refusal, got {other:?}"),
    }
}
