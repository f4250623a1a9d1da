//! Tests of the vibe roster: spawn, queue, send, wait, kill, collection.
use super::*;

#[test]
fn the_brief_replaces_its_placeholder_in_every_argument() {
    let t = vec![
        "agent".to_string(),
        "--prompt={brief}".to_string(),
        "{brief}".to_string(),
        "-q".to_string(),
    ];
    assert_eq!(
        command_line(&t, "fix it"),
        vec!["agent", "--prompt=fix it", "fix it", "-q"]
    );
}

#[test]
fn commands_are_checked_against_the_childrens_path() {
    let env = vec![("PATH".to_string(), "/nonexistent:/bin:/usr/bin".to_string())];
    assert!(check_command(&["sh".into()], &env).is_ok());
    let missing = check_command(&["no-such-worker-xyz".into()], &env).unwrap_err();
    assert!(missing.contains("not on PATH"), "{missing}");
    assert!(check_command(&[], &env).unwrap_err().contains("empty"));
    assert!(
        check_command(&["/etc/passwd".into()], &env)
            .unwrap_err()
            .contains("not an executable")
    );
    assert!(check_command(&["./tools/agent".into()], &env).is_ok());
}
