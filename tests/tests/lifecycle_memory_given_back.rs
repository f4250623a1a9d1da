//! A daemon that ran calls and then stays idle gives the memory they freed back to the
//! system (one big search left ~200 MiB resident in glibc's arenas): once no call
//! has run for `[limits] trim_after_idle_s`, it trims, once per idle spell and never while a
//! call is in flight, and logs it. The RSS figures are in docs/BENCHMARKS.md (`--bench
//! memory`); this test checks the mechanism, never a size or a time.

use std::time::Duration;

use serde_json::json;
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::wire::{Outcome, Tier};
use toolvisor_tests::{TestDaemon, wait_for};

const IDLE_TRIM: &str = "gave freed memory back after an idle spell";
const CALL_ENDED: &str = "call ended";

/// The log lines that are an idle trim or a call's end, in order.
fn events(d: &TestDaemon) -> Vec<&'static str> {
    d.log_text()
        .lines()
        .filter_map(|l| {
            if l.contains(IDLE_TRIM) {
                Some("trim")
            } else if l.contains(CALL_ENDED) {
                Some("ended")
            } else {
                None
            }
        })
        .collect()
}

fn probe(d: &TestDaemon, sleep_ms: u64) {
    let mut c = d.client(Codec::Json, Tier::Read, false);
    let reply = c
        .call(
            "conv",
            "_probe_serial",
            json!({"tag": "t", "sleep_ms": sleep_ms}),
        )
        .expect("probe call");
    assert!(
        matches!(reply.outcome, Outcome::Ok(_)),
        "probe failed: {:?}",
        reply.outcome
    );
}

#[test]
fn an_idle_daemon_trims_once_per_idle_spell_and_never_during_a_call() {
    let d = TestDaemon::start("[testing]\nprobe_tools = true\n[limits]\ntrim_after_idle_s = 1\n");
    assert!(
        events(&d).is_empty(),
        "a daemon that ran no call trimmed or ended a call: {:?}",
        events(&d)
    );

    probe(&d, 0);
    wait_for(
        "an idle trim after the first call",
        Duration::from_secs(30),
        || (events(&d).contains(&"trim")).then_some(()),
    );

    // A call that lasts longer than the idle spell: no trim while it runs, one after it.
    probe(&d, 2_500);
    wait_for(
        "an idle trim after the long call",
        Duration::from_secs(30),
        || (events(&d).iter().filter(|e| **e == "trim").count() >= 2).then_some(()),
    );
    assert_eq!(
        events(&d)[..4],
        ["ended", "trim", "ended", "trim"],
        "expected: call, trim after it, the long call with no trim during it, trim after it\n--- daemon log ---\n{}",
        d.log_text()
    );
}

#[test]
fn idle_trims_are_off_with_zero() {
    // With `trim_after_idle_s = 0` the only trims are after bursts of sessions: a call and the
    // burst-free disconnects that follow leave no idle trim behind a later call's end.
    let d = TestDaemon::start("[testing]\nprobe_tools = true\n[limits]\ntrim_after_idle_s = 0\n");
    probe(&d, 0);
    probe(&d, 1_500);
    probe(&d, 0);
    assert!(
        !events(&d).contains(&"trim"),
        "trimmed although idle trims are off:\n{}",
        d.log_text()
    );
}
