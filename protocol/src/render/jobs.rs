//! The renderings of the jobs tools' results (`results/jobs.rs`): `bash`.

use serde_json::{Map, Value as Json};

use super::{Doc, Outward, Render};
use crate::results::BashResult;

/// `bash: exit_code: 0 · stderr_bytes: 0 · stdout_bytes: 86`, then its stdout verbatim, its
/// stderr under `stderr:`; how long it ran is no model's business.
impl Render for BashResult {
    fn render(&self, tool: &str, extra: &Map<String, Json>, _: &Outward) -> String {
        let mut doc = Doc::new(tool);
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
        doc.extra(extra);
        doc.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::render_as;
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
}
