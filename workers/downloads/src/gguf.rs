//! What a GGUF file of a repo is, by its name: a model's weights, a multimodal projector
//! (`mmproj-*.gguf`, which llama.cpp loads beside a model with `--mmproj`, never as the model),
//! or another GGUF that is no model at all (a vocabulary-only file, an importance matrix, a
//! LoRA adapter). The variant choice (`choose`) never makes a variant of the last two kinds and
//! gives a GGUF variant its repo's projector; the inference pool (`model_files`) takes the model
//! file from a variant's files and never a projector.

/// The role of a GGUF file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Model,
    Projector,
    /// Not loadable as a model: what it is, for messages.
    Other(&'static str),
}

/// The name's words: the file's base name, lower-cased, split at `-`, `_` and `.`.
fn words(name: &str) -> Vec<String> {
    let file = name.rsplit('/').next().unwrap_or(name).to_ascii_lowercase();
    let base = file.strip_suffix(".gguf").unwrap_or(&file).to_string();
    base.split(['-', '_', '.'])
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

/// The role of the GGUF file `name` (a path inside the repo).
pub fn role(name: &str) -> Role {
    let file = name.rsplit('/').next().unwrap_or(name).to_ascii_lowercase();
    let words = words(name);
    let has = |w: &str| words.iter().any(|x| x == w);
    if file.contains("mmproj") || has("projector") {
        Role::Projector
    } else if file.starts_with("ggml-vocab") || has("vocab") {
        Role::Other("a vocabulary-only GGUF")
    } else if has("imatrix") {
        Role::Other("an importance matrix")
    } else if has("lora") {
        Role::Other("a LoRA adapter")
    } else {
        Role::Model
    }
}

/// A GGUF name (case-insensitive suffix).
pub fn is_gguf(name: &str) -> bool {
    name.to_ascii_lowercase().ends_with(".gguf")
}

/// The projector to ship with a GGUF variant labelled `label`: the one of the same label
/// (`mmproj-Q8_0.gguf` for `Q8_0`), else F16, BF16, F32 in that order, else the first by
/// name. `label_of` gives a projector's label.
pub fn pick_projector<'a>(
    label: &str,
    projectors: &[&'a str],
    label_of: impl Fn(&str) -> String,
) -> Option<&'a str> {
    let mut sorted: Vec<&'a str> = projectors.to_vec();
    sorted.sort_unstable();
    let by_label = |l: &str| {
        sorted
            .iter()
            .copied()
            .find(|p| label_of(p).eq_ignore_ascii_case(l))
    };
    by_label(label)
        .or_else(|| ["F16", "BF16", "F32"].into_iter().find_map(by_label))
        .or_else(|| sorted.first().copied())
}

/// The files a server loads from a variant's file names: the model (the first GGUF model
/// file by name, which is the first shard of a split model) and its projector, if any.
pub fn model_files<'a>(names: &[&'a str]) -> (Option<&'a str>, Option<&'a str>) {
    let mut ggufs: Vec<&'a str> = names.iter().copied().filter(|n| is_gguf(n)).collect();
    ggufs.sort_unstable();
    let model = ggufs.iter().copied().find(|n| role(n) == Role::Model);
    let projector = ggufs.iter().copied().find(|n| role(n) == Role::Projector);
    (model, projector)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn projectors_and_other_ggufs_are_told_from_models() {
        for p in [
            "mmproj-F16.gguf",
            "mmproj-model-f16.gguf",
            "gemma-3-4b-it-mmproj-BF16.gguf",
            "sub/MMPROJ-Q8_0.gguf",
        ] {
            assert_eq!(role(p), Role::Projector, "{p}");
        }
        assert_eq!(
            role("ggml-vocab-llama-bpe.gguf"),
            Role::Other("a vocabulary-only GGUF")
        );
        assert_eq!(
            role("model-imatrix.gguf"),
            Role::Other("an importance matrix")
        );
        assert_eq!(role("adapter-lora-F16.gguf"), Role::Other("a LoRA adapter"));
        for m in [
            "model-F16.gguf",
            "tiny-Q4_K_M-00001-of-00003.gguf",
            "Flora-7B-Q4_0.gguf",
            "vocabulary-expert-Q8_0.gguf",
        ] {
            assert_eq!(role(m), Role::Model, "{m}");
        }
    }

    #[test]
    fn the_model_file_is_never_the_projector_even_when_it_sorts_first() {
        // "mmproj-F16.gguf" < "model-F16.gguf": the old choice loaded the projector.
        assert_eq!(
            model_files(&["mmproj-F16.gguf", "model-F16.gguf", "README.md"]),
            (Some("model-F16.gguf"), Some("mmproj-F16.gguf"))
        );
        assert_eq!(
            model_files(&["m-00002-of-00002.gguf", "m-00001-of-00002.gguf"]),
            (Some("m-00001-of-00002.gguf"), None)
        );
        assert_eq!(
            model_files(&["mmproj-F16.gguf"]),
            (None, Some("mmproj-F16.gguf"))
        );
    }

    #[test]
    fn a_variant_takes_the_projector_of_its_label_else_f16() {
        let label = |p: &str| {
            p.trim_end_matches(".gguf")
                .rsplit('-')
                .next()
                .unwrap()
                .to_string()
        };
        let ps = ["mmproj-F32.gguf", "mmproj-BF16.gguf", "mmproj-F16.gguf"];
        assert_eq!(pick_projector("F32", &ps, label), Some("mmproj-F32.gguf"));
        assert_eq!(
            pick_projector("Q4_K_M", &ps, label),
            Some("mmproj-F16.gguf")
        );
        assert_eq!(
            pick_projector("Q4_K_M", &["mmproj-x.gguf"], label),
            Some("mmproj-x.gguf")
        );
        assert_eq!(pick_projector("Q4_K_M", &[], label), None);
    }
}
