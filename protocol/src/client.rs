//! A small blocking client over a `std` Unix socket, for the CLI, the tests, the benchmarks
//! and the chaos runner. A harness in another language writes the same frames by hand.
//!
//! Before it sends a byte, the client checks the server's uid (`SO_PEERCRED`) and refuses a server
//! that is neither its own user's nor root's (`check_server_uid`), so nothing (a Hello, a workdir,
//! a call) reaches a socket another user put in its way; the daemon checks each peer's uid the same
//! way from its side. The TypeScript client package cannot read `SO_PEERCRED` from Node: it checks
//! the socket file's owner and its directory instead (`clients/typescript`).

use std::io::{BufReader, BufWriter};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use crate::codec::{self, Codec, CodecError};
use crate::error::ToolError;
use crate::value::Value;
use crate::wire::{
    ApprovalAnswer, ApprovalRequest, Call, ClientFrame, ClientKind, DaemonFrame, Event, Hello,
    Outcome, Surface, Tier, Welcome,
};
use crate::{DEFAULT_MAX_FRAME, PROTOCOL_VERSION};

/// How to introduce ourselves.
#[derive(Clone, Debug)]
pub struct ClientOptions {
    pub codec: Codec,
    pub client_kind: ClientKind,
    pub run_id: String,
    pub workdir: String,
    pub surface: Surface,
    pub max_frame: u32,
    pub protocol_version: u32,
    /// The credential the daemon gave this process (`TOOLVISOR_RUN_TOKEN`), if any.
    pub run_token: Option<String>,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            codec: Codec::Bincode,
            client_kind: ClientKind::Ops,
            run_id: String::new(),
            workdir: std::env::current_dir()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            surface: Surface {
                max_tier: Tier::Exec,
                approvals: false,
                questions: false,
                bridge_tools: Vec::new(),
            },
            max_frame: DEFAULT_MAX_FRAME,
            protocol_version: PROTOCOL_VERSION,
            run_token: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot connect to the daemon at {path}: {source}")]
    Connect {
        path: String,
        source: std::io::Error,
    },
    /// The socket is served by a process of another user: nothing was sent to it.
    #[error(
        "refusing the server at {path}: it runs as uid {server_uid}, this client as uid {our_uid}; nothing was sent (a toolvisor daemon serves its own user or runs as root: check the socket path, or start your own daemon with `toolvisor serve`)"
    )]
    ForeignServer {
        path: String,
        server_uid: u32,
        our_uid: u32,
    },
    #[error("cannot check who serves {path} (SO_PEERCRED): {source}; nothing was sent")]
    PeerCred { path: String, source: nix::Error },
    #[error("the daemon refused the connection: {0}")]
    Refused(ToolError),
    #[error("the daemon sent an unexpected frame: {0}")]
    Unexpected(String),
    #[error(transparent)]
    Codec(#[from] CodecError),
}

/// Refuse a server whose uid is neither ours nor root's, before anything is sent to it: a
/// socket path that another user can serve (a shared `/tmp`, a mistyped path) must not get
/// our Hello, our workdir or our calls. A root daemon serving a user is the one exception.
pub fn check_server_uid(stream: &UnixStream, path: &Path) -> Result<(), ClientError> {
    use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
    let cred = getsockopt(stream, PeerCredentials).map_err(|source| ClientError::PeerCred {
        path: path.display().to_string(),
        source,
    })?;
    let server_uid = cred.uid();
    let our_uid = nix::unistd::geteuid().as_raw();
    if server_uid == our_uid || server_uid == 0 {
        return Ok(());
    }
    Err(ClientError::ForeignServer {
        path: path.display().to_string(),
        server_uid,
        our_uid,
    })
}

/// A connected, handshaken client.
pub struct Client {
    reader: BufReader<UnixStream>,
    writer: BufWriter<UnixStream>,
    codec: Codec,
    max_frame: u32,
    welcome: Welcome,
    next_id: u64,
}

/// What a call produced: its events in order, and the outcome.
#[derive(Clone, Debug)]
pub struct CallReply {
    pub events: Vec<Event>,
    pub outcome: Outcome,
}

impl Client {
    /// Connect and handshake. The `Hello` is written in the chosen codec.
    pub fn connect(path: &Path, options: ClientOptions) -> Result<Client, ClientError> {
        let stream = UnixStream::connect(path).map_err(|source| ClientError::Connect {
            path: path.display().to_string(),
            source,
        })?;
        check_server_uid(&stream, path)?;
        let mut reader = BufReader::new(stream.try_clone().map_err(CodecError::Io)?);
        let mut writer = BufWriter::new(stream);
        let hello = ClientFrame::Hello(Hello {
            protocol_version: options.protocol_version,
            codec: options.codec,
            client_kind: options.client_kind,
            run_id: options.run_id,
            workdir: options.workdir,
            surface: options.surface,
            run_token: options.run_token,
        });
        // A refused peer may find the socket closed for writing before its Hello is out; the
        // refusal is still there to read, and it says why.
        let sent = codec::write_frame(&mut writer, options.codec, &hello, options.max_frame);
        let payload = match codec::read_frame(&mut reader, options.max_frame) {
            Ok(payload) => payload,
            Err(read_err) => return Err(sent.err().unwrap_or(read_err).into()),
        };
        match codec::decode::<DaemonFrame>(options.codec, &payload)? {
            DaemonFrame::Welcome(welcome) => Ok(Client {
                reader,
                writer,
                codec: options.codec,
                max_frame: welcome.max_frame.min(options.max_frame),
                welcome,
                next_id: 1,
            }),
            DaemonFrame::Refused(err) => Err(ClientError::Refused(err)),
            other => Err(ClientError::Unexpected(format!("{other:?}"))),
        }
    }

    pub fn welcome(&self) -> &Welcome {
        &self.welcome
    }

    /// Limit how long `recv` blocks; `None` blocks forever.
    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> std::io::Result<()> {
        self.reader.get_ref().set_read_timeout(timeout)
    }

    /// Another handle on the socket, for writing raw bytes (tests) or shutting a direction.
    pub fn raw(&self) -> std::io::Result<UnixStream> {
        self.reader.get_ref().try_clone()
    }

    pub fn send(&mut self, frame: &ClientFrame) -> Result<(), ClientError> {
        codec::write_frame(&mut self.writer, self.codec, frame, self.max_frame)?;
        Ok(())
    }

    pub fn recv(&mut self) -> Result<DaemonFrame, ClientError> {
        let payload = codec::read_frame(&mut self.reader, self.max_frame)?;
        Ok(codec::decode(self.codec, &payload)?)
    }

    /// A fresh call id.
    pub fn next_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// Send one call without waiting; returns its id.
    pub fn start_call(
        &mut self,
        conversation: &str,
        tool: &str,
        args: serde_json::Value,
    ) -> Result<u64, ClientError> {
        let id = self.next_id();
        self.send(&ClientFrame::Call(Call {
            id,
            conversation: conversation.to_string(),
            tool: tool.to_string(),
            args: Value(args),
        }))?;
        Ok(id)
    }

    /// Call a tool and wait for its result, answering approval requests with `approve`.
    pub fn call_with(
        &mut self,
        conversation: &str,
        tool: &str,
        args: serde_json::Value,
        mut approve: impl FnMut(&ApprovalRequest) -> bool,
    ) -> Result<CallReply, ClientError> {
        let id = self.start_call(conversation, tool, args)?;
        let mut events = Vec::new();
        loop {
            match self.recv()? {
                DaemonFrame::Result { id: got, outcome } if got == id => {
                    return Ok(CallReply { events, outcome });
                }
                DaemonFrame::Event { id: got, event } if got == id => events.push(event),
                DaemonFrame::ApprovalRequest(req) => {
                    let approved = approve(&req);
                    self.send(&ClientFrame::ApprovalAnswer(ApprovalAnswer {
                        request_id: req.request_id,
                        approved,
                        reason: (!approved).then(|| "declined by the client".to_string()),
                    }))?;
                }
                DaemonFrame::Error(err) => {
                    return Ok(CallReply {
                        events,
                        outcome: Outcome::Err(err),
                    });
                }
                _ => {}
            }
        }
    }

    /// Call a tool, declining every approval request.
    pub fn call(
        &mut self,
        conversation: &str,
        tool: &str,
        args: serde_json::Value,
    ) -> Result<CallReply, ClientError> {
        self.call_with(conversation, tool, args, |_| false)
    }

    /// Send a request frame (`ListTools`, `Tree`, `Status`, `Ping`) and return the first
    /// frame that is not an event of some other call.
    pub fn request(&mut self, frame: &ClientFrame) -> Result<DaemonFrame, ClientError> {
        self.send(frame)?;
        loop {
            match self.recv()? {
                DaemonFrame::Event { .. } | DaemonFrame::TreeUpdate(_) => {}
                other => return Ok(other),
            }
        }
    }
}
