//! A stop on an exception, said: `exceptionInfo` asked once per stop (where the adapter
//! advertises `supportsExceptionInfoRequest`) and folded into `{id, description, type,
//! stack_trace_text}`; and which exception filters a launch sets when the caller set none
//! (`[debug] pause_on_uncaught`).

use super::*;
use crate::session::StopInfo;

/// Characters of an exception's stack trace kept: its end (the innermost frames and the
/// message, where Python puts them).
pub const MAX_TRACE_CHARS: usize = 4000;

/// The filter id adapters use for "break on uncaught exceptions" (debugpy, js-debug).
const UNCAUGHT: &str = "uncaught";

/// The filters set when the caller set none: the adapter's defaults, with its `uncaught`
/// filter added (`pause_on_uncaught`) or taken out (not).
pub(super) fn default_filters(caps: &Value, pause_on_uncaught: bool) -> Vec<Value> {
    let advertised = caps["exceptionBreakpointFilters"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    advertised
        .iter()
        .filter(|f| match f["filter"].as_str() {
            Some(UNCAUGHT) => pause_on_uncaught,
            Some(_) => f["default"].as_bool().unwrap_or(false),
            None => false,
        })
        .map(|f| f["filter"].clone())
        .collect()
}

/// `text` cut to its last `max` characters, saying so under `key_truncated`/`key_chars`.
fn keep_tail(out: &mut Map<String, Value>, key: &str, text: &str, max: usize) {
    let chars = text.chars().count();
    if chars > max {
        let tail: String = text.chars().skip(chars - max).collect();
        out.insert(key.into(), json!(tail));
        out.insert(format!("{key}_truncated"), json!(true));
        out.insert(format!("{key}_chars"), json!(chars));
    } else {
        out.insert(key.into(), json!(text));
    }
}

impl Debuggers {
    /// What the exception of the current stop is: the adapter's `exceptionInfo` when it
    /// has one (asked once per stop, kept for `status`), else what the `stopped` event said.
    pub(super) async fn exception(
        &self,
        session: &Arc<Session>,
        op: &str,
        stop: &StopInfo,
    ) -> Value {
        let stops = session.state().stops;
        if let Some((n, e)) = session.state().exception.clone()
            && n == stops
        {
            return e;
        }
        let supported = lock(&session.capabilities)["supportsExceptionInfoRequest"]
            .as_bool()
            .unwrap_or(false);
        let mut out = Map::new();
        let mut info = Value::Null;
        match (supported, stop.thread_id) {
            (true, Some(thread)) => {
                match self
                    .request(
                        session,
                        op,
                        "exceptionInfo",
                        Some(json!({"threadId": thread})),
                    )
                    .await
                {
                    Ok(body) => info = body,
                    Err(e) => {
                        out.insert("info_error".into(), json!(e.message));
                    }
                }
            }
            (true, None) => {}
            (false, _) => {
                out.insert(
                    "note".into(),
                    json!(format!(
                        "the {} adapter does not advertise `supportsExceptionInfoRequest`: only what its stop event said",
                        session.adapter
                    )),
                );
            }
        }
        let details = &info["details"];
        let text = |v: &Value| v.as_str().filter(|s| !s.is_empty()).map(str::to_string);
        let id = text(&info["exceptionId"]);
        let description = text(&info["description"])
            .or_else(|| text(&details["message"]))
            .or_else(|| stop.description.clone());
        // debugpy's stop event carries the type name as `text`.
        let kind = text(&details["typeName"])
            .or_else(|| text(&details["fullTypeName"]))
            .or_else(|| stop.text.clone());
        out.insert("id".into(), json!(id));
        match &description {
            Some(d) => cut_value(&mut out, "description", d),
            None => {
                out.insert("description".into(), Value::Null);
            }
        }
        match &kind {
            Some(t) => cut_value(&mut out, "type", t),
            None => {
                out.insert("type".into(), Value::Null);
            }
        }
        match text(&details["stackTrace"]) {
            Some(trace) => keep_tail(&mut out, "stack_trace_text", &trace, MAX_TRACE_CHARS),
            None => {
                out.insert("stack_trace_text".into(), Value::Null);
            }
        }
        if let Some(mode) = text(&info["breakMode"]) {
            out.insert("break_mode".into(), json!(mode));
        }
        let value = Value::Object(out);
        let kept = value.clone();
        session.update(|s| {
            if s.stops == stops {
                s.exception = Some((stops, kept));
            }
        });
        value
    }
}

/// The stop's reason as the answer's `text` says it: `exception ValueError: bad value 3`.
pub(super) fn exception_reason(exception: &Value) -> String {
    let short = |v: &Value| {
        v.as_str().map(|s| {
            let line = s.lines().next().unwrap_or("");
            if line.chars().count() > 120 {
                format!("{}…", line.chars().take(120).collect::<String>())
            } else {
                line.to_string()
            }
        })
    };
    match (short(&exception["type"]), short(&exception["description"])) {
        (Some(t), Some(d)) if t != d => format!("exception {t}: {d}"),
        (Some(t), _) => format!("exception {t}"),
        (None, Some(d)) => format!("exception: {d}"),
        (None, None) => "exception".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uncaught_is_added_or_taken_out_and_other_defaults_stay() {
        let caps = json!({"exceptionBreakpointFilters": [
            {"filter": "raised", "default": false},
            {"filter": "uncaught", "default": true},
            {"filter": "userUnhandled", "default": true},
        ]});
        assert_eq!(
            default_filters(&caps, true),
            vec![json!("uncaught"), json!("userUnhandled")]
        );
        assert_eq!(default_filters(&caps, false), vec![json!("userUnhandled")]);
        let lldb =
            json!({"exceptionBreakpointFilters": [{"filter": "cpp_throw", "default": false}]});
        assert!(default_filters(&lldb, true).is_empty());
        assert!(default_filters(&json!({}), true).is_empty());
    }

    #[test]
    fn a_long_trace_keeps_its_end() {
        let mut out = Map::new();
        let trace = format!("{}ValueError: bad", "x".repeat(5000));
        keep_tail(&mut out, "t", &trace, 100);
        assert!(out["t"].as_str().unwrap().ends_with("ValueError: bad"));
        assert_eq!(out["t"].as_str().unwrap().chars().count(), 100);
        assert_eq!(out["t_chars"], json!(5015));
    }

    #[test]
    fn the_reason_names_type_and_message() {
        let e = json!({"type": "ValueError", "description": "bad value 3"});
        assert_eq!(exception_reason(&e), "exception ValueError: bad value 3");
        let e = json!({"type": null, "description": "signal SIGABRT"});
        assert_eq!(exception_reason(&e), "exception: signal SIGABRT");
    }
}
