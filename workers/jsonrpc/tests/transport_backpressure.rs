//! The transport's queues are bounded: a server flooding notifications is held back (the
//! reader stops reading its stdout) while the owner is behind, and the answer behind the
//! flood still reaches its caller once the owner drains; a server that stops reading its
//! stdin fills the outgoing queue, and then notifications fail with `Backlog` instead of
//! queueing without end.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{BufReader, duplex};
use toolvisor_jsonrpc::{
    Incoming, Message, RpcError, Transport, TransportOptions, read_frame, write_frame,
};

const LONG: Duration = Duration::from_secs(30);
const FLOOD: usize = 5000;
const CAPACITY: usize = 8;

/// Lets every task that can run, run: on a current-thread runtime this is scheduling, not
/// time; 10,000 rounds are far more than the reader needs to swallow the whole flood if
/// nothing holds it back.
async fn let_everything_run() {
    for _ in 0..10_000 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_notification_flood_is_held_back_and_the_answer_behind_it_arrives() {
    let (client_stdin, peer_in) = duplex(1024);
    let (mut peer_out, client_stdout) = duplex(1024);
    let (_peer_err, client_stderr) = duplex(1024);
    let (client, mut incoming) = Transport::start(
        client_stdout,
        client_stdin,
        client_stderr,
        TransportOptions {
            incoming_capacity: CAPACITY,
            ..TransportOptions::default()
        },
    );
    let written = Arc::new(AtomicUsize::new(0));
    let peer_written = written.clone();
    // The fake server: reads our request, then floods `$/progress` before answering it.
    let peer = tokio::spawn(async move {
        let mut from_client = BufReader::new(peer_in);
        let frame = read_frame(&mut from_client, 1 << 20)
            .await
            .unwrap()
            .expect("the client's request");
        let Ok(Message::Request { id, .. }) = Message::parse(&frame) else {
            panic!("expected a request")
        };
        for i in 0..FLOOD {
            let note = Message::Notification {
                method: "$/progress".into(),
                params: json!({"token": "t", "value": {"kind": "report", "n": i}}),
            };
            let bytes = serde_json::to_vec(&note.to_json()).unwrap();
            write_frame(&mut peer_out, &bytes).await.unwrap();
            peer_written.fetch_add(1, Ordering::SeqCst);
        }
        let answer = Message::Response {
            id,
            result: Ok(json!("hover text")),
        };
        let bytes = serde_json::to_vec(&answer.to_json()).unwrap();
        write_frame(&mut peer_out, &bytes).await.unwrap();
        peer_out
    });
    let c2 = client.clone();
    let call =
        tokio::spawn(async move { c2.request("textDocument/hover", Value::Null, LONG).await });

    tokio::time::timeout(LONG, async {
        while incoming.len() < CAPACITY {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the incoming queue fills while the owner does not drain it");
    let_everything_run().await;
    assert_eq!(
        incoming.len(),
        CAPACITY,
        "the reader queued more than the incoming capacity"
    );
    let sent = written.load(Ordering::SeqCst);
    assert!(
        sent < FLOOD,
        "the server wrote its whole flood ({sent} notifications) although the owner read none: no backpressure"
    );

    // The owner catches up on its own task (it never waits for an answer): the flood drains
    // in order and the answer behind it reaches the caller.
    let drain = tokio::spawn(async move {
        let mut next = 0;
        while let Some(msg) = incoming.recv().await {
            match msg {
                Incoming::Notification { params, .. } => {
                    assert_eq!(params["value"]["n"], json!(next), "notifications in order");
                    next += 1;
                }
                Incoming::Closed { .. } => break,
                Incoming::Request { .. } => panic!("no server request expected"),
            }
        }
        next
    });
    assert_eq!(call.await.unwrap(), Ok(json!("hover text")));
    drop(peer.await.unwrap());
    assert_eq!(drain.await.unwrap(), FLOOD);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_server_that_stops_reading_fills_the_outgoing_queue_and_notify_says_so() {
    // The server never reads its stdin.
    let (client_stdin, _peer_in) = duplex(256);
    let (_peer_out, client_stdout) = duplex(256);
    let (_peer_err, client_stderr) = duplex(256);
    let (client, _incoming) = Transport::start(
        client_stdout,
        client_stdin,
        client_stderr,
        TransportOptions {
            outgoing_capacity: 4,
            ..TransportOptions::default()
        },
    );
    let text = "x".repeat(200);
    let mut refused = None;
    for i in 0..10_000 {
        match client.notify("textDocument/didChange", json!({"n": i, "text": text})) {
            Ok(()) => tokio::task::yield_now().await,
            Err(e) => {
                refused = Some((i, e));
                break;
            }
        }
    }
    let (accepted, error) =
        refused.expect("10,000 notifications queued for a server that reads none");
    assert!(accepted < 100, "{accepted} notifications were queued");
    assert_eq!(
        error,
        RpcError::Backlog {
            method: "textDocument/didChange".into(),
            queued: 4
        }
    );
    assert!(error.to_string().contains("not reading its input"));
    // A request waits for room within its own timeout, then says it timed out.
    assert_eq!(
        client
            .request("textDocument/hover", Value::Null, Duration::from_secs(5))
            .await,
        Err(RpcError::Timeout {
            method: "textDocument/hover".into(),
            after_ms: 5000
        })
    );
    assert_eq!(
        client.pending(),
        0,
        "the unsent request left the pending map"
    );
}
