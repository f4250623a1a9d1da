//! The Streamable HTTP transport: rmcp's tower service (one `Bridge`, so one daemon
//! connection, per MCP session) served by hyper on a private Unix socket or a loopback port.

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;

use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::sync::CancellationToken;

use crate::{Bridge, BridgeError, Listen, Options};

/// The path MCP clients post to.
pub const PATH: &str = "/mcp";

/// Serve until `stop` is cancelled. `ready` gets the URL clients connect to (for a Unix
/// socket, `http://localhost/mcp` and the socket path) once the socket listens.
pub async fn serve_http(
    opts: Options,
    listen: Listen,
    stop: CancellationToken,
    ready: impl FnOnce(String),
) -> Result<(), BridgeError> {
    let opts = Arc::new(opts);
    let factory_opts = opts.clone();
    let config = StreamableHttpServerConfig::default().with_cancellation_token(stop.child_token());
    let service = StreamableHttpService::new(
        move || Ok(Bridge::new(factory_opts.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    match listen {
        Listen::Tcp(addr) => {
            let listener = tokio::net::TcpListener::bind(addr).await?;
            ready(format!("http://{}{PATH}", listener.local_addr()?));
            loop {
                let stream = tokio::select! {
                    _ = stop.cancelled() => return Ok(()),
                    accepted = listener.accept() => match accepted {
                        Ok((stream, _)) => stream,
                        Err(e) => { tracing::warn!(error = %e, "accept failed"); continue; }
                    },
                };
                spawn_conn(stream, service.clone());
            }
        }
        Listen::Unix(path) => {
            if let Ok(meta) = std::fs::symlink_metadata(&path) {
                use std::os::unix::fs::FileTypeExt;
                if !meta.file_type().is_socket() {
                    return Err(BridgeError::Io(std::io::Error::other(format!(
                        "{} exists and is not a socket; refusing to replace it",
                        path.display()
                    ))));
                }
                std::fs::remove_file(&path)?;
            }
            let listener = tokio::net::UnixListener::bind(&path)?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
            ready(format!("http://localhost{PATH} on {}", path.display()));
            let our_uid = nix::unistd::geteuid().as_raw();
            loop {
                let stream = tokio::select! {
                    _ = stop.cancelled() => { let _ = std::fs::remove_file(&path); return Ok(()) }
                    accepted = listener.accept() => match accepted {
                        Ok((stream, _)) => stream,
                        Err(e) => { tracing::warn!(error = %e, "accept failed"); continue; }
                    },
                };
                match stream.peer_cred() {
                    Ok(cred) if cred.uid() == our_uid || cred.uid() == 0 => {}
                    Ok(cred) => {
                        tracing::warn!(uid = cred.uid(), "refused a peer of another uid");
                        continue;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot read the peer's credentials");
                        continue;
                    }
                }
                spawn_conn(stream, service.clone());
            }
        }
    }
}

type Svc = StreamableHttpService<Bridge, LocalSessionManager>;

fn spawn_conn<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(stream: S, service: Svc) {
    tokio::spawn(async move {
        let io = TokioIo::new(stream);
        let svc = TowerToHyperService::new(service);
        if let Err(e) = hyper::server::conn::http1::Builder::new()
            .serve_connection(io, svc)
            .await
        {
            tracing::debug!(error = %e, "an HTTP connection ended with an error");
        }
    });
}
