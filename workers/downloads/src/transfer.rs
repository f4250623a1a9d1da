//! One file's transfer: resume from its `.part` file with HTTP `Range`, hash as the bytes
//! arrive (the prefix already on disk is hashed first), verify sha256 (the size where the
//! listing gives no hash), then rename the `.part` over the file's name. A transient failure
//! (5xx, a cut connection, a bad hash) is retried with backoff by the caller.

use std::path::Path;
use std::sync::atomic::Ordering;

use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};

use crate::error::DownloadError;
use crate::hub::Hub;
use crate::jobs::{FileProgress, FileState};
use crate::store::part_path;

/// Bytes gathered before one write to the `.part` file.
const WRITE_BUF: usize = 1 << 20;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// One attempt at one file; `Ok` once it is verified and in place.
pub(crate) async fn attempt(
    hub: &Hub,
    repo: &str,
    revision: &str,
    dir: &Path,
    progress: &FileProgress,
) -> Result<(), DownloadError> {
    let file = &progress.file;
    let final_path = dir.join(&file.name);
    let part = part_path(dir, &file.name);
    let mut out = tokio::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(&part)
        .await
        .map_err(|e| DownloadError::io("cannot open", &part, e))?;
    let mut have = out
        .metadata()
        .await
        .map_err(|e| DownloadError::io("cannot stat", &part, e))?
        .len();
    if have > file.size {
        out.set_len(0)
            .await
            .map_err(|e| DownloadError::io("cannot truncate", &part, e))?;
        have = 0;
    }
    let mut hasher = Sha256::new();
    if have > 0 && file.sha256.is_some() {
        progress.set_state(FileState::Verifying);
        let mut buf = vec![0u8; WRITE_BUF];
        let mut left = have;
        out.seek(std::io::SeekFrom::Start(0))
            .await
            .map_err(|e| DownloadError::io("cannot seek", &part, e))?;
        while left > 0 {
            let n = out
                .read(&mut buf[..(left.min(WRITE_BUF as u64) as usize)])
                .await
                .map_err(|e| DownloadError::io("cannot read", &part, e))?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            left -= n as u64;
        }
    }
    progress.done.store(have, Ordering::Relaxed);
    if have < file.size {
        progress.set_state(FileState::Downloading);
        let mut resp = hub.file(repo, revision, &file.name, have).await?;
        match resp.status().as_u16() {
            206 => {
                // The part must start where ours ends, or the bytes would land in the wrong
                // place (a file listed without a hash would not notice).
                let start = resp
                    .headers()
                    .get(reqwest::header::CONTENT_RANGE)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.strip_prefix("bytes "))
                    .and_then(|v| v.split('-').next())
                    .and_then(|v| v.trim().parse::<u64>().ok());
                if start != Some(have) {
                    out.set_len(0)
                        .await
                        .map_err(|e| DownloadError::io("cannot truncate", &part, e))?;
                    progress.done.store(0, Ordering::Relaxed);
                    return Err(DownloadError::Http {
                        what: file.name.clone(),
                        cause: format!(
                            "the endpoint answered the range from byte {have} with {:?}; fetching it again from the start",
                            resp.headers().get(reqwest::header::CONTENT_RANGE)
                        ),
                        transient: true,
                    });
                }
            }
            416 => {
                // The endpoint does not take our offset: start the file again.
                out.set_len(0)
                    .await
                    .map_err(|e| DownloadError::io("cannot truncate", &part, e))?;
                progress.done.store(0, Ordering::Relaxed);
                return Err(DownloadError::Http {
                    what: file.name.clone(),
                    cause: format!(
                        "the endpoint refused the range from byte {have}; fetching it again from the start"
                    ),
                    transient: true,
                });
            }
            _ => {
                // A whole answer (200): the range was ignored, so the file starts over.
                if have > 0 {
                    out.set_len(0)
                        .await
                        .map_err(|e| DownloadError::io("cannot truncate", &part, e))?;
                    hasher = Sha256::new();
                    have = 0;
                    progress.done.store(0, Ordering::Relaxed);
                }
            }
        }
        out.seek(std::io::SeekFrom::Start(have))
            .await
            .map_err(|e| DownloadError::io("cannot seek", &part, e))?;
        let mut buf: Vec<u8> = Vec::with_capacity(WRITE_BUF);
        let mut got = have;
        let result = loop {
            match resp.chunk().await {
                Ok(Some(chunk)) => {
                    if got + chunk.len() as u64 > file.size {
                        break Err(DownloadError::Verify {
                            file: file.name.clone(),
                            cause: format!(
                                "the endpoint sent more than the listed {} bytes",
                                file.size
                            ),
                        });
                    }
                    hasher.update(&chunk);
                    got += chunk.len() as u64;
                    buf.extend_from_slice(&chunk);
                    if buf.len() >= WRITE_BUF {
                        out.write_all(&buf)
                            .await
                            .map_err(|e| DownloadError::io("cannot write", &part, e))?;
                        buf.clear();
                    }
                    progress.add(chunk.len() as u64);
                }
                Ok(None) => break Ok(()),
                Err(e) => {
                    break Err(DownloadError::Http {
                        what: file.name.clone(),
                        cause: format!(
                            "the transfer broke after {got} of {} bytes: {e}",
                            file.size
                        ),
                        transient: true,
                    });
                }
            }
        };
        // What arrived is kept either way: the next attempt resumes after it.
        out.write_all(&buf)
            .await
            .map_err(|e| DownloadError::io("cannot write", &part, e))?;
        out.flush()
            .await
            .map_err(|e| DownloadError::io("cannot write", &part, e))?;
        if let Err(e) = result {
            if matches!(e, DownloadError::Verify { .. }) {
                let _ = tokio::fs::remove_file(&part).await;
                progress.done.store(0, Ordering::Relaxed);
            }
            return Err(e);
        }
        if got < file.size {
            return Err(DownloadError::Http {
                what: file.name.clone(),
                cause: format!("the connection closed after {got} of {} bytes", file.size),
                transient: true,
            });
        }
    }
    progress.set_state(FileState::Verifying);
    out.sync_data()
        .await
        .map_err(|e| DownloadError::io("cannot sync", &part, e))?;
    drop(out);
    if let Some(expected) = &file.sha256 {
        let got = hex(&hasher.finalize());
        if &got != expected {
            let _ = tokio::fs::remove_file(&part).await;
            progress.done.store(0, Ordering::Relaxed);
            return Err(DownloadError::Verify {
                file: file.name.clone(),
                cause: format!(
                    "sha256 {got} does not match the listed {expected}; the file is fetched again"
                ),
            });
        }
    }
    tokio::fs::rename(&part, &final_path)
        .await
        .map_err(|e| DownloadError::io("cannot rename into place", &final_path, e))?;
    if let Some(parent) = final_path.parent()
        && let Ok(d) = std::fs::File::open(parent)
    {
        let _ = d.sync_all();
    }
    progress.done.store(file.size, Ordering::Relaxed);
    progress.set_state(FileState::Done);
    Ok(())
}
