//! The renderings of the debug tool's results (`results/debug.rs`): `debug`, one shape per
//! op.

use super::{Doc, Outward, Render};
use crate::results::{
    DebugAdaptersResult, DebugBreakpointListResult, DebugBreakpointsResult, DebugEvaluateResult,
    DebugLaunchResult, DebugOutputResult, DebugResult, DebugRunToResult, DebugScopesResult,
    DebugSetVariableResult, DebugStackResult, DebugStatusResult, DebugStopResult,
    DebugTerminateResult, DebugThreadsResult, DebugVariablesResult, DebugWatchResult,
};

/// A string field when there is one (a fact, or a block when long).
fn text(doc: &mut Doc, key: &str, value: &Option<String>) {
    if let Some(value) = value {
        doc.string(key, value);
    }
}

/// As the one it holds.
impl Render for DebugResult {
    fn write(&self, doc: &mut Doc<'_>, outward: &Outward) {
        match self {
            DebugResult::Launch(r) => r.write(doc, outward),
            DebugResult::RunTo(r) => r.write(doc, outward),
            DebugResult::Stop(r) => r.write(doc, outward),
            DebugResult::Breakpoints(r) => r.write(doc, outward),
            DebugResult::BreakpointList(r) => r.write(doc, outward),
            DebugResult::Adapters(r) => r.write(doc, outward),
            DebugResult::Status(r) => r.write(doc, outward),
            DebugResult::Threads(r) => r.write(doc, outward),
            DebugResult::Stack(r) => r.write(doc, outward),
            DebugResult::Scopes(r) => r.write(doc, outward),
            DebugResult::Variables(r) => r.write(doc, outward),
            DebugResult::Evaluate(r) => r.write(doc, outward),
            DebugResult::SetVariable(r) => r.write(doc, outward),
            DebugResult::Watch(r) => r.write(doc, outward),
            DebugResult::Output(r) => r.write(doc, outward),
            DebugResult::Terminate(r) => r.write(doc, outward),
        }
    }
}

/// A stop's state and exit, its one line (`stopped at FILE:LINE in FUNC (REASON)`) as the
/// body, where and why under `stopped`.
fn stop(doc: &mut Doc, stop: &DebugStopResult) {
    doc.field("state", &stop.state);
    doc.body(&stop.text);
    doc.field("stopped", &stop.stopped);
    doc.opt("exit_code", stop.exit_code.flatten());
    doc.opt("output_bytes", stop.output_bytes);
    text(doc, "note", &stop.note);
}

/// `debug: state: stopped`, then `stopped at /p/prog.py:6 in f (breakpoint)`, then the stop's
/// frame (or exception) under `stopped`.
impl Render for DebugStopResult {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        stop(doc, self);
    }
}

/// As a stop, with the breakpoints' verdicts per file and the session (the function
/// breakpoints' verdicts, a list beside the `text`, never were written).
impl Render for DebugLaunchResult {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        stop(doc, &self.stop);
        doc.field("breakpoints", &self.breakpoints);
        doc.field("session", &self.session);
        if let Some(Some(from)) = &self.restarted_from {
            doc.string("restarted_from", from);
        }
    }
}

/// As a stop, with what became of the temporary breakpoint under `run_to`.
impl Render for DebugRunToResult {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        stop(doc, &self.stop);
        doc.field("run_to", &self.run_to);
    }
}

/// `debug: applied: false · file: /p/prog.py`, the lines set (`lines: 6, 12`), the adapter's
/// verdicts one a line.
impl Render for DebugBreakpointsResult {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        text(doc, "file", &self.file);
        doc.field("lines", &self.lines);
        doc.field("breakpoints", &self.breakpoints);
        doc.field("function_names", &self.function_names);
        doc.field("functions", &self.functions);
        doc.field("exceptions", &self.exceptions);
        doc.fact("applied", self.applied);
        text(doc, "note", &self.note);
    }
}

/// Whether a session has them; each file's breakpoints one a line under `files`, the
/// function breakpoints one a line, the exception filters set and offered.
impl Render for DebugBreakpointListResult {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.field("files", &self.files);
        doc.field("functions", &self.functions);
        doc.field("exceptions", &self.exceptions);
        doc.fact("applied", self.applied);
        text(doc, "session", &self.session);
    }
}

/// The workdir, then one adapter a line (`debugpy available=true command=…`).
impl Render for DebugAdaptersResult {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.field("adapters", &self.adapters);
        doc.string("workdir", &self.workdir);
    }
}

/// What is set (each file's lines, the function breakpoints, the exception filters) and
/// the session's facts under `session`.
impl Render for DebugStatusResult {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.field("session", &self.session);
        doc.field("breakpoints", &self.breakpoints);
        doc.field("function_breakpoints", &self.function_breakpoints);
        doc.field("exception_filters", &self.exception_filters);
    }
}

/// `debug: state: stopped · stopped_thread: 1`, then one thread a line (`MainThread id=1`).
impl Render for DebugThreadsResult {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.field("threads", &self.threads);
        doc.opt("stopped_thread", self.stopped_thread);
        doc.field("state", &self.state);
    }
}

/// `debug: thread_id: 1 · total_frames: 2`, then one frame a line, innermost first.
impl Render for DebugStackResult {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.fact("thread_id", self.thread_id);
        doc.field("frames", &self.frames);
        doc.fact("total_frames", self.total_frames);
        doc.flag("truncated", self.truncated);
    }
}

/// `debug: frame_id: 2`, then one scope a line (`Locals expensive=false reference=4`).
impl Render for DebugScopesResult {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.fact("frame_id", self.frame_id);
        doc.field("scopes", &self.scopes);
    }
}

/// `debug: reference: 4 · total: 2`, then one variable a line (`n (int) reference=0
/// value=3`).
impl Render for DebugVariablesResult {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.fact("reference", self.reference);
        doc.field("variables", &self.variables);
        doc.fact("total", self.total);
        doc.flag("truncated", self.truncated);
        text(doc, "note", &self.note);
    }
}

/// `debug: expression: n + 1 · reference: 0 · result: 4 · type: int`, a long result under
/// its key.
impl Render for DebugEvaluateResult {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.string("expression", &self.expression);
        doc.string("result", &self.result);
        doc.flag("result_truncated", self.result_truncated == Some(true));
        doc.opt("result_chars", self.result_chars);
        text(doc, "type", &self.kind);
        doc.fact("reference", self.reference);
        doc.opt("frame_id", self.frame_id);
    }
}

/// `debug: name: n · reference: 0 · type: int · value: 10`.
impl Render for DebugSetVariableResult {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.string("name", &self.name);
        doc.string("value", &self.value);
        doc.flag("value_truncated", self.value_truncated == Some(true));
        doc.opt("value_chars", self.value_chars);
        text(doc, "type", &self.kind);
        doc.fact("reference", self.reference);
    }
}

/// The new watch's facts, then every watch of the session one a line.
impl Render for DebugWatchResult {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        let watch = &self.watch;
        doc.string("expression", &watch.expression);
        doc.string("data_id", &watch.data_id);
        doc.string("description", &watch.description);
        doc.string("access_type", &watch.access_type);
        doc.fact("verified", watch.verified);
        text(doc, "message", &watch.message);
        doc.field("watches", &self.watches);
        text(doc, "note", &self.note);
    }
}

/// Where the slice is, then the program's output verbatim (the adapter's console lines, a
/// list beside the `text`, never were written).
impl Render for DebugOutputResult {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.string("session", &self.session);
        doc.body(&self.text);
        doc.fact("offset", self.offset);
        doc.fact("next_offset", self.next_offset);
        doc.fact("dropped", self.dropped);
        doc.fact("total_bytes", self.total_bytes);
        doc.fact("eof", self.eof);
        doc.field("state", &self.state);
    }
}

/// `debug: terminated: true`, then the session as it ended.
impl Render for DebugTerminateResult {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.fact("terminated", self.terminated);
        text(doc, "note", &self.note);
        doc.field("session", &self.session);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::as_before;
    use serde::Deserialize;
    use serde_json::{Value as Json, json};

    fn session(state: &str) -> Json {
        json!({"adapter":"debugpy","adapter_pid":4250,"args":["--n","3"],"command":"/p/.venv/bin/python3 -m debugpy.adapter",
            "debuggee_pid":4251,"exit_code":null,"id":"c#2","output_bytes":42,"program":"/p/prog.py","state":state,
            "ttl_left_ms":1799954,"uptime_ms":1266,
            "at":{"column":1,"file":"/p/prog.py","id":2,"line":6,"name":"f"}})
    }

    #[test]
    fn launches_and_stops_read_as_before() {
        // As docs/TOOLS.md shows them: an attach, a stop on an exception, a run_to.
        let attach = as_before::<DebugResult>(
            "debug",
            json!({"breakpoints":{"/p/loop.py":[{"id":0,"line":5,"verified":true}]},"session":{"adapter":"debugpy","adapter_pid":4250,"at":{"column":1,"file":"/p/loop.py","id":2,"line":5,"name":"tick"},"command":"/p/.venv/bin/python3 -m debugpy.adapter","debuggee_pid":4242,"exit_code":null,"id":"c#1","output_bytes":42,"pid":4242,"state":"stopped","ttl_left_ms":1799954,"uptime_ms":1266},"state":"stopped","stopped":{"frame":{"column":1,"file":"/p/loop.py","id":2,"line":5,"name":"tick"},"reason":"breakpoint","thread_id":1},"text":"stopped at /p/loop.py:5 in tick (breakpoint)"}),
        );
        assert!(
            attach.starts_with("debug: state: stopped\nstopped at /p/loop.py:5 in tick (breakpoint)\nbreakpoints:\n  /p/loop.py (1):\n    id=0 line=5 verified=true\nsession:\n"),
            "{attach}"
        );
        assert!(!attach.contains("\n  pid: 4242"), "{attach}");
        let raised = as_before::<DebugResult>(
            "debug",
            json!({"state":"stopped","stopped":{"exception":{"break_mode":"unhandled","description":"bad value 3","id":"ValueError","stack_trace_text":"  File \"/p/prog.py\", line 2, in boom\n    raise ValueError(f\"bad value {n}\")\n  File \"/p/prog.py\", line 6, in <module>\n    boom(3)\nValueError: bad value 3\n","type":"ValueError"},"frame":{"column":1,"file":"/p/prog.py","id":3,"line":2,"name":"boom"},"reason":"exception","thread_id":1,"description":"bad value 3"},"text":"stopped at /p/prog.py:2 in boom (exception ValueError: bad value 3)"}),
        );
        assert!(
            raised.contains("\n    stack_trace_text:\n      "),
            "{raised}"
        );
        as_before::<DebugResult>(
            "debug",
            json!({"run_to":{"file":"/p/prog.py","line":8,"reached":true,"removed":true,"temporary_breakpoint":{"id":2,"line":8,"verified":true}},"state":"stopped","stopped":{"frame":{"column":9,"file":"/p/prog.py","id":4,"line":8,"name":"<module>"},"reason":"breakpoint","thread_id":1},"text":"stopped at /p/prog.py:8 in <module> (breakpoint)"}),
        );
        // A run_to another breakpoint came first to, a restart with function breakpoints (a
        // list beside the `text`: not written), a program that ended, one still running.
        as_before::<DebugRunToResult>(
            "debug",
            json!({"run_to":{"file":"/p/prog.py","line":8,"reached":false,"removed":false,
                    "note":"it stays until the program stops or the session ends",
                    "temporary_breakpoint":{"verified":false,"message":"no code at that line","actual_line":9,"id":7}},
                "state":"stopped","stopped":{"frame":{"column":1,"file":"/p/prog.py","id":4,"line":6,"name":"f"},"reason":"breakpoint","thread_id":1,"description":"breakpoint 1"},
                "text":"stopped at /p/prog.py:6 in f (breakpoint)"}),
        );
        let restart = as_before::<DebugLaunchResult>(
            "debug",
            json!({"breakpoints":{"/p/prog.py":[{"line":6,"verified":true,"id":0},{"line":12,"condition":"i == 3","verified":false,"message":"not reached yet","id":1}]},
                "functions":[{"name":"boom","verified":true,"line":1,"file":"/p/prog.py","id":3}],
                "restarted_from":"c#1","session":session("stopped"),"state":"stopped",
                "stopped":{"frame":{"column":1,"file":"/p/prog.py","id":2,"line":6,"name":"f"},"reason":"breakpoint","thread_id":1},
                "text":"stopped at /p/prog.py:6 in f (breakpoint)"}),
        );
        assert!(
            restart.starts_with("debug: restarted_from: c#1 · state: stopped\n"),
            "{restart}"
        );
        assert!(!restart.contains("boom"), "{restart}");
        as_before::<DebugResult>(
            "debug",
            json!({"exit_code":null,"restarted_from":null,"session":session("running"),"state":"running",
                "text":"running","note":"no breakpoints: the program runs"}),
        );
        for ended in [
            json!({"exit_code":3,"output_bytes":12,"state":"exited","text":"exited with code 3"}),
            json!({"exit_code":null,"output_bytes":0,"state":"crashed","text":"the adapter died"}),
            json!({"note":"it did not stop within 10 s (stop_wait_s); it runs on: `pause` stops it","state":"running","text":"running"}),
            json!({"state":"stopped","text":"stopped at ?? in ?? (entry)","stopped":{"reason":"entry","thread_id":null,"frame_error":"the adapter's stack answer failed: timeout",
                "detail":"x".repeat(400),"detail_truncated":true,"detail_chars":9000}}),
        ] {
            as_before::<DebugStopResult>("debug", ended.clone());
            as_before::<DebugResult>("debug", ended);
        }
    }

    #[test]
    fn breakpoints_read_as_before() {
        // As docs/TOOLS.md shows them.
        let kept = as_before::<DebugResult>(
            "debug",
            json!({"applied":false,"file":"/p/prog.py","lines":[6,12],"note":"kept for the next launch (no session is running)"}),
        );
        assert_eq!(
            kept,
            "debug: applied: false · file: /p/prog.py · note: kept for the next launch (no session is running)\nlines: 6, 12"
        );
        as_before::<DebugResult>(
            "debug",
            json!({"applied":true,"file":"/p/prog.py","lines":[5,15],
                "breakpoints":[{"line":5,"condition":"i == 3","verified":true,"id":1},
                    {"line":15,"log_message":"loop i={i}","verified":false,"message":"Breakpoint in file that does not exist.","id":2}]}),
        );
        as_before::<DebugBreakpointsResult>(
            "debug",
            json!({"applied":true,"exceptions":["raised"],"function_names":["boom"],
                "functions":[{"name":"boom","verified":true,"line":1,"file":"/p/prog.py","id":3}]}),
        );
        as_before::<DebugResult>(
            "debug",
            json!({"applied":false,"file":"/p/prog.py","lines":[]}),
        );
        // The listing.
        let list = as_before::<DebugResult>(
            "debug",
            json!({"applied":true,"session":"c#1",
                "files":{"/p/prog.py":[{"line":6,"verified":true,"id":0},{"line":12,"hit_condition":"3","verified":true,"actual_line":13,"id":1}]},
                "functions":[{"name":"boom"}],
                "exceptions":{"set":null,"note":"set: null is the adapter's defaults; available: the current or last session's adapter's",
                    "available":[{"filter":"raised","label":"Raised Exceptions","default":false},{"filter":"uncaught","label":"Uncaught Exceptions","default":true}]}}),
        );
        assert!(
            list.starts_with("debug: applied: true · session: c#1\nexceptions:\n"),
            "{list}"
        );
        as_before::<DebugBreakpointListResult>(
            "debug",
            json!({"applied":false,"session":null,"files":{},"functions":[],
                "exceptions":{"set":["uncaught"],"available":null,"note":"available: known once a session has started"}}),
        );
    }

    #[test]
    fn adapters_status_and_threads_read_as_before() {
        as_before::<DebugResult>(
            "debug",
            json!({"workdir":"/p","adapters":[
                {"name":"debugpy","markers":["pyproject.toml","setup.py","requirements.txt"],"extensions":[".py"],"root":"/p",
                    "command":"/p/.venv/bin/python3 -m debugpy.adapter","python":"/p/.venv/bin/python3","version":"1.8.11","available":true,"reason":null},
                {"name":"lldb","markers":["Cargo.toml","CMakeLists.txt"],"extensions":[],"root":null,
                    "root_note":"no root marker (Cargo.toml, CMakeLists.txt) in /p or any parent; launching a program directly still works",
                    "command":null,"available":false,"reason":"binary not found: lldb-dap (searched /p/.venv/bin, /usr/bin)"}]}),
        );
        let status = as_before::<DebugResult>(
            "debug",
            json!({"session":session("stopped"),"breakpoints":{"/p/prog.py":[6,12]},"function_breakpoints":["boom"],"exception_filters":null}),
        );
        assert!(status.starts_with("breakpoints:\n  /p/prog.py: 6, 12\nfunction_breakpoints: boom\nsession:\n  adapter: debugpy\n"), "{status}");
        as_before::<DebugStatusResult>(
            "debug",
            json!({"session":null,"breakpoints":{},"function_breakpoints":[],"exception_filters":["raised","uncaught"]}),
        );
        let threads = as_before::<DebugResult>(
            "debug",
            json!({"threads":[{"id":1,"name":"MainThread"},{"id":2,"name":null}],"stopped_thread":1,"state":"stopped"}),
        );
        assert_eq!(
            threads,
            "debug: state: stopped · stopped_thread: 1\nthreads (2):\n  MainThread id=1\n  id=2"
        );
        as_before::<DebugThreadsResult>(
            "debug",
            json!({"threads":[],"stopped_thread":null,"state":"running"}),
        );
    }

    #[test]
    fn frames_scopes_and_values_read_as_before() {
        as_before::<DebugResult>(
            "debug",
            json!({"thread_id":1,"total_frames":40,"truncated":true,"frames":[
                {"id":3,"name":"boom","file":"/p/prog.py","line":2,"column":1},
                {"id":5,"name":"__libc_start_main","file":null,"line":0,"column":0,"note":"no source: code without debug information"}]}),
        );
        as_before::<DebugResult>(
            "debug",
            json!({"frame_id":2,"scopes":[{"name":"Locals","reference":4,"expensive":false},{"name":"Globals","reference":5,"expensive":true}]}),
        );
        // As docs/TOOLS.md shows them.
        let variables = as_before::<DebugResult>(
            "debug",
            json!({"reference":4,"total":2,"truncated":false,"variables":[{"name":"long","reference":0,"type":"str","value":"'xxxx…","value_chars":1002,"value_truncated":true},{"name":"n","reference":0,"type":"int","value":"3"}]}),
        );
        assert!(
            variables.ends_with("\n  n (int) reference=0 value=3"),
            "{variables}"
        );
        as_before::<DebugVariablesResult>(
            "debug",
            json!({"reference":5,"total":80,"truncated":true,"note":"showing 50 of 80",
                "variables":[{"name":"a","reference":9,"value":"[1, 2]\n"}]}),
        );
        as_before::<DebugResult>(
            "debug",
            json!({"name":"n","reference":0,"type":"int","value":"10"}),
        );
        as_before::<DebugSetVariableResult>(
            "debug",
            json!({"name":"s","reference":0,"value":"x".repeat(400),"value_truncated":true,"value_chars":2000}),
        );
        as_before::<DebugResult>(
            "debug",
            json!({"expression":"n + 1","result":"4","type":"int","reference":0,"frame_id":2}),
        );
        as_before::<DebugEvaluateResult>(
            "debug",
            json!({"expression":"big","result":"y".repeat(400),"result_truncated":true,"result_chars":5000,
                "type":"","reference":12,"frame_id":null}),
        );
        // As docs/TOOLS.md shows it.
        as_before::<DebugResult>(
            "debug",
            json!({"access_type":"write","data_id":"7FFFFFFFE524/4","description":"4 bytes at 7FFFFFFFE524 total","expression":"total","verified":true,"watches":[{"access_type":"write","data_id":"7FFFFFFFE524/4","description":"4 bytes at 7FFFFFFFE524 total","expression":"total","verified":true}]}),
        );
        as_before::<DebugWatchResult>(
            "debug",
            json!({"access_type":"write","data_id":"p/8","description":"","expression":"&p->n","verified":false,
                "message":"no hardware watchpoint left","note":"it may not trigger: the adapter did not verify it",
                "watches":[{"access_type":"write","data_id":"p/8","description":"","expression":"&p->n","verified":false,"message":"no hardware watchpoint left"}]}),
        );
    }

    #[test]
    fn output_and_terminate_read_as_before() {
        // An output result is one (not a stop, whose `state` and `text` it has too); the
        // console lines beside the `text` are not written.
        let output = json!({"session":"c#1","text":"hi\nbye\n","offset":0,"next_offset":7,"dropped":0,
            "total_bytes":7,"eof":true,"state":"exited","console":["loop i=3"]});
        assert!(matches!(
            DebugResult::deserialize(&output),
            Ok(DebugResult::Output(_))
        ));
        let text = as_before::<DebugResult>("debug", output.clone());
        assert_eq!(
            text,
            "debug: dropped: 0 · eof: true · next_offset: 7 · offset: 0 · session: c#1 · state: exited · total_bytes: 7\nhi\nbye"
        );
        assert_eq!(as_before::<DebugOutputResult>("debug", output), text);
        as_before::<DebugOutputResult>(
            "debug",
            json!({"session":"c#3","text":"","offset":10,"next_offset":10,"dropped":4,"total_bytes":14,
                "eof":false,"state":"running","console":[]}),
        );
        let mut ended = session("terminated");
        ended["ended"] = json!({"kind":"terminated","message":"terminated by `terminate` (adapter and program killed)"});
        as_before::<DebugResult>("debug", json!({"terminated":true,"session":ended}));
        as_before::<DebugTerminateResult>(
            "debug",
            json!({"terminated":false,"note":"no debug session in this conversation"}),
        );
    }

    #[test]
    fn what_the_store_did_is_said_as_before() {
        // `masked` is said beside a result without a `text`, and not beside one with (the
        // generic rules never wrote a list beside a `text`).
        let value = as_before::<DebugResult>(
            "debug",
            json!({"expression":"token","result":"'***'","type":"str","reference":0,"frame_id":2,"masked":["github_token"]}),
        );
        assert!(value.ends_with("\nmasked: github_token"), "{value}");
        let stop = as_before::<DebugResult>(
            "debug",
            json!({"state":"exited","text":"exited with code 0","exit_code":0,"output_bytes":3,"masked":["github_token"]}),
        );
        assert!(stop.ends_with("\nmasked: github_token"), "{stop}");
        let page = as_before::<DebugResult>(
            "debug",
            json!({"session":"c#1","text":"…","offset":0,"next_offset":90000,"dropped":0,"total_bytes":90000,
                "eof":true,"state":"exited","console":[],"masked":["aws_key"],
                "projected":{"text":{"content_type":"text/plain","ref":"tr_4","shown_chars":4000,"total_chars":90000}}}),
        );
        assert!(page.ends_with("…\nmasked: aws_key\nprojected:\n  text:\n    content_type: text/plain\n    ref: tr_4\n    shown_chars: 4000\n    total_chars: 90000"), "{page}");
    }
}
