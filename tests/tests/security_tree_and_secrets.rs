//! The tree masks known secrets in command lines and shows another
//! conversation's resources without their detail except to an ops client; credentials inside
//! URLs in the daemon's environment are masked in results like every other secret.

use serde_json::{Value as Json, json};
use toolvisor_protocol::client::Client;
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::wire::{ClientFrame, ClientKind, DaemonFrame, Tier};
use toolvisor_tests::{TestDaemon, options};

const TOKEN: &str = "ghp_treeSecretValue0123456789";
const DB_URL: &str = "postgres://app:hunter2-long-password@db.internal:5432/prod";

fn daemon() -> TestDaemon {
    let dir = tempfile::tempdir().unwrap();
    TestDaemon::start_with_env(
        dir,
        "",
        &[("GITHUB_TOKEN", TOKEN), ("DATABASE_URL_PLAIN", DB_URL)],
    )
}

fn client(d: &TestDaemon, kind: ClientKind) -> Client {
    let mut opts = options(Codec::Json, Tier::Exec, true);
    opts.client_kind = kind;
    Client::connect(&d.socket, opts).unwrap()
}

fn tree(c: &mut Client) -> Json {
    match c.request(&ClientFrame::Tree).unwrap() {
        DaemonFrame::Tree(t) => serde_json::to_value(t).unwrap(),
        other => panic!("expected a tree, got {other:?}"),
    }
}

/// The `process` node `id` anywhere in the tree.
fn node<'a>(tree: &'a Json, id: &str) -> &'a Json {
    fn find<'a>(n: &'a Json, id: &str) -> Option<&'a Json> {
        if n["kind"] == "process" && n["id"] == id {
            return Some(n);
        }
        n["children"]
            .as_array()
            .into_iter()
            .flatten()
            .find_map(|c| find(c, id))
    }
    find(&tree["root"], id).unwrap_or_else(|| panic!("no process {id} in {tree:#}"))
}

#[test]
fn tree_masks_secrets_and_hides_other_conversations_details() {
    let d = daemon();
    let mut mine = client(&d, ClientKind::Harness);
    let started = mine
        .call_with(
            "conv-a",
            "process",
            json!({"op": "start", "command": format!("sleep 300; echo {TOKEN}")}),
            |_| true,
        )
        .unwrap();
    let toolvisor_protocol::wire::Outcome::Ok(v) = started.outcome else {
        panic!("process start failed: {:?}", started.outcome)
    };
    let id = v["id"].as_str().unwrap().to_string();

    // The owner's client sees its command line, with the token masked.
    let t = tree(&mut mine);
    let n = node(&t, &id);
    let detail = n["detail"].as_str().unwrap();
    assert!(
        !detail.contains(TOKEN),
        "unmasked secret in the tree: {detail}"
    );
    assert!(detail.contains("[masked:GITHUB_TOKEN]"), "{detail}");
    assert_eq!(n["conversation"], "conv-a");

    // Another harness, working for another conversation, sees that a process exists but
    // not what it runs, nor whose it is.
    let mut other = client(&d, ClientKind::Harness);
    other
        .call_with("conv-b", "bash", json!({"command": "true"}), |_| true)
        .unwrap();
    let t = tree(&mut other);
    let n = node(&t, &id);
    assert!(
        !n["detail"].as_str().unwrap().contains("sleep"),
        "another conversation's command line leaked: {n}"
    );
    assert_eq!(n["conversation"], Json::Null);

    // An ops client sees every conversation's resources, still masked.
    let mut ops = client(&d, ClientKind::Ops);
    let t = tree(&mut ops);
    let n = node(&t, &id);
    let detail = n["detail"].as_str().unwrap();
    assert!(detail.contains("sleep 300") && detail.contains("[masked:GITHUB_TOKEN]"));
    assert!(!detail.contains(TOKEN));
    assert_eq!(n["conversation"], "conv-a");

    // The CLI is an ops client: same view, masked.
    let out = std::process::Command::new(toolvisor_tests::bin())
        .args(["tree", "--json", "--socket"])
        .arg(&d.socket)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("[masked:GITHUB_TOKEN]") && !text.contains(TOKEN),
        "{text}"
    );
}

#[test]
fn url_credentials_in_the_environment_are_masked_in_results() {
    let d = daemon();
    let v = d.ok(
        "c",
        "bash",
        json!({"command": "echo url=postgres://app:hunter2-long-password@db.internal/x; echo pw=hunter2-long-password"}),
    );
    let text = v.to_string();
    assert!(
        !text.contains("hunter2-long-password"),
        "URL password leaked: {text}"
    );
    assert!(
        text.contains("[masked:DATABASE_URL_PLAIN (URL credentials)]"),
        "{text}"
    );
    assert!(
        text.contains("[masked:DATABASE_URL_PLAIN (URL password)]"),
        "{text}"
    );
}

#[test]
fn tokens_of_well_known_formats_are_masked_wherever_they_come_from() {
    // Not in the daemon's environment: found by their form. Built at run time so
    // the source holds no token-shaped string.
    let gh = format!("gh{}_{}", "p", "Zq8".repeat(12));
    let aws_secret = format!("wJalrXUtnFEMI/K7MDENG/{}", "bPxRfiCY".repeat(3))[..40].to_string();
    let aws_id = format!("AKIA{}", "IOSFODNN7EXAMPLE");
    let d = daemon();
    let work = d.dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let file = work.join("deploy.env");
    std::fs::write(
        &file,
        format!("GH={gh}\naws_access_key_id = {aws_id}\naws_secret_access_key = {aws_secret}\n"),
    )
    .unwrap();
    let path = file.display().to_string();
    let results = [
        d.ok("c", "read", json!({"path": path})),
        d.ok(
            "c",
            "grep",
            json!({"pattern": "=", "path": work.display().to_string()}),
        ),
        d.ok("c", "bash", json!({"command": format!("cat {path}")})),
    ];
    for v in results {
        let text = v.to_string();
        for secret in [&gh, &aws_secret, &aws_id] {
            assert!(!text.contains(secret.as_str()), "leaked {secret}: {text}");
        }
        assert!(text.contains("[masked:github token]"), "{text}");
        assert!(
            text.contains("aws_secret_access_key = [masked:aws secret access key]"),
            "{text}"
        );
        assert!(text.contains("[masked:aws access key id]"), "{text}");
    }
}

#[test]
fn an_out_of_scope_error_masks_a_secret_in_where_a_link_leads() {
    // A link in the workdir whose target outside it names a secret: the refusal says where
    // the path resolves, with the secret masked as in any result.
    let d = daemon();
    let work = d.dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join(format!("backup-{TOKEN}.txt"));
    std::fs::write(&target, "x\n").unwrap();
    std::os::unix::fs::symlink(&target, work.join("notes.txt")).unwrap();
    let mut opts = options(Codec::Json, Tier::Exec, true);
    opts.workdir = work.display().to_string();
    let mut c = Client::connect(&d.socket, opts).unwrap();
    let outcome = c
        .call_with("c", "read", json!({"path": "notes.txt"}), |_| true)
        .unwrap()
        .outcome;
    let e = match outcome {
        toolvisor_protocol::wire::Outcome::Err(e) => e,
        toolvisor_protocol::wire::Outcome::Ok(v) => panic!("read through the link: {}", v.0),
    };
    assert_eq!(e.kind, toolvisor_protocol::ErrorKind::OutOfScope, "{e:?}");
    assert!(!e.message.contains(TOKEN), "leaked the secret: {e:?}");
    assert!(e.message.contains("[masked:GITHUB_TOKEN]"), "{e:?}");
}
