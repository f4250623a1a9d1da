//! The transport against an in-memory peer: answers, the server's own requests, cancel on
//! drop, timeouts, garbage on stdout, and every pending request failing at once on close.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncWriteExt, BufReader, DuplexStream, duplex};
use toolvisor_jsonrpc::{
    Id, Incoming, Message, RpcClient, RpcError, Transport, TransportOptions, read_frame,
    write_frame,
};

struct Peer {
    /// What the client writes (its stdin).
    from_client: BufReader<DuplexStream>,
    /// What the client reads (its stdout).
    to_client: DuplexStream,
    stderr: DuplexStream,
}

impl Peer {
    async fn recv(&mut self) -> Message {
        let bytes = read_frame(&mut self.from_client, 1 << 20)
            .await
            .unwrap()
            .expect("a frame from the client");
        Message::parse(&bytes).unwrap()
    }

    async fn send(&mut self, msg: Message) {
        let bytes = serde_json::to_vec(&msg.to_json()).unwrap();
        write_frame(&mut self.to_client, &bytes).await.unwrap();
    }
}

fn start() -> (RpcClient, tokio::sync::mpsc::Receiver<Incoming>, Peer) {
    let (client_stdin, peer_in) = duplex(1 << 16);
    let (peer_out, client_stdout) = duplex(1 << 16);
    let (peer_err, client_stderr) = duplex(1 << 16);
    let (client, incoming) = Transport::start(
        client_stdout,
        client_stdin,
        client_stderr,
        TransportOptions::default(),
    );
    let peer = Peer {
        from_client: BufReader::new(peer_in),
        to_client: peer_out,
        stderr: peer_err,
    };
    (client, incoming, peer)
}

const LONG: Duration = Duration::from_secs(30);

#[tokio::test]
async fn answers_reach_their_callers_and_server_requests_reach_the_owner() {
    let (client, mut incoming, mut peer) = start();
    let c2 = client.clone();
    let call = tokio::spawn(async move { c2.request("hover", json!({"x": 1}), LONG).await });
    let Message::Request { id, method, params } = peer.recv().await else {
        panic!("expected a request")
    };
    assert_eq!((method.as_str(), params), ("hover", json!({"x": 1})));
    // Garbage first: it is skipped, the answer still arrives.
    peer.to_client
        .write_all(b"oops not a header\r\n")
        .await
        .unwrap();
    peer.send(Message::Request {
        id: Id::Str("s1".into()),
        method: "workspace/configuration".into(),
        params: json!({"items": [{}]}),
    })
    .await;
    peer.send(Message::Response {
        id,
        result: Ok(json!("answer")),
    })
    .await;
    assert_eq!(call.await.unwrap(), Ok(json!("answer")));
    match incoming.recv().await.unwrap() {
        Incoming::Request { id, method, .. } => {
            assert_eq!(method, "workspace/configuration");
            client.respond(id, Ok(json!([null]))).unwrap();
        }
        other => panic!("unexpected {other:?}"),
    }
    let Message::Response { id, result } = peer.recv().await else {
        panic!("expected a response")
    };
    assert_eq!((id, result), (Id::Str("s1".into()), Ok(json!([null]))));
    peer.stderr.write_all(b"warming up\n").await.unwrap();
    drop(peer);
    assert!(matches!(
        incoming.recv().await.unwrap(),
        Incoming::Closed { .. }
    ));
}

#[tokio::test]
async fn server_errors_name_the_method() {
    let (client, _incoming, mut peer) = start();
    let c2 = client.clone();
    let call = tokio::spawn(async move { c2.request("rename", Value::Null, LONG).await });
    let Message::Request { id, .. } = peer.recv().await else {
        panic!()
    };
    peer.send(Message::Response {
        id,
        result: Err(toolvisor_jsonrpc::ResponseError {
            code: -32803,
            message: "cannot rename".into(),
        }),
    })
    .await;
    assert_eq!(
        call.await.unwrap(),
        Err(RpcError::Server {
            method: "rename".into(),
            code: -32803,
            message: "cannot rename".into()
        })
    );
}

#[tokio::test]
async fn a_dropped_request_is_cancelled_on_the_wire() {
    let (client, _incoming, mut peer) = start();
    let c2 = client.clone();
    let call = tokio::spawn(async move { c2.request("references", Value::Null, LONG).await });
    let Message::Request { id, .. } = peer.recv().await else {
        panic!()
    };
    call.abort();
    let _ = call.await;
    let Message::Notification { method, params } = peer.recv().await else {
        panic!("expected the cancel notification")
    };
    assert_eq!(method, "$/cancelRequest");
    assert_eq!(params["id"], id.to_json());
    assert_eq!(client.pending(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_request_times_out_and_is_cancelled() {
    let (client, _incoming, mut peer) = start();
    let c2 = client.clone();
    let call = tokio::spawn(async move {
        c2.request("slow", Value::Null, Duration::from_secs(5))
            .await
    });
    let Message::Request { id, .. } = peer.recv().await else {
        panic!()
    };
    let result = call.await.unwrap();
    assert!(
        matches!(result, Err(RpcError::Timeout { ref method, after_ms: 5000 }) if method == "slow"),
        "{result:?}"
    );
    let Message::Notification { method, params } = peer.recv().await else {
        panic!()
    };
    assert_eq!(
        (method.as_str(), &params["id"]),
        ("$/cancelRequest", &id.to_json())
    );
}

#[tokio::test]
async fn end_of_stream_fails_every_pending_request_at_once() {
    let (client, mut incoming, mut peer) = start();
    let mut calls = Vec::new();
    for i in 0..5 {
        let c = client.clone();
        calls.push(tokio::spawn(async move {
            c.request(&format!("m{i}"), Value::Null, LONG).await
        }));
    }
    for _ in 0..5 {
        peer.recv().await;
    }
    drop(peer);
    for call in calls {
        assert_eq!(call.await.unwrap(), Err(RpcError::StreamClosed));
    }
    assert!(matches!(
        incoming.recv().await.unwrap(),
        Incoming::Closed { .. }
    ));
    assert!(client.is_closed());
    assert_eq!(
        client.request("late", Value::Null, LONG).await,
        Err(RpcError::StreamClosed)
    );
}

#[tokio::test]
async fn after_shutdown_server_requests_get_null() {
    let (client, mut incoming, mut peer) = start();
    client.begin_shutdown();
    peer.send(Message::Request {
        id: Id::Num(7),
        method: "client/registerCapability".into(),
        params: json!({}),
    })
    .await;
    let Message::Response { id, result } = peer.recv().await else {
        panic!()
    };
    assert_eq!((id, result), (Id::Num(7), Ok(Value::Null)));
    drop(peer);
    assert!(matches!(
        incoming.recv().await.unwrap(),
        Incoming::Closed { .. }
    ));
}

#[tokio::test]
async fn an_oversized_frame_closes_the_transport() {
    let (client, mut incoming, mut peer) = start();
    peer.to_client
        .write_all(b"Content-Length: 999999999999\r\n\r\n")
        .await
        .unwrap();
    match incoming.recv().await.unwrap() {
        Incoming::Closed { reason } => assert!(reason.contains("exceeds the cap"), "{reason}"),
        other => panic!("unexpected {other:?}"),
    }
    assert!(client.is_closed());
}
