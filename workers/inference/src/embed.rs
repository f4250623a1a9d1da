//! Embeddings from the pool, for the data hub's hybrid search (`[data] embedding_model`): the
//! model is loaded under [`ALIAS`] with its server's embeddings endpoint turned on, on the
//! first request and again after an unload or an eviction; each request takes one of the
//! model's slots (`[inference] parallel`, waiting in its `queue`) and counts as in flight, so
//! the model is never evicted under it, exactly like a request through the endpoint.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::Request;
use hyper_util::rt::TokioIo;
use serde_json::{Value as Json, json};

use crate::error::InferenceError;
use crate::pool::{Inference, State};

/// The alias the embedding model is served under (shown by `get_inference_status`).
pub const ALIAS: &str = "data-embeddings";

/// The most bytes of one embeddings answer read (a batch of 32 vectors of 4,096 floats as
/// JSON text is about 3 MiB).
const ANSWER_MAX: usize = 64 << 20;

impl Inference {
    /// One vector per text, in order, from `model` (a model of the store) served for
    /// embeddings under [`ALIAS`]. Each vector is scaled to unit length.
    pub async fn embed(
        &self,
        model: &str,
        texts: &[String],
    ) -> Result<Vec<Vec<f32>>, InferenceError> {
        let failed = |error: String| InferenceError::Embeddings {
            alias: ALIAS.to_string(),
            error,
        };
        let loaded = match self.get(ALIAS) {
            Some(s) => !matches!(self.state(&s).await, State::Unloaded { .. }),
            None => false,
        };
        if !loaded {
            self.load_with(model, Some(ALIAS), None, false, true)
                .await?;
        }
        let served = self.get(ALIAS).ok_or_else(|| InferenceError::NotLoaded {
            alias: ALIAS.to_string(),
        })?;
        let port = self.wait_ready(&served).await?;
        let patience = Duration::from_secs(self.config().ready_timeout_s);
        let _slot = tokio::time::timeout(patience, served.slot(self.config().queue))
            .await
            .ok()
            .flatten()
            .ok_or_else(|| {
                failed(format!(
                    "no slot of its server within {} s (inference.parallel, inference.queue)",
                    patience.as_secs()
                ))
            })?;
        let _flight = served.begin();
        let body = json!({"input": texts, "model": ALIAS});
        let answer = tokio::time::timeout(patience, post(port, "/v1/embeddings", &body))
            .await
            .map_err(|_| failed(format!("no answer within {} s", patience.as_secs())))?
            .map_err(|e| match e {
                PostError::Refused(error) => InferenceError::EmbeddingsRefused {
                    alias: ALIAS.to_string(),
                    error,
                },
                PostError::Failed(error) => failed(error),
            })?;
        vectors(&answer, texts.len()).map_err(failed)
    }
}

/// Why a POST to a model server failed: the server's refusal of what was sent (it answered
/// an error status other than 503, which llama-server gives while it loads), or anything else.
enum PostError {
    Refused(String),
    Failed(String),
}

impl From<String> for PostError {
    fn from(e: String) -> PostError {
        PostError::Failed(e)
    }
}

/// POST `body` to the model server on `port`; its JSON answer.
async fn post(port: u16, path: &str, body: &Json) -> Result<Json, PostError> {
    let stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| format!("cannot reach 127.0.0.1:{port}: {e}"))?;
    let _ = stream.set_nodelay(true);
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let request = Request::post(path)
        .header(hyper::header::HOST, format!("127.0.0.1:{port}"))
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .map_err(|e| e.to_string())?;
    let response = send
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status();
    let bytes = Limited::new(response.into_body(), ANSWER_MAX)
        .collect()
        .await
        .map_err(|e| format!("reading its answer: {e}"))?
        .to_bytes();
    let text = String::from_utf8_lossy(&bytes);
    if !status.is_success() {
        let said = format!("{path} answered {status}: {}", head(&text));
        return Err(match status.as_u16() {
            400..=599 if status != hyper::StatusCode::SERVICE_UNAVAILABLE => {
                PostError::Refused(said)
            }
            _ => PostError::Failed(said),
        });
    }
    serde_json::from_str(&text)
        .map_err(|e| format!("{path} answered no JSON ({e}): {}", head(&text)).into())
}

fn head(text: &str) -> String {
    text.chars().take(300).collect()
}

/// The `n` vectors of an OpenAI-style embeddings answer, in input order, unit length.
fn vectors(answer: &Json, n: usize) -> Result<Vec<Vec<f32>>, String> {
    let data = answer.get("data").and_then(Json::as_array).ok_or_else(|| {
        format!(
            "the answer has no `data` list: {}",
            head(&answer.to_string())
        )
    })?;
    if data.len() != n {
        return Err(format!(
            "{n} texts were sent and {} vectors came back",
            data.len()
        ));
    }
    let mut out: Vec<Option<Vec<f32>>> = vec![None; n];
    for (i, item) in data.iter().enumerate() {
        let index = item
            .get("index")
            .and_then(Json::as_u64)
            .map_or(i, |x| x as usize);
        let v: Vec<f32> = item
            .get("embedding")
            .and_then(Json::as_array)
            .ok_or_else(|| format!("vector {index} is not a list of numbers"))?
            .iter()
            .map(|x| x.as_f64().map(|x| x as f32))
            .collect::<Option<_>>()
            .ok_or_else(|| format!("vector {index} is not a list of numbers"))?;
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        if v.is_empty() || !norm.is_finite() || norm == 0.0 {
            return Err(format!("vector {index} is empty or zero"));
        }
        let slot = out
            .get_mut(index)
            .ok_or_else(|| format!("vector index {index} is out of range"))?;
        *slot = Some(v.into_iter().map(|x| x / norm).collect());
    }
    let out: Vec<Vec<f32>> = out
        .into_iter()
        .collect::<Option<_>>()
        .ok_or("an index came back twice and another not at all")?;
    if out.windows(2).any(|w| w[0].len() != w[1].len()) {
        return Err("the vectors differ in length".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_are_put_in_input_order_at_unit_length_and_bad_answers_are_named() {
        let answer = json!({"data": [
            {"index": 1, "embedding": [0.0, 2.0]},
            {"index": 0, "embedding": [3.0, 4.0]},
        ]});
        let v = vectors(&answer, 2).unwrap();
        assert_eq!(v, vec![vec![0.6, 0.8], vec![0.0, 1.0]]);
        assert!(vectors(&answer, 3).unwrap_err().contains("3 texts"));
        let zero = json!({"data": [{"embedding": [0.0]}]});
        assert!(vectors(&zero, 1).unwrap_err().contains("zero"));
        let ragged = json!({"data": [{"embedding": [1.0]}, {"embedding": [1.0, 0.0]}]});
        assert!(vectors(&ragged, 2).unwrap_err().contains("differ"));
        assert!(
            vectors(&json!({"error": "x"}), 1)
                .unwrap_err()
                .contains("no `data`")
        );
    }
}
