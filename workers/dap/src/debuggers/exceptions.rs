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

/// `text` cut to its last `max` characters, saying so.
fn keep_tail(text: &str, max: usize) -> Cut {
    Cut::of(text, max, |text, chars| {
        text.chars().skip(chars - max).collect()
    })
}

impl Debuggers {
    /// What the exception of the current stop is: the adapter's `exceptionInfo` when it
    /// has one (asked once per stop, kept for `status`), else what the `stopped` event said.
    pub(super) async fn exception(
        &self,
        session: &Arc<Session>,
        op: &str,
        stop: &StopInfo,
    ) -> DebugException {
        let stops = session.state().stops;
        if let Some((n, e)) = session.state().exception.clone()
            && n == stops
        {
            return e;
        }
        let supported = lock(&session.capabilities)["supportsExceptionInfoRequest"]
            .as_bool()
            .unwrap_or(false);
        let mut out = DebugException {
            id: None,
            description: None,
            description_truncated: None,
            description_chars: None,
            kind: None,
            type_truncated: None,
            type_chars: None,
            stack_trace_text: None,
            stack_trace_text_truncated: None,
            stack_trace_text_chars: None,
            break_mode: None,
            info_error: None,
            note: None,
        };
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
                    Err(e) => out.info_error = Some(e.message),
                }
            }
            (true, None) => {}
            (false, _) => {
                out.note = Some(format!(
                    "the {} adapter does not advertise `supportsExceptionInfoRequest`: only what its stop event said",
                    session.adapter
                ));
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
        out.id = id;
        if let Some(d) = &description {
            let cut = cut_value(d);
            out.description = Some(cut.text);
            out.description_truncated = cut.truncated;
            out.description_chars = cut.chars;
        }
        if let Some(t) = &kind {
            let cut = cut_value(t);
            out.kind = Some(cut.text);
            out.type_truncated = cut.truncated;
            out.type_chars = cut.chars;
        }
        if let Some(trace) = text(&details["stackTrace"]) {
            let cut = keep_tail(&trace, MAX_TRACE_CHARS);
            out.stack_trace_text = Some(cut.text);
            out.stack_trace_text_truncated = cut.truncated;
            out.stack_trace_text_chars = cut.chars;
        }
        out.break_mode = text(&info["breakMode"]);
        let kept = out.clone();
        session.update(|s| {
            if s.stops == stops {
                s.exception = Some((stops, kept));
            }
        });
        out
    }
}

/// The stop's reason as the answer's `text` says it: `exception ValueError: bad value 3`.
pub(super) fn exception_reason(exception: &DebugException) -> String {
    let short = |v: &Option<String>| {
        v.as_deref().map(|s| {
            let line = s.lines().next().unwrap_or("");
            if line.chars().count() > 120 {
                format!("{}…", line.chars().take(120).collect::<String>())
            } else {
                line.to_string()
            }
        })
    };
    match (short(&exception.kind), short(&exception.description)) {
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
        let trace = format!("{}ValueError: bad", "x".repeat(5000));
        let cut = keep_tail(&trace, 100);
        assert!(cut.text.ends_with("ValueError: bad"));
        assert_eq!(cut.text.chars().count(), 100);
        assert_eq!((cut.truncated, cut.chars), (Some(true), Some(5015)));
        let whole = keep_tail("short", 100);
        assert_eq!(
            (whole.text.as_str(), whole.truncated, whole.chars),
            ("short", None, None)
        );
    }

    fn exception(kind: Option<&str>, description: &str) -> DebugException {
        serde_json::from_value(json!({
            "id": null, "type": kind, "description": description, "stack_trace_text": null,
        }))
        .unwrap()
    }

    #[test]
    fn the_reason_names_type_and_message() {
        let e = exception(Some("ValueError"), "bad value 3");
        assert_eq!(exception_reason(&e), "exception ValueError: bad value 3");
        let e = exception(None, "signal SIGABRT");
        assert_eq!(exception_reason(&e), "exception: signal SIGABRT");
    }

    #[test]
    fn an_exception_says_null_for_what_it_does_not_know_and_leaves_out_the_rest() {
        let e = exception(None, "signal SIGABRT");
        assert_eq!(
            serde_json::to_value(e).unwrap(),
            json!({"id": null, "type": null, "description": "signal SIGABRT", "stack_trace_text": null})
        );
    }
}
