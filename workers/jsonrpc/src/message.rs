//! JSON-RPC 2.0 messages as they travel: requests, responses, notifications. Params and
//! results stay `serde_json::Value`; typing them is the protocol layer's business (LSP).

use serde_json::{Value, json};

/// A request id: servers use numbers or strings.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Id {
    Num(i64),
    Str(String),
}

impl Id {
    fn from_json(v: &Value) -> Option<Id> {
        match v {
            Value::Number(n) => n.as_i64().map(Id::Num),
            Value::String(s) => Some(Id::Str(s.clone())),
            _ => None,
        }
    }

    pub fn to_json(&self) -> Value {
        match self {
            Id::Num(n) => json!(n),
            Id::Str(s) => json!(s),
        }
    }
}

/// The error member of a response.
#[derive(Clone, Debug, PartialEq)]
pub struct ResponseError {
    pub code: i64,
    pub message: String,
}

/// One decoded message.
#[derive(Clone, Debug, PartialEq)]
pub enum Message {
    Request {
        id: Id,
        method: String,
        params: Value,
    },
    Notification {
        method: String,
        params: Value,
    },
    Response {
        id: Id,
        result: Result<Value, ResponseError>,
    },
}

impl Message {
    /// Decodes a frame's payload; `Err` describes why it is not a JSON-RPC message.
    pub fn parse(payload: &[u8]) -> Result<Message, String> {
        let v: Value = serde_json::from_slice(payload).map_err(|e| format!("not JSON: {e}"))?;
        let Value::Object(mut map) = v else {
            return Err("not a JSON object".into());
        };
        let method = map
            .get("method")
            .and_then(Value::as_str)
            .map(str::to_string);
        let id = map.get("id").and_then(Id::from_json);
        let params = map.remove("params").unwrap_or(Value::Null);
        match (method, id) {
            (Some(method), Some(id)) => Ok(Message::Request { id, method, params }),
            (Some(method), None) => Ok(Message::Notification { method, params }),
            (None, Some(id)) => {
                let result = match map.remove("error") {
                    Some(err) if !err.is_null() => Err(ResponseError {
                        code: err.get("code").and_then(Value::as_i64).unwrap_or(0),
                        message: err
                            .get("message")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string(),
                    }),
                    _ => Ok(map.remove("result").unwrap_or(Value::Null)),
                };
                Ok(Message::Response { id, result })
            }
            (None, None) => Err("neither a method nor an id".into()),
        }
    }

    /// The wire form.
    pub fn to_json(&self) -> Value {
        match self {
            Message::Request { id, method, params } => {
                json!({"jsonrpc": "2.0", "id": id.to_json(), "method": method, "params": params})
            }
            Message::Notification { method, params } => {
                json!({"jsonrpc": "2.0", "method": method, "params": params})
            }
            Message::Response { id, result } => match result {
                Ok(result) => json!({"jsonrpc": "2.0", "id": id.to_json(), "result": result}),
                Err(e) => json!({"jsonrpc": "2.0", "id": id.to_json(),
                    "error": {"code": e.code, "message": e.message}}),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_and_round_trips() {
        let cases = [
            Message::Request {
                id: Id::Num(3),
                method: "initialize".into(),
                params: json!({"a": 1}),
            },
            Message::Request {
                id: Id::Str("x".into()),
                method: "workspace/configuration".into(),
                params: json!({"items": []}),
            },
            Message::Notification {
                method: "$/progress".into(),
                params: json!({"token": 1}),
            },
            Message::Response {
                id: Id::Num(1),
                result: Ok(Value::Null),
            },
            Message::Response {
                id: Id::Num(2),
                result: Err(ResponseError {
                    code: -32601,
                    message: "no such method".into(),
                }),
            },
        ];
        for m in cases {
            let bytes = serde_json::to_vec(&m.to_json()).unwrap();
            assert_eq!(Message::parse(&bytes).unwrap(), m);
        }
        assert!(Message::parse(b"[1]").is_err());
        assert!(Message::parse(b"{}").is_err());
        assert!(Message::parse(b"garbage").is_err());
    }
}
