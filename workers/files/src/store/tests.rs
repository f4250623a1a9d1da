//! Tests of the result store: projection, paging, refs, masking, expiry.
use super::*;

fn store(dir: &Path) -> ResultStore {
    let mut cfg = StoreConfig::new(dir.join("results"));
    cfg.inline_chars = 2000;
    cfg.projection_chars = 600;
    ResultStore::open(cfg, Secrets::default()).unwrap()
}

fn page_all(s: &ResultStore, conv: &str, r: &str, limit: usize) -> String {
    let mut out = String::new();
    let mut offset = 0;
    loop {
        let sl = s
            .read(conv, r, Some(offset), Some(limit), 16 << 20)
            .unwrap();
        assert_eq!(sl.offset, offset as u64);
        out.push_str(&sl.text);
        offset = sl.next_offset as usize;
        if sl.eof {
            break;
        }
    }
    out
}

#[test]
fn json_chars_is_exact_and_the_bound_holds() {
    for v in [
        json!({"a": "plain", "b": [1, -2.5, true, null], "c": {"d": "x\"y\\z\n\t\u{1}"}}),
        json!("한글 🦀 \u{7f} \u{0c}\u{08}"),
        json!([]),
        json!({}),
    ] {
        let text = serde_json::to_string(&v).unwrap();
        assert_eq!(json_chars(&v), text.chars().count(), "{text}");
        assert!(json_chars_bound(&v) >= json_chars(&v));
    }
}

#[test]
fn small_results_pass_large_ones_are_projected_and_paged_back() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path());
    let small = json!({"stdout": "hi", "exit_code": 0});
    assert_eq!(s.finish("c", "bash", small.clone()), small);

    let big: String = (0..3000).map(|i| format!("줄 {i} ✓\n")).collect();
    let v = s.finish(
        "c",
        "bash",
        json!({"stdout": big, "stderr": "", "exit_code": 0}),
    );
    assert!(json_chars(&v) <= 2000, "{}", json_chars(&v));
    let p = &v["projected"]["stdout"];
    assert_eq!(p["storage_kind"], "inspectable");
    assert_eq!(p["total_chars"], big.chars().count());
    let r = p["ref"].as_str().unwrap();
    assert!(v["stdout"].as_str().unwrap().contains(r));
    assert!(v["stdout"].as_str().unwrap().starts_with("줄 0 ✓\n"));
    assert_eq!(page_all(&s, "c", r, 777), big);
    let sl = s.read("c", r, None, None, 16 << 20).unwrap();
    assert_eq!(
        (sl.source_tool.as_str(), sl.content_type.as_str()),
        ("bash", "text/plain")
    );
}

#[test]
fn arrays_and_whole_values() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path());
    let paths: Vec<String> = (0..500).map(|i| format!("src/file_{i}.rs")).collect();
    let v = s.finish("c", "find", json!({"paths": paths, "total": 500}));
    let p = &v["projected"]["paths"];
    assert_eq!(p["total_items"], 500);
    let shown = v["paths"].as_array().unwrap().len();
    assert_eq!(p["shown_items"], shown);
    assert!(shown > 10 && shown < 500);
    let r = p["ref"].as_str().unwrap();
    assert_eq!(page_all(&s, "c", r, 1000), paths.join("\n") + "\n");

    let nested = json!({"a": {"deep": (0..400).map(|i| json!({"i": i})).collect::<Vec<_>>()}});
    let v = s.finish("c", "x", nested.clone());
    let r = v["projected"]["result"]["ref"].as_str().unwrap();
    let back: Json = serde_json::from_str(&page_all(&s, "c", r, 5000)).unwrap();
    assert_eq!(back, nested);
}

#[test]
fn refs_are_scoped_validated_and_never_reconstructed() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path());
    let v = s.finish("mine", "bash", json!({"stdout": "x".repeat(5000)}));
    let r = v["projected"]["stdout"]["ref"]
        .as_str()
        .unwrap()
        .to_string();
    let err = |e: Error| e.to_tool_error("tool_result_read").kind;
    use toolvisor_protocol::ErrorKind as K;
    assert_eq!(
        err(s.read("theirs", &r, None, None, 1 << 20).unwrap_err()),
        K::OutOfScope
    );
    assert_eq!(
        err(s
            .read("mine", "tr_example", None, None, 1 << 20)
            .unwrap_err()),
        K::InvalidRef
    );
    assert_eq!(
        err(s.read("mine", "/tmp/x", None, None, 1 << 20).unwrap_err()),
        K::InvalidRef
    );
    assert_eq!(
        err(s
            .read("mine", "tr_00000000000000000000", None, None, 1 << 20)
            .unwrap_err()),
        K::NotFound
    );
    // A damaged store answers not_available, never a reconstruction.
    let key = conv_key("mine");
    std::fs::write(
        dir.path()
            .join("results")
            .join(key)
            .join(format!("{r}.txt")),
        "xx",
    )
    .unwrap();
    assert_eq!(
        err(s.read("mine", &r, None, None, 1 << 20).unwrap_err()),
        K::NotAvailable
    );
    // Out of range.
    let e = s
        .read("mine", &r, Some(10), Some(MAX_READ_CHARS + 1), 1 << 20)
        .unwrap_err();
    assert_eq!(err(e), K::InvalidArgs);
}

#[test]
fn too_big_and_evicted_results_are_not_available() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = StoreConfig::new(dir.path().join("results"));
    cfg.inline_chars = 2000;
    cfg.projection_chars = 600;
    cfg.max_result_bytes = 10_000;
    cfg.max_bytes_per_conversation = 12_000;
    let s = ResultStore::open(cfg, Secrets::default()).unwrap();
    let v = s.finish("c", "bash", json!({"stdout": "y".repeat(20_000)}));
    assert_eq!(v["projected"]["stdout"]["storage_kind"], "projected");
    let r = v["projected"]["stdout"]["ref"].as_str().unwrap();
    let e = s.read("c", r, None, None, 1 << 20).unwrap_err();
    assert!(e.to_string().contains("max_result_bytes"), "{e}");
    let first = s.finish("c", "bash", json!({"stdout": "a".repeat(8000)}));
    let first = first["projected"]["stdout"]["ref"]
        .as_str()
        .unwrap()
        .to_string();
    // In the same millisecond or not, the older one goes.
    s.finish("c", "bash", json!({"stdout": "b".repeat(8000)}));
    let e = s.read("c", &first, None, None, 1 << 20).unwrap_err();
    assert!(e.to_string().contains("evicted"), "{e}");
}

#[test]
fn secrets_are_masked_before_storing_and_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = StoreConfig::new(dir.path().join("results"));
    cfg.inline_chars = 2000;
    cfg.projection_chars = 600;
    let secrets = Secrets::from_vars(
        [("MY_TOKEN".to_string(), "s3cr3t-value-123".to_string())],
        &[],
        &["*_TOKEN".to_string()],
        8,
    )
    .unwrap();
    let s = ResultStore::open(cfg, secrets).unwrap();
    let v = s.finish("c", "bash", json!({"stdout": "token s3cr3t-value-123"}));
    assert_eq!(v["stdout"], "token [masked:MY_TOKEN]");
    assert_eq!(v["masked"], json!(["MY_TOKEN"]));
    let big = format!("{}s3cr3t-value-123{}", "x".repeat(3000), "y".repeat(3000));
    let v = s.finish("c", "bash", json!({"stdout": big}));
    let r = v["projected"]["stdout"]["ref"].as_str().unwrap();
    let sl = s.read("c", r, Some(2990), Some(40), 1 << 20).unwrap();
    assert_eq!(sl.text, "xxxxxxxxxx[masked:MY_TOKEN]yyyyyyyyyyyyy");
    assert_eq!(sl.masked["MY_TOKEN"], 1);
    let on_disk = std::fs::read_dir(dir.path().join("results").join(conv_key("c")))
        .unwrap()
        .flatten()
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .collect::<String>();
    assert!(!on_disk.contains("s3cr3t-value-123"));
}

/// A stored result's files swapped for FIFOs (a `bash` call can do it) are refused when read,
/// never waited on: the old code opened them and waited for a writer for ever.
#[test]
fn a_stored_file_swapped_for_a_fifo_is_refused_without_waiting() {
    let dir = tempfile::tempdir().unwrap();
    let s = std::sync::Arc::new(store(dir.path()));
    let big: String = (0..3000).map(|i| format!("line {i}\n")).collect();
    let v = s.finish("c", "bash", json!({"stdout": big, "exit_code": 0}));
    let r = v["projected"]["stdout"]["ref"]
        .as_str()
        .unwrap()
        .to_string();
    let conv = dir.path().join("results").join(conv_key("c"));
    for file in [format!("{r}.txt"), format!("{r}.json")] {
        std::fs::remove_file(conv.join(&file)).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(conv.join(&file))
            .status()
            .unwrap();
        assert!(made.success());
        let (tx, rx) = std::sync::mpsc::channel();
        let (s2, r2) = (s.clone(), r.clone());
        std::thread::spawn(move || {
            let _ = tx.send(s2.read("c", &r2, None, None, 16 << 20).map(|sl| sl.text));
        });
        let got = rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("reading {file} waited on the FIFO"));
        let e = got.expect_err("a FIFO was read as a stored result");
        assert!(
            e.to_string()
                .contains("a FIFO (named pipe), not a regular file"),
            "{file}: {e}"
        );
    }
}
