//! `read` and `ls` through the real daemon on real files: line ranges and the tail of a
//! file, non-UTF-8 and binary files, hidden files, a 5000×3000 PNG fitted to the model's
//! limits, BMP converted to PNG, an image that cannot fit, and config validation.

use std::io::Cursor;
use std::path::Path;
use std::process::{Command, Stdio};

use base64::Engine;
use serde_json::{Value as Json, json};
use toolvisor_protocol::client::Client;
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::error::{ErrorKind, ToolError};
use toolvisor_protocol::wire::{Outcome, Tier};
use toolvisor_tests::{TestDaemon, bin, options};

fn client(d: &TestDaemon, workdir: &Path) -> Client {
    let mut o = options(Codec::Json, Tier::Exec, true);
    o.workdir = workdir.display().to_string();
    Client::connect(&d.socket, o).expect("connect")
}

fn call(c: &mut Client, tool: &str, args: Json) -> Result<Json, ToolError> {
    match c
        .call_with("c", tool, args, |_| true)
        .expect("call")
        .outcome
    {
        Outcome::Ok(v) => Ok(v.0),
        Outcome::Err(e) => Err(e),
    }
}

fn ok(c: &mut Client, tool: &str, args: Json) -> Json {
    call(c, tool, args.clone()).unwrap_or_else(|e| panic!("{tool} {args}: {e}"))
}

fn png(w: u32, h: u32) -> Vec<u8> {
    // A gradient with noise-free structure: compresses, yet is not trivial to shrink.
    let img = image::RgbImage::from_fn(w, h, |x, y| {
        image::Rgb([
            (x % 251) as u8,
            (y % 241) as u8,
            ((x / 7 + y / 5) % 256) as u8,
        ])
    });
    let mut out = Vec::new();
    image::DynamicImage::ImageRgb8(img)
        .write_to(&mut Cursor::new(&mut out), image::ImageFormat::Png)
        .unwrap();
    out
}

fn decode(v: &Json) -> image::DynamicImage {
    let data = base64::engine::general_purpose::STANDARD
        .decode(v["data"].as_str().expect("image data"))
        .expect("base64");
    image::load_from_memory(&data).expect("a decodable image")
}

#[test]
fn text_ranges_tail_encodings_and_binary() {
    let d = TestDaemon::start("");
    let tree = tempfile::tempdir().unwrap();
    let body: String = (1..=500).map(|i| format!("line {i} — ünïcode\n")).collect();
    std::fs::write(tree.path().join("big.txt"), &body).unwrap();
    std::fs::write(tree.path().join(".hidden.env"), "A=1\n").unwrap();
    std::fs::write(tree.path().join("latin1.txt"), b"caf\xe9\nna\xefve\n").unwrap();
    std::fs::write(
        tree.path().join("prog.bin"),
        b"\x7fELF\x02\x01\x01\0\0\0rest",
    )
    .unwrap();
    let mut c = client(&d, tree.path());

    let v = ok(
        &mut c,
        "read",
        json!({"path": "big.txt", "offset": 10, "limit": 2}),
    );
    assert_eq!(
        v["content"],
        "10\tline 10 — ünïcode\n11\tline 11 — ünïcode\n"
    );
    assert_eq!(v["next_offset"], 12);
    assert_eq!(v["total_lines"], 500);
    assert_eq!(v["eof"], false);

    let v = ok(&mut c, "read", json!({"path": "big.txt", "offset": -2}));
    assert_eq!(
        v["content"],
        "499\tline 499 — ünïcode\n500\tline 500 — ünïcode\n"
    );
    assert_eq!(v["eof"], true);

    let err = call(&mut c, "read", json!({"path": "big.txt", "offset": 501})).unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidArgs);
    assert!(err.message.contains("has 500 lines"), "{err}");

    let v = ok(&mut c, "read", json!({"path": ".hidden.env"}));
    assert_eq!(v["content"], "1\tA=1\n");

    let v = ok(&mut c, "read", json!({"path": "latin1.txt"}));
    assert_eq!(v["content"], "1\tcaf\u{FFFD}\n2\tna\u{FFFD}ve\n");
    assert_eq!(v["invalid_utf8"], 2);
    assert!(v["notes"][0].as_str().unwrap().contains("not valid UTF-8"));

    let err = call(&mut c, "read", json!({"path": "prog.bin"})).unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidArgs);
    assert!(
        err.message.contains("binary file (NUL byte at offset 7)"),
        "{err}"
    );

    let err = call(&mut c, "read", json!({"path": "missing.txt"})).unwrap_err();
    assert_eq!(err.kind, ErrorKind::NotFound);
    let err = call(&mut c, "read", json!({"path": "."})).unwrap_err();
    assert!(
        err.message.contains("is a directory") && err.hint.contains("ls"),
        "{err}"
    );

    let v = ok(&mut c, "ls", json!({}));
    let names: Vec<&str> = v["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, [".hidden.env", "big.txt", "latin1.txt", "prog.bin"]);
}

#[test]
fn a_5000_by_3000_png_is_resized_to_the_model_limits() {
    let d = TestDaemon::start("");
    let tree = tempfile::tempdir().unwrap();
    std::fs::write(tree.path().join("shot.png"), png(5000, 3000)).unwrap();
    std::fs::write(tree.path().join("small.png"), png(64, 32)).unwrap();
    let mut c = client(&d, tree.path());

    let v = ok(&mut c, "read", json!({"path": "shot.png"}));
    assert_eq!(v["kind"], "image");
    assert_eq!(
        (v["width"].as_u64(), v["height"].as_u64()),
        (Some(2000), Some(1200))
    );
    assert_eq!(v["source"]["width"], 5000);
    assert_eq!(v["transformed"], true);
    assert!(v["data"].as_str().unwrap().len() <= 4_718_592);
    let img = decode(&v);
    assert_eq!((img.width(), img.height()), (2000, 1200));
    assert!(
        v["note"]
            .as_str()
            .unwrap()
            .contains("resized from 5000×3000 to 2000×1200")
    );

    // Within the limits: the file's own bytes, untouched.
    let v = ok(&mut c, "read", json!({"path": "small.png"}));
    assert_eq!(
        (v["transformed"].as_bool(), v["mime_type"].as_str()),
        (Some(false), Some("image/png"))
    );
    assert_eq!(decode(&v).width(), 64);
}

#[test]
fn configured_limits_bmp_and_images_that_cannot_fit() {
    let d = TestDaemon::start(
        "[input_limits.images.resize]\nmaxWidth = 300\nmaxHeight = 200\nmaxBytes = 60000\njpegQuality = 70\n",
    );
    let tree = tempfile::tempdir().unwrap();
    let img = image::RgbImage::from_fn(640, 480, |x, y| image::Rgb([x as u8, y as u8, 7]));
    let mut bmp = Vec::new();
    image::DynamicImage::ImageRgb8(img)
        .write_to(&mut Cursor::new(&mut bmp), image::ImageFormat::Bmp)
        .unwrap();
    std::fs::write(tree.path().join("scan.bmp"), bmp).unwrap();
    let mut c = client(&d, tree.path());
    let v = ok(&mut c, "read", json!({"path": "scan.bmp"}));
    assert_eq!(v["source"]["format"], "bmp");
    assert!(
        matches!(v["mime_type"].as_str(), Some("image/png" | "image/jpeg")),
        "{v}"
    );
    let img = decode(&v);
    assert_eq!((img.width(), img.height()), (267, 200));
    assert!(v["data"].as_str().unwrap().len() <= 60_000);
    drop(c);

    let d = TestDaemon::start("[input_limits.images.resize]\nmaxBytes = 100\n");
    let mut c = client(&d, tree.path());
    let v = ok(&mut c, "read", json!({"path": "scan.bmp"}));
    assert_eq!(v["kind"], "image_omitted");
    assert!(v.get("data").is_none());
    assert!(
        v["note"]
            .as_str()
            .unwrap()
            .contains("could not be made to fit"),
        "{v}"
    );
}

#[test]
fn invalid_image_limits_are_config_errors_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    for (toml, key) in [
        (
            "[input_limits.images.resize]\njpegQuality = 101\n",
            "jpegQuality = 101",
        ),
        (
            "[input_limits.images.resize]\nmaxWidth = 0\n",
            "maxWidth = 0",
        ),
        (
            "[result_store]\nprojection_chars = 40000\n",
            "projection_chars",
        ),
        ("[files]\nsearch_timeout_s = 0\n", "files.search_timeout_s"),
    ] {
        let cfg = dir.path().join("bad.toml");
        std::fs::write(&cfg, toml).unwrap();
        let out = Command::new(bin())
            .arg("serve")
            .arg("--socket")
            .arg(dir.path().join("s.sock"))
            .arg("--config")
            .arg(&cfg)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(!out.status.success(), "{toml} was accepted");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(key), "{toml}: {stderr}");
    }
}

/// `offset` 2^63 or 2^64-1 did not fit the handler's integer and silently read from
/// line 1, a plausible wrong answer. It is refused naming the argument.
#[test]
fn an_offset_past_i64_is_refused_not_read_from_line_one() {
    let d = TestDaemon::start("");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f.txt"), "one\ntwo\n").unwrap();
    let mut c = client(&d, dir.path());
    for big in [json!(9_223_372_036_854_775_808u64), json!(u64::MAX)] {
        let err = call(&mut c, "read", json!({"path": "f.txt", "offset": big})).unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidArgs, "{err}");
        assert!(err.message.contains("`offset`"), "{err}");
        let err = call(
            &mut c,
            "tool_result_read",
            json!({"ref": "r1", "offset": big}),
        )
        .unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidArgs, "{err}");
    }
    // The largest that fits is past the end, and says so.
    let err = call(&mut c, "read", json!({"path": "f.txt", "offset": i64::MAX})).unwrap_err();
    assert!(err.message.contains("past the end"), "{err}");
}
