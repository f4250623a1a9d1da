//! `toolvisor operator` driven as a person would: in a tmux pane, reading the screen
//! (capture-pane) and typing (send-keys). Each question shows as a numbered card; answers go
//! by number, free text, or `s`.

use std::process::{Command, Output};
use std::thread;
use std::time::Duration;

use serde_json::{Value as Json, json};
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::wire::Tier;
use toolvisor_tests::{TestDaemon, bin, ok_of, wait_for};

/// A tmux server of this test only (its own socket name), killed on drop.
struct Tmux {
    name: String,
}

impl Tmux {
    fn run(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .arg("-L")
            .arg(&self.name)
            .arg("-u")
            .args(args)
            .env("TERM", "xterm-256color")
            .env("LANG", "C.UTF-8")
            .output()
            .expect("tmux runs (scripts/install-test-deps installs it)")
    }

    fn screen(&self) -> String {
        let out = self.run(&["capture-pane", "-p", "-t", "op", "-S", "-200"]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn type_line(&self, text: &str) {
        let out = self.run(&["send-keys", "-t", "op", "-l", text]);
        assert!(out.status.success(), "send-keys: {out:?}");
        let out = self.run(&["send-keys", "-t", "op", "Enter"]);
        assert!(out.status.success(), "send-keys Enter: {out:?}");
    }

    /// Wait until the screen shows `what`; return the screen.
    fn wait_screen(&self, what: &str) -> String {
        let mut last = String::new();
        let found = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            wait_for(
                &format!("the operator screen to show {what:?}"),
                Duration::from_secs(20),
                || {
                    last = self.screen();
                    last.contains(what).then(|| last.clone())
                },
            )
        }));
        match found {
            Ok(screen) => screen,
            Err(_) => panic!("the operator screen never showed {what:?}; it shows:\n{last}"),
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

fn ask(d: &TestDaemon, args: Json) -> thread::JoinHandle<Json> {
    let mut harness = d.client(Codec::Bincode, Tier::Read, false);
    harness
        .set_read_timeout(Some(Duration::from_secs(90)))
        .unwrap();
    thread::spawn(move || {
        let reply = harness
            .call("conv-7", "ask_user", args)
            .expect("ask_user call");
        ok_of(&reply).clone()
    })
}

#[test]
fn a_person_answers_by_number_by_text_and_skips_in_a_tmux_pane() {
    let d = TestDaemon::start("");
    let tmux = Tmux {
        name: format!("tv-operator-{}", std::process::id()),
    };
    // A question asked before any operator was there (`no_human`) takes id 1: cards are
    // numbered by the daemon's question id (what `withdrawn` and the logs name), not by this
    // screen's own count.
    let mut early = d.client(Codec::Bincode, Tier::Read, false);
    let reply = early
        .call(
            "conv-early",
            "ask_user",
            json!({"question": "anyone there?"}),
        )
        .expect("ask_user call");
    assert!(matches!(
        reply.outcome,
        toolvisor_protocol::wire::Outcome::Err(_)
    ));
    let command = format!(
        "{} operator --run test-run --socket {}",
        bin().display(),
        d.socket.display()
    );
    let out = tmux.run(&[
        "new-session",
        "-d",
        "-s",
        "op",
        "-x",
        "150",
        "-y",
        "50",
        &command,
    ]);
    assert!(out.status.success(), "tmux new-session: {out:?}");
    tmux.wait_screen("waiting for questions");

    // A single-choice question: a wrong number and free text are refused on the spot.
    let call = ask(
        &d,
        json!({
            "question": "Which database should the tests use?",
            "context": "CI runs postgres 16",
            "options": [{"label": "postgres", "description": "the CI default"}, {"label": "sqlite"}],
        }),
    );
    let screen = tmux.wait_screen("2) sqlite");
    assert!(
        screen.contains("Question #2 · run test-run · conversation conv-7"),
        "{screen}"
    );
    assert!(
        screen.contains("Which database should the tests use?"),
        "{screen}"
    );
    assert!(screen.contains("Context: CI runs postgres 16"), "{screen}");
    assert!(screen.contains("1) postgres — the CI default"), "{screen}");
    tmux.type_line("3");
    tmux.wait_screen("there is no option 3: pick 1..2");
    tmux.type_line("duckdb please");
    tmux.wait_screen("free text is not accepted for this question");
    tmux.type_line("2");
    tmux.wait_screen("question #2 answered sqlite");
    let v = call.join().unwrap();
    assert_eq!(v["selected"], json!(["sqlite"]));

    // Several numbers where several are allowed.
    let call = ask(
        &d,
        json!({
            "question": "Which checks should run?",
            "options": [{"label": "fmt"}, {"label": "clippy"}, {"label": "tests"}],
            "multi_select": true,
        }),
    );
    tmux.wait_screen("Question #3");
    tmux.type_line("3, 1");
    tmux.wait_screen("question #3 answered fmt, tests");
    assert_eq!(call.join().unwrap()["selected"], json!(["fmt", "tests"]));

    // Free text where it is allowed.
    let call = ask(
        &d,
        json!({"question": "What should the release be called?"}),
    );
    tmux.wait_screen("Question #4");
    tmux.type_line("Aurora borealis");
    tmux.wait_screen("question #4 answered \"Aurora borealis\"");
    assert_eq!(call.join().unwrap()["text"], "Aurora borealis");

    // `s` skips.
    let call = ask(
        &d,
        json!({"question": "Delete the old fixtures?", "options": [{"label": "yes"}, {"label": "no"}]}),
    );
    tmux.wait_screen("Question #5");
    tmux.type_line("s");
    tmux.wait_screen("question #5 skipped");
    let v = call.join().unwrap();
    assert_eq!(v["skipped"], true);
    assert!(
        v["guidance"]
            .as_str()
            .unwrap()
            .contains("do not ask this again")
    );
}
