//! `serve` with the default text log, written to a file (as under a service manager or
//! `2>daemon.log`): plain lines, no terminal colour codes, and a call's lines still carry its
//! call id, conversation and tool: no field name wrapped in escape codes when stderr is no
//! terminal (they also made a call's span a third dearer to build).

use serde_json::json;
use toolvisor_tests::TestDaemon;

#[test]
fn a_log_written_to_a_file_is_plain_text_with_the_calls_fields() {
    // The test daemon logs at `debug`, in the text format, to a file.
    let mut d = TestDaemon::start("");
    d.ok("conv-text", "ls", json!({"path": "."}));
    d.stop();

    let text = d.log_text();
    assert!(text.lines().count() > 3, "{text}");
    assert!(
        !text.contains('\u{1b}'),
        "terminal escape codes in a log file:\n{}",
        text.escape_debug()
    );
    let ended = text
        .lines()
        .find(|l| l.contains("call ended") && l.contains("tool=ls"))
        .unwrap_or_else(|| panic!("no `call ended` line of ls:\n{text}"));
    for field in [
        "call=",
        "conversation=conv-text",
        "resource=\"files\"",
        "outcome=\"ok\"",
    ] {
        assert!(ended.contains(field), "{field} missing: {ended}");
    }
}
