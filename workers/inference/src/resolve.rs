//! From the name `load_model` is given to what a server loads: the one complete model of the
//! store that `owner/name[@revision][:variant]` names (two revisions of a repo with the same
//! variant are told apart by `@revision`; an ambiguous name is refused listing the names that
//! pick each one), its model file — never a multimodal projector or another GGUF that is no
//! model (`toolvisor_downloads::gguf`) — and its projector, which the default llama-server
//! command gets as `--mmproj`.

use std::path::{Path, PathBuf};

use toolvisor_downloads::gguf;
use toolvisor_downloads::store::{self, Manifest, Store};

use crate::error::InferenceError;

/// The complete store model `model` names, and its directory.
pub fn resolve(store: &Store, model: &str) -> Result<(Manifest, PathBuf), InferenceError> {
    let all = store.manifests();
    let complete: Vec<&(PathBuf, Manifest)> = all
        .iter()
        .filter(|(dir, m)| {
            m.files
                .iter()
                .all(|f| store.present(dir, f, m.verified(&f.name)).1)
        })
        .collect();
    match store::pick(&complete, model) {
        Ok((dir, m)) => Ok((m.clone(), dir.clone())),
        Err(store::Picked::None(have)) => Err(InferenceError::NotInStore {
            model: model.to_string(),
            have,
        }),
        Err(store::Picked::Several(names)) => Err(InferenceError::Ambiguous {
            model: model.to_string(),
            names,
        }),
    }
}

/// What a server of a model loads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelFiles {
    /// The model file (the first shard of a split GGUF), or the directory for safetensors.
    pub path: PathBuf,
    /// `gguf`, `safetensors` or `unknown`: which `[inference.commands]` entry runs it.
    pub format: String,
    /// The variant's multimodal projector, if it has one.
    pub projector: Option<PathBuf>,
}

/// The files of `manifest` in `dir` a server loads.
pub fn model_files(
    dir: &Path,
    manifest: &Manifest,
    model: &str,
) -> Result<ModelFiles, InferenceError> {
    let names: Vec<&str> = manifest.files.iter().map(|f| f.name.as_str()).collect();
    let (file, projector) = gguf::model_files(&names);
    let projector = projector.map(|p| dir.join(p));
    if let Some(f) = file {
        return Ok(ModelFiles {
            path: dir.join(f),
            format: "gguf".into(),
            projector,
        });
    }
    if names.iter().any(|n| gguf::is_gguf(n)) {
        return Err(InferenceError::NoModelFile {
            model: model.to_string(),
            files: names.iter().map(|n| n.to_string()).collect(),
        });
    }
    let format = if names.iter().any(|n| n.ends_with(".safetensors")) {
        "safetensors"
    } else {
        "unknown"
    };
    Ok(ModelFiles {
        path: dir.to_path_buf(),
        format: format.into(),
        projector: None,
    })
}

/// Give the default llama-server command the projector (`--mmproj`); whether it was given.
/// A configured command, or llama-cpp-python (which needs a chat handler for it), loads the
/// model alone.
pub fn give_projector(template: &mut Vec<String>, projector: &Option<PathBuf>) -> bool {
    match projector {
        Some(p) if *template == crate::config::llama_server() => {
            template.extend(["--mmproj".to_string(), p.display().to_string()]);
            true
        }
        _ => false,
    }
}

/// An alias requests can name: 1-64 of letters, digits and `- _ . : / @` (so a store name
/// `owner/name@revision:variant` is one too).
pub fn check_alias(alias: &str) -> Result<(), InferenceError> {
    let bad = |why| {
        Err(InferenceError::BadAlias {
            alias: alias.to_string(),
            why,
        })
    };
    if alias.is_empty() || alias.len() > 64 {
        return bad("it must be 1-64 characters");
    }
    if !alias
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':' | '/' | '@'))
    {
        return bad("only letters, digits and - _ . : / @ are allowed");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolvisor_downloads::choose::Chosen;

    fn manifest(revision: &str, files: &[&str]) -> Manifest {
        Manifest {
            repo: "walk/tiny-GGUF".into(),
            revision: revision.into(),
            variant: "F32".into(),
            files: files
                .iter()
                .map(|n| Chosen {
                    name: n.to_string(),
                    size: 3,
                    sha256: None,
                })
                .collect(),
            complete: true,
            verified: Vec::new(),
            commit: None,
            refs: Vec::new(),
        }
    }

    #[test]
    fn the_model_file_is_not_the_projector_and_the_projector_is_kept() {
        let m = manifest("main", &["mmproj-F32.gguf", "tiny-F32.gguf"]);
        let f = model_files(Path::new("/s"), &m, "walk/tiny-GGUF").unwrap();
        assert_eq!(f.path, Path::new("/s/tiny-F32.gguf"));
        assert_eq!(
            f.projector.as_deref(),
            Some(Path::new("/s/mmproj-F32.gguf"))
        );
        assert_eq!(f.format, "gguf");
        let only = manifest("main", &["mmproj-F32.gguf"]);
        let e = model_files(Path::new("/s"), &only, "walk/tiny-GGUF").unwrap_err();
        assert!(e.to_string().contains("no model file"), "{e}");
        let st = manifest("main", &["config.json", "model.safetensors"]);
        assert_eq!(
            model_files(Path::new("/s"), &st, "x").unwrap().format,
            "safetensors"
        );
    }

    #[test]
    fn two_revisions_are_told_apart_by_the_name_the_error_suggests() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open(&tmp.path().join("models")).unwrap();
        for (rev, commit) in [("main", "1".repeat(40)), ("v2", "2".repeat(40))] {
            let mut m = manifest(rev, &["tiny-F32.gguf"]);
            m.commit = Some(commit);
            let dir = store.snapshot_dir(&m.repo, rev, m.commit.as_deref());
            store.prepare(&dir, &m.files).unwrap();
            std::fs::write(dir.join("tiny-F32.gguf"), b"abc").unwrap();
            m.verified = toolvisor_downloads::store::Verified::now(&dir, &m.files[0], None, None)
                .into_iter()
                .collect();
            store.write_manifest(&dir, &m).unwrap();
            store.set_ref(&m.repo, rev, &dir).unwrap();
        }
        let e = resolve(&store, "walk/tiny-GGUF:F32").unwrap_err();
        let InferenceError::Ambiguous { names, .. } = &e else {
            panic!("{e}")
        };
        assert_eq!(names, &["walk/tiny-GGUF@main", "walk/tiny-GGUF@v2"]);
        for (name, rev) in [(&names[0], "main"), (&names[1], "v2")] {
            assert_eq!(resolve(&store, name).unwrap().0.revision, rev);
        }
        assert_eq!(
            resolve(&store, "walk/tiny-GGUF@v2:F32").unwrap().0.revision,
            "v2"
        );
        let e = resolve(&store, "walk/tiny-GGUF:F32:F32").unwrap_err();
        assert!(matches!(e, InferenceError::NotInStore { .. }), "{e}");
    }

    #[test]
    fn only_the_default_llama_server_is_given_the_projector() {
        let p = Some(PathBuf::from("/s/mmproj-F16.gguf"));
        let mut t = crate::config::llama_server();
        assert!(give_projector(&mut t, &p));
        assert_eq!(t[t.len() - 2..], ["--mmproj", "/s/mmproj-F16.gguf"]);
        let mut py = crate::config::llama_cpp_python();
        assert!(!give_projector(&mut py, &p));
        assert_eq!(py, crate::config::llama_cpp_python());
        let mut t = crate::config::llama_server();
        assert!(!give_projector(&mut t, &None));
        check_alias("walk/tiny-GGUF@v2:F32").unwrap();
        assert!(check_alias("a b").is_err());
    }
}
