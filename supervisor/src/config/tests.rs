//! Tests of the config: embedded defaults, overrides, and what each refusal names.

use super::*;

#[test]
fn inference_settings_load_and_bad_ones_are_named() {
    let c = load("[inference]\nidle_ttl_s = 60\non_demand = true\ncommands.gguf = [\"srv\", \"--port\", \"{port}\"]\nlisten = \"127.0.0.1:8080\"\n").unwrap();
    assert_eq!(c.inference.idle_ttl_s, 60);
    assert!(c.inference.on_demand);
    assert_eq!(c.inference.commands["gguf"][0], "srv");
    for (text, key) in [
        (
            "[inference]\nlisten = \"0.0.0.0:8080\"\n",
            "inference.listen",
        ),
        (
            "[inference]\ncommands.gguf = [\"srv\"]\n",
            "inference.commands.gguf",
        ),
        ("[inference]\nmax_loaded = 0\n", "inference.max_loaded"),
        ("[inference]\nttl = 3\n", "ttl"),
    ] {
        let err = load(text).unwrap_err().to_string();
        assert!(err.contains(key), "{text}: {err}");
    }
}

#[test]
fn models_token_never_shows_in_debug_and_bad_keys_are_named() {
    let c = load("[models]\nendpoint = \"http://127.0.0.1:9\"\ntoken = \"hf_abcdefgh12345\"\n")
        .unwrap();
    assert_eq!(c.models.endpoint(), "http://127.0.0.1:9");
    assert_eq!(c.models.token().as_deref(), Some("hf_abcdefgh12345"));
    assert!(!format!("{c:?}").contains("abcdefgh12345"));
    let err = load("[models]\nparallel_transfers = 0\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("models.parallel_transfers"), "{err}");
    let err = load("[models]\nconnections_per_file = 17\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("models.connections_per_file"), "{err}");
    let err = load("[models]\nendpoint = \"ftp://x\"\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("models.endpoint"), "{err}");
}

fn load(text: &str) -> Result<Config, ConfigError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("toolvisor.toml");
    std::fs::write(&path, text).unwrap();
    Config::load(Some(&path))
}

#[test]
fn a_config_file_others_could_write_is_refused_and_read_from_what_was_checked() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("toolvisor.toml");
    std::fs::write(&path, "max_frame = 4096\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert_eq!(Config::load(Some(&path)).unwrap().max_frame, 4096);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o646)).unwrap();
    let err = Config::load(Some(&path)).unwrap_err().to_string();
    assert!(
        err.contains("group or others may write it (mode 0646")
            && err.contains(&format!("chmod go-w {}", path.display())),
        "{err}"
    );
    // Our own group may (umask 002 with a group of one's own).
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o664)).unwrap();
    assert_eq!(Config::load(Some(&path)).unwrap().max_frame, 4096);
    // A FIFO is refused without blocking on its open.
    let fifo = dir.path().join("fifo.toml");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let err = Config::load(Some(&fifo)).unwrap_err().to_string();
    assert!(err.contains("not a regular file"), "{err}");
}

#[test]
fn a_config_file_of_another_user_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    assert!(
        nix::unistd::geteuid().is_root(),
        "giving a file to uid 65534 needs root; the suite runs as root"
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("toolvisor.toml");
    std::fs::write(&path, "").unwrap();
    nix::unistd::chown(&path, Some(nix::unistd::Uid::from_raw(65534)), None).unwrap();
    let err = Config::load(Some(&path)).unwrap_err().to_string();
    assert!(err.contains("belongs to uid 65534"), "{err}");
    // Ours, but writable by another group.
    nix::unistd::chown(
        &path,
        Some(nix::unistd::geteuid()),
        Some(nix::unistd::Gid::from_raw(65534)),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o664)).unwrap();
    let err = Config::load(Some(&path)).unwrap_err().to_string();
    assert!(err.contains("group 65534"), "{err}");
}

#[test]
fn trust_roots_must_be_absolute_and_vibe_tiers_default_to_read() {
    let c =
        load("[trust]\nroots = [\"/src\"]\n[vibe.tiers.fast]\ncommand = [\"agent\"]\n").unwrap();
    assert_eq!(c.trust.roots, vec![PathBuf::from("/src")]);
    let fast = c.vibe.tiers.fast.unwrap();
    assert_eq!(fast.surface, toolvisor_protocol::wire::Tier::Read);
    assert!(!fast.approvals);
    let err = load("[trust]\nroots = [\"src\"]\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("not an absolute path"), "{err}");
    let c =
        load("[vibe.tiers.good]\ncommand = [\"agent\"]\nsurface = \"write\"\napprovals = true\n")
            .unwrap();
    let good = c.vibe.tiers.good.unwrap();
    assert_eq!(good.surface, toolvisor_protocol::wire::Tier::Write);
    assert!(good.approvals);
}
