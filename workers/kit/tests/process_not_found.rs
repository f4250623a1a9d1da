//! A program that cannot be run is a synchronous, readable `SpawnError`, with and without the shim.

#[path = "support/kit.rs"]
mod kit;

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use kit::spec;
use toolvisor_kit::process::{SpawnError, spawn};

#[tokio::test]
async fn missing_program_is_not_found() {
    for shimmed in [false, true] {
        let error = spawn(spec("toolvisor-no-such-program", &[], shimmed))
            .await
            .expect_err("a missing program must not spawn");
        assert!(
            matches!(&error, SpawnError::NotFound { program, .. } if program == "toolvisor-no-such-program"),
            "{error:?}"
        );
        assert_eq!(
            error.to_string(),
            r#"command not found: "toolvisor-no-such-program" (searched PATH=/usr/local/bin:/usr/bin:/bin)"#
        );
    }
}

#[tokio::test]
async fn missing_absolute_path_is_not_found() {
    for shimmed in [false, true] {
        let error = spawn(spec("/nonexistent/toolvisor-tool", &[], shimmed))
            .await
            .expect_err("a missing program must not spawn");
        assert!(matches!(error, SpawnError::NotFound { .. }), "{error:?}");
        assert!(error.to_string().contains("/nonexistent/toolvisor-tool"));
    }
}

/// An executable script whose interpreter is missing: exec itself fails (resolution cannot
/// tell), so with the shim this is the shim's `ERR` report coming back.
#[tokio::test]
async fn exec_failure_is_reported_with_its_reason() {
    let dir = tempfile::tempdir().expect("temp dir");
    let script = dir.path().join("script");
    std::fs::write(&script, "#!/nonexistent/interpreter\n").expect("write script");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let program = script.to_str().expect("utf-8 temp path");
    for shimmed in [false, true] {
        let error = spawn(spec(program, &[], shimmed))
            .await
            .expect_err("a script without interpreter must not run");
        let SpawnError::Exec {
            program: named,
            message,
        } = &error
        else {
            panic!("expected Exec, got {error:?} (shimmed: {shimmed})");
        };
        assert_eq!(named, program);
        assert!(
            message.contains("No such file or directory") && message.contains("#!"),
            "{message} (shimmed: {shimmed})"
        );
    }
}

#[tokio::test]
async fn non_executable_file_is_permission_denied() {
    let dir = tempfile::tempdir().expect("temp dir");
    let plain = dir.path().join("plain");
    std::fs::write(&plain, "echo hi\n").expect("write file");
    let error = spawn(spec(plain.to_str().expect("utf-8"), &[], true))
        .await
        .expect_err("a non-executable file must not run");
    assert!(error.to_string().contains("permission denied"), "{error}");
}

#[tokio::test]
async fn unusable_cwd_and_shim_are_named() {
    let mut bad_cwd = spec("true", &[], false);
    bad_cwd.cwd = PathBuf::from("/nonexistent/dir");
    let error = spawn(bad_cwd).await.expect_err("missing cwd");
    assert!(matches!(error, SpawnError::Cwd { .. }), "{error:?}");
    assert!(error.to_string().contains("/nonexistent/dir"));

    let mut bad_shim = spec("true", &[], true);
    bad_shim.shim = Some(PathBuf::from("/nonexistent/shim"));
    let error = spawn(bad_shim).await.expect_err("missing shim");
    assert!(matches!(error, SpawnError::Shim { .. }), "{error:?}");
    assert!(error.to_string().contains("/nonexistent/shim"));
}
