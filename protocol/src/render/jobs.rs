//! The renderings of the jobs tools' results (`results/jobs.rs`): `bash`, `process`, and the
//! test daemons' `_probe_serial` / `_probe_parallel`.

use super::{Doc, Outward, Render};
use crate::results::{
    BashResult, ProbeResult, ProcessList, ProcessResult, ProcessSlice, TrackedProcess,
};

/// `bash: exit_code: 0 · stderr_bytes: 0 · stdout_bytes: 86`, then its stdout verbatim, its
/// stderr under `stderr:`; how long it ran is no model's business.
impl Render for BashResult {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.opt("exit_code", self.exit_code);
        doc.opt("signal", self.signal);
        doc.flag("timed_out", self.timed_out);
        doc.flag("truncated", self.truncated);
        doc.fact("stdout_bytes", self.stdout_bytes);
        doc.fact("stderr_bytes", self.stderr_bytes);
        doc.body(&self.stdout);
        doc.string("stderr", &self.stderr);
        if let Some(note) = &self.note {
            doc.string("note", note);
        }
    }
}

/// As the one it holds.
impl Render for ProcessResult {
    fn write(&self, doc: &mut Doc<'_>, outward: &Outward) {
        match self {
            ProcessResult::Info(info) => info.write(doc, outward),
            ProcessResult::List(list) => list.write(doc, outward),
            ProcessResult::Output(slice) => slice.write(doc, outward),
        }
    }
}

/// The process's facts; its process id is no model's business.
impl Render for TrackedProcess {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.string("id", &self.id);
        doc.string("label", &self.label);
        doc.string("command", &self.command);
        doc.field("state", &self.state);
        doc.opt("exit_code", self.exit_code);
        doc.opt("signal", self.signal);
        doc.fact("restarts", self.restarts);
        if let Some(error) = &self.last_error {
            doc.string("last_error", error);
        }
        doc.fact("uptime_ms", self.uptime_ms);
        doc.opt("ttl_left_ms", self.ttl_left_ms);
        doc.fact("output_bytes", self.output_bytes);
    }
}

/// One process a line.
impl Render for ProcessList {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.field("processes", &self.processes);
    }
}

/// Where the slice is, then its output verbatim; a terminal's screen as its text.
impl Render for ProcessSlice {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.string("id", &self.id);
        doc.body(&self.text);
        doc.fact("offset", self.offset);
        doc.fact("next_offset", self.next_offset);
        doc.fact("dropped", self.dropped);
        doc.fact("eof", self.eof);
        doc.field("state", &self.state);
        doc.opt("exit_code", self.exit_code);
        doc.opt("signal", self.signal);
        doc.field("screen", &self.screen);
    }
}

/// The call's tag and conversation, when it started and ended.
impl Render for ProbeResult {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.string("tag", &self.tag);
        doc.string("conversation", &self.conversation);
        doc.fact("start_us", self.start_us);
        doc.fact("end_us", self.end_us);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::render_as;
    use serde::Deserialize;
    use serde_json::json;

    #[test]
    fn bash_shows_its_streams_and_the_facts_that_matter() {
        let v = json!({"exit_code": null, "signal": 9, "stderr": "boom\n", "stderr_bytes": 5,
            "stdout": "out\n", "stdout_bytes": 4, "timed_out": true, "truncated": false, "wall_ms": 1000});
        assert_eq!(
            render_as::<BashResult>("bash", &v, &Outward::default()),
            "bash: signal: 9 · stderr_bytes: 5 · stdout_bytes: 4 · timed_out: true\nout\nstderr:\nboom"
        );
    }

    #[test]
    fn processes_read_as_before() {
        let info = json!({"command":"sleep 60","exit_code":null,"id":"p1","label":"nap","last_error":null,
            "output_bytes":0,"pid":4242,"restarts":0,"signal":null,"state":"running","ttl_left_ms":null,"uptime_ms":5});
        let list = json!({"processes": [info.clone()]});
        let slice = json!({"id":"p2","text":">>> 1+1\r\n2\r\n>>> ","offset":0,"next_offset":17,"dropped":0,"eof":false,
            "state":"running","exit_code":null,"signal":null,
            "screen":{"cols":80,"rows":24,"text":">>> 1+1\n2\n>>>","cursor":[2,4]}});
        for v in [info, list, slice] {
            assert!(ProcessResult::deserialize(&v).is_ok(), "{v}");
            let text = render_as::<ProcessResult>("process", &v, &Outward::default());
            assert_eq!(text, crate::render::generic("process", &v));
            assert!(!text.contains("4242"), "{text}");
        }
    }

    #[test]
    fn what_the_store_did_to_its_output_is_said_in_its_place() {
        let v = json!({"exit_code": 0, "signal": null, "stderr": "", "stderr_bytes": 0,
            "stdout": "abc…", "stdout_bytes": 90000, "timed_out": false, "truncated": false,
            "wall_ms": 3, "masked": ["aws_key"],
            "projected": {"stdout": {"ref": "tr_2", "total_chars": 9000}}});
        assert_eq!(
            render_as::<BashResult>("bash", &v, &Outward::default()),
            "bash: exit_code: 0 · stderr_bytes: 0 · stdout_bytes: 90000\nabc…\nmasked: aws_key\nprojected:\n  stdout:\n    ref: tr_2\n    total_chars: 9000"
        );
    }

    #[test]
    fn probes_read_as_before() {
        // As docs/TOOLS.md shows them.
        let text = crate::render::as_before::<ProbeResult>(
            "_probe_serial",
            json!({"conversation":"cli","end_us":1764612000200311u64,"start_us":1764612000000207u64,"tag":"first"}),
        );
        assert_eq!(
            text,
            "_probe_serial: conversation: cli · end_us: 1764612000200311 · start_us: 1764612000000207 · tag: first"
        );
        crate::render::as_before::<ProbeResult>(
            "_probe_parallel",
            json!({"conversation":"","end_us":1764612000000452u64,"start_us":1764612000000398u64,"tag":"second"}),
        );
    }
}
