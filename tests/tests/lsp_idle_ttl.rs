//! A language server unused for its idle TTL is shut down (and shows as stopped); the next
//! call starts a fresh one and answers as before.

use std::time::Duration;

use serde_json::json;
use toolvisor_tests::lsp::{lsp_config, ok_in, project, require};
use toolvisor_tests::{TestDaemon, alive, wait_for};

#[test]
fn an_idle_server_is_stopped_and_started_again_on_use() {
    require("pyright-langserver");
    let p = project(&[
        ("pyproject.toml", ""),
        ("m.py", "def f() -> int:\n    return 1\n\n\nf()\n"),
    ]);
    let w = p.path();
    let d = TestDaemon::start(&lsp_config("idle_ttl_s = 1\n"));
    let ask = json!({"op": "definition", "file": "m.py", "line": 5, "symbol": "f"});
    let first = ok_in(&d, w, "lsp", ask.clone());
    let pid = first["server"]["pid"].as_u64().unwrap() as u32;
    wait_for(
        "the idle server to be stopped",
        Duration::from_secs(30),
        || (!alive(pid)).then_some(()),
    );
    let status = ok_in(&d, w, "lsp", json!({"op": "status"}));
    assert_eq!(status["servers"][0]["state"], "stopped", "{status}");
    let again = ok_in(&d, w, "lsp", ask);
    assert_eq!(again["text"], first["text"]);
    assert_ne!(again["server"]["pid"], first["server"]["pid"]);
    assert!(d.log_text().contains("language server TTL expired"));
}
