//! `[metrics] listen`: where the opt-in Prometheus endpoint listens, parsed and checked with
//! the rest of the configuration (the endpoint itself is `crate::metrics`).

use std::net::SocketAddr;
use std::path::PathBuf;

/// Where the endpoint listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

impl Endpoint {
    /// `"127.0.0.1:9464"`, `"[::1]:9464"` or `"unix:/path"`. TCP must be loopback: the metrics
    /// name tools, conversations' resources and sizes, which are not for the network.
    pub fn parse(listen: &str) -> Result<Endpoint, String> {
        if let Some(path) = listen.strip_prefix("unix:") {
            let path = PathBuf::from(path);
            if !path.is_absolute() {
                return Err(format!(
                    "metrics.listen = {listen:?}: a unix socket path must be absolute"
                ));
            }
            return Ok(Endpoint::Unix(path));
        }
        let addr: SocketAddr = listen.parse().map_err(|_| {
            format!(
                "metrics.listen = {listen:?} is neither `HOST:PORT` nor `unix:/path` (e.g. \"127.0.0.1:9464\")"
            )
        })?;
        if !addr.ip().is_loopback() {
            return Err(format!(
                "metrics.listen = {listen:?} is not a loopback address: the endpoint serves loopback only (use 127.0.0.1 or [::1], or a unix: socket)"
            ));
        }
        Ok(Endpoint::Tcp(addr))
    }
}
