//! Which files a download takes: the variant's whole file set, never a part of it. Naming one
//! shard of a split model selects all its shards; a safetensors model comes with its config
//! and tokenizer files; a GGUF repo gives the one quantisation asked for, with the repo's
//! multimodal projector when it has one (`gguf.rs`: a projector or another non-model GGUF is
//! never a variant of its own). Also the checks of the names a caller or the endpoint gives
//! (nothing may leave the repo's store directory).

use std::collections::BTreeMap;

use sha2::Digest;

use crate::error::DownloadError;
use crate::gguf::{self, Role};
use crate::hub::Sibling;

/// A file chosen for download. Its size is known (a listing without one is refused).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Chosen {
    pub name: String,
    pub size: u64,
    pub sha256: Option<String>,
}

/// The chosen file set and the name of the variant it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileSet {
    pub variant: String,
    pub files: Vec<Chosen>,
}

impl FileSet {
    pub fn total(&self) -> u64 {
        self.files.iter().map(|f| f.size).sum()
    }
}

/// `owner/name` with plain characters, as the hub spells repo ids: no `--` or `..` inside
/// either part (the Hub refuses them too), so `a--b/c` and `a/b--c` cannot both name the
/// store's `a--b--c` directory.
pub fn check_repo(repo: &str) -> Result<(), DownloadError> {
    let parts: Vec<&str> = repo.split('/').collect();
    let ok = parts.len() == 2
        && repo.len() <= 200
        && parts.iter().all(|p| plain(p))
        && !repo.contains("--")
        && !repo.contains("..");
    if ok {
        Ok(())
    } else {
        Err(DownloadError::Invalid(format!(
            "repo {repo:?} is not a repo id of the form `owner/name` (letters, digits, `-`, `_`, `.`; no `--` or `..`)"
        )))
    }
}

/// A branch, tag or commit: plain characters (a `/` inside a branch name is refused too), or
/// a pull request's ref as the Hub names it, `refs/pr/N`.
pub fn check_revision(revision: &str) -> Result<(), DownloadError> {
    let pr = revision
        .strip_prefix("refs/pr/")
        .is_some_and(|n| !n.is_empty() && n.len() <= 10 && n.bytes().all(|b| b.is_ascii_digit()));
    if pr || (plain(revision) && revision.len() <= 200) {
        Ok(())
    } else {
        Err(DownloadError::Invalid(format!(
            "revision {revision:?} is not a plain branch, tag or commit name, nor a pull request's `refs/pr/N`"
        )))
    }
}

fn plain(s: &str) -> bool {
    !s.is_empty()
        && s != "."
        && s != ".."
        && !s.starts_with('.')
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// A file name from the listing that stays inside its directory and reads as what it is:
/// relative, no `..`, no hidden or empty component, no control characters and no invisible
/// or direction-changing format characters (U+202E would show `exe.gguf` as `fuggexe`), no
/// component longer than a file name may be here (255 bytes, with room for our `.part`
/// suffix), not our `.part` or `.part.ranges` suffix.
pub fn safe_file_name(name: &str) -> bool {
    name.len() <= 512
        && !name.ends_with(".part")
        && !name.ends_with(".part.ranges")
        && name.split('/').all(|c| {
            !c.is_empty()
                && c.len() + ".part.ranges".len() <= 255
                && !c.starts_with('.')
                && !c
                    .chars()
                    .any(|ch| ch.is_control() || ch == '\\' || invisible(ch))
        })
}

/// Unicode format characters that change how a name is shown or hide inside it: the
/// bidirectional controls, zero-width characters and the byte-order mark.
fn invisible(ch: char) -> bool {
    matches!(
        ch,
        '\u{061C}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{2069}'
            | '\u{FEFF}'
    )
}

/// `stem-00001-of-00003.ext` → (`stem`, 1, 3, `ext`).
fn shard(name: &str) -> Option<(&str, u32, u32, &str)> {
    let (base, ext) = name.rsplit_once('.')?;
    let (rest, total) = base.rsplit_once("-of-")?;
    let (stem, index) = rest.rsplit_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(index) || !digits(total) {
        return None;
    }
    Some((stem, index.parse().ok()?, total.parse().ok()?, ext))
}

/// The group a file belongs to: every shard of a split file shares one key.
fn group_key(name: &str) -> String {
    match shard(name) {
        Some((stem, _, total, ext)) => format!("{stem}-*-of-{total}.{ext}"),
        None => name.to_string(),
    }
}

/// What a GGUF file's variant is called: its quantisation-ish last token, else its name.
fn gguf_label(name: &str) -> String {
    let file = name.rsplit('/').next().unwrap_or(name);
    let base = match shard(file) {
        Some((stem, ..)) => stem.to_string(),
        None => file.trim_end_matches(".gguf").to_string(),
    };
    let token = base.rsplit(['-', '.']).next().unwrap_or(&base);
    let quantish = token.len() >= 2
        && token
            .chars()
            .next()
            .is_some_and(|c| matches!(c.to_ascii_uppercase(), 'Q' | 'F' | 'I' | 'B'))
        && token.chars().any(|c| c.is_ascii_digit());
    if quantish { token.to_string() } else { base }
}

/// A GGUF group's name without `.gguf` and the shard numbers (`sub/alpha-Q4_K_M`): what
/// its variant is called when its quantisation label alone does not tell it apart.
fn group_base(name: &str) -> String {
    match shard(name) {
        Some((stem, ..)) => stem.to_string(),
        None => name.trim_end_matches(".gguf").to_string(),
    }
}

fn is_companion(name: &str) -> bool {
    let file = name.rsplit('/').next().unwrap_or(name);
    file.ends_with(".json")
        || matches!(
            file,
            "tokenizer.model" | "vocab.txt" | "merges.txt" | "vocab.json" | "spiece.model"
        )
        || file.ends_with(".tiktoken")
}

/// The variants a listing offers (GGUF quantisations, `safetensors`), for error messages and
/// search answers, each with its file set. A GGUF variant is one model file or one split
/// model's shards, called by its quantisation label (`Q4_K_M`) when no other GGUF model of
/// the repo has that label, else by its name (`alpha-Q4_K_M`); its set is its model files
/// plus the repo's projector for it (`gguf::pick_projector`), if the repo has projectors.
pub fn variants(siblings: &[Sibling]) -> Vec<FileSet> {
    labelled(siblings).into_iter().map(|(_, set)| set).collect()
}

/// `variants`, each with its quantisation label (for `safetensors`, that name).
fn labelled(siblings: &[Sibling]) -> Vec<(String, FileSet)> {
    let mut out = Vec::new();
    let mut groups: BTreeMap<String, Vec<&Sibling>> = BTreeMap::new();
    let projectors: Vec<&str> = siblings
        .iter()
        .filter(|s| gguf::is_gguf(&s.name) && gguf::role(&s.name) == Role::Projector)
        .map(|s| s.name.as_str())
        .collect();
    for s in siblings
        .iter()
        .filter(|s| gguf::is_gguf(&s.name) && gguf::role(&s.name) == Role::Model)
    {
        groups.entry(group_key(&s.name)).or_default().push(s);
    }
    let mut per_label: BTreeMap<String, usize> = BTreeMap::new();
    for files in groups.values() {
        *per_label
            .entry(gguf_label(&files[0].name).to_ascii_lowercase())
            .or_default() += 1;
    }
    let mut gguf_sets = Vec::new();
    for (_, mut files) in groups {
        let label = gguf_label(&files[0].name);
        let variant = if per_label[&label.to_ascii_lowercase()] == 1 {
            label.clone()
        } else {
            group_base(&files[0].name)
        };
        if let Some(p) = gguf::pick_projector(&label, &projectors, gguf_label)
            && let Some(s) = siblings.iter().find(|s| s.name == p)
        {
            files.push(s);
        }
        gguf_sets.push((
            label,
            FileSet {
                variant,
                files: files.into_iter().map(chosen_lossy).collect(),
            },
        ));
    }
    // In label order, as the variants were listed before.
    gguf_sets.sort_by(|a, b| (&a.0, &a.1.variant).cmp(&(&b.0, &b.1.variant)));
    out.extend(gguf_sets);
    let st: Vec<&Sibling> = siblings
        .iter()
        .filter(|s| s.name.ends_with(".safetensors") || is_companion(&s.name))
        .collect();
    if st.iter().any(|s| s.name.ends_with(".safetensors")) {
        out.push((
            "safetensors".into(),
            FileSet {
                variant: "safetensors".into(),
                files: st.into_iter().map(chosen_lossy).collect(),
            },
        ));
    }
    out
}

fn chosen_lossy(s: &Sibling) -> Chosen {
    Chosen {
        name: s.name.clone(),
        size: s.size.unwrap_or(0),
        sha256: s.sha256.clone(),
    }
}

fn chosen(s: &Sibling) -> Result<Chosen, DownloadError> {
    if !safe_file_name(&s.name) {
        return Err(DownloadError::Malformed {
            what: "the file listing".into(),
            cause: format!("file name {:?} would leave the model's directory", s.name),
        });
    }
    let size = s.size.ok_or_else(|| DownloadError::Malformed {
        what: "the file listing".into(),
        cause: format!("{} has no size", s.name),
    })?;
    Ok(Chosen {
        name: s.name.clone(),
        size,
        sha256: s.sha256.clone(),
    })
}

/// Every shard group among `files` must be whole: `-0000k-of-0000n` for every k in 1..=n.
fn check_whole(files: &[&Sibling]) -> Result<(), DownloadError> {
    check_whole_as(files, "the listing has")
}

/// [`check_whole`], its error saying who picked the shards (`the listing has`, `the globs
/// select`).
fn check_whole_as(files: &[&Sibling], who: &str) -> Result<(), DownloadError> {
    let mut groups: BTreeMap<String, (u32, Vec<u32>)> = BTreeMap::new();
    for f in files {
        if let Some((_, index, total, _)) = shard(&f.name) {
            let g = groups
                .entry(group_key(&f.name))
                .or_insert((total, Vec::new()));
            g.1.push(index);
        }
    }
    for (key, (total, mut have)) in groups {
        have.sort_unstable();
        have.dedup();
        if have != (1..=total).collect::<Vec<_>>() {
            return Err(DownloadError::Choice(format!(
                "{who} shards {have:?} of {total} of {key}: a split model is downloaded whole or not at all"
            )));
        }
    }
    Ok(())
}

/// The whole file set of `variant` (or of the repo's only variant when none is named).
pub fn choose(siblings: &[Sibling], variant: Option<&str>) -> Result<FileSet, DownloadError> {
    let labels = labelled(siblings);
    let offered: Vec<FileSet> = labels.iter().map(|(_, set)| set.clone()).collect();
    let pick: Vec<&Sibling> = match variant {
        None => match offered.len() {
            0 => {
                return Err(DownloadError::Choice(
                    "the repo has no GGUF or safetensors weights to download".into(),
                ));
            }
            1 => pick_set(siblings, &offered[0]),
            _ => {
                return Err(DownloadError::Choice(format!(
                    "the repo offers several variants ({}); name one with `variant`",
                    variant_names(&offered)
                )));
            }
        },
        Some(v) => pick_named(siblings, &labels, &offered, v)?,
    };
    check_whole(&pick)?;
    let files = pick
        .into_iter()
        .map(chosen)
        .collect::<Result<Vec<_>, _>>()?;
    let variant = match variant {
        Some(v) if !offered.iter().any(|o| o.variant.eq_ignore_ascii_case(v)) => offered
            .iter()
            .find(|o| o.files.iter().any(|f| f.name == v))
            .map(|o| o.variant.clone())
            .unwrap_or_else(|| v.to_string()),
        Some(v) => offered
            .iter()
            .find(|o| o.variant.eq_ignore_ascii_case(v))
            .map(|o| o.variant.clone())
            .unwrap_or_else(|| v.to_string()),
        None => offered[0].variant.clone(),
    };
    Ok(FileSet { variant, files })
}

/// The offered variants' names, for messages.
fn variant_names(offered: &[FileSet]) -> String {
    offered
        .iter()
        .map(|v| v.variant.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The files `v` names: a file's whole group (a model file's, with its projector), a
/// variant's set, or a refusal saying what the repo offers.
fn pick_named<'a>(
    siblings: &'a [Sibling],
    labels: &[(String, FileSet)],
    offered: &[FileSet],
    v: &str,
) -> Result<Vec<&'a Sibling>, DownloadError> {
    // A file name (a shard, a single GGUF): its whole group, plus companions for
    // safetensors.
    if let Some(file) = siblings.iter().find(|s| s.name == v) {
        return pick_file(siblings, offered, file, v);
    }
    if let Some(set) = offered.iter().find(|o| o.variant.eq_ignore_ascii_case(v)) {
        return Ok(pick_set(siblings, set));
    }
    if labels
        .iter()
        .filter(|(label, _)| label.eq_ignore_ascii_case(v))
        .count()
        > 1
    {
        // A label that several unrelated models share names none of them.
        let which: Vec<String> = labels
            .iter()
            .filter(|(label, _)| label.eq_ignore_ascii_case(v))
            .map(|(_, set)| {
                let files: Vec<&str> = set
                    .files
                    .iter()
                    .filter(|f| gguf::role(&f.name) == Role::Model)
                    .map(|f| f.name.as_str())
                    .collect();
                format!("{} ({})", set.variant, files.join(", "))
            })
            .collect();
        return Err(DownloadError::Choice(format!(
            "variant {v:?} names several models of the repo: {}; name one by its variant or file name",
            which.join("; ")
        )));
    }
    Err(DownloadError::Choice(format!(
        "variant {v:?} is not in the repo; it offers: {}",
        if offered.is_empty() {
            "nothing downloadable".to_string()
        } else {
            variant_names(offered)
        }
    )))
}

/// The files that come with `file` (named `v`): a model file's whole shard group and its
/// variant's projector, or the safetensors set; a projector or another non-model GGUF is
/// refused.
fn pick_file<'a>(
    siblings: &'a [Sibling],
    offered: &[FileSet],
    file: &Sibling,
    v: &str,
) -> Result<Vec<&'a Sibling>, DownloadError> {
    let key = group_key(&file.name);
    if gguf::is_gguf(&file.name) {
        match gguf::role(&file.name) {
            Role::Model => {}
            Role::Projector => {
                return Err(DownloadError::Choice(format!(
                    "{v} is a multimodal projector, not a model: name the model's variant ({}); its projector comes with it",
                    variant_names(offered)
                )));
            }
            Role::Other(what) => {
                return Err(DownloadError::Choice(format!(
                    "{v} is {what}, not a model: name a variant ({})",
                    variant_names(offered)
                )));
            }
        }
    }
    Ok(if file.name.ends_with(".safetensors") {
        let set = offered.iter().find(|o| o.variant == "safetensors");
        set.map(|s| pick_set(siblings, s)).unwrap_or_default()
    } else {
        let mut set: Vec<&Sibling> = siblings
            .iter()
            .filter(|s| group_key(&s.name) == key)
            .collect();
        // The projector that comes with the variant this file is of.
        if let Some(o) = offered.iter().find(|o| o.files.iter().any(|f| f.name == v)) {
            set.extend(siblings.iter().filter(|s| {
                gguf::role(&s.name) == Role::Projector && o.files.iter().any(|f| f.name == s.name)
            }));
        }
        set
    })
}

/// Globs of file names at most, in `include` and in `exclude` each.
pub const GLOBS_MAX: usize = 32;

/// The file set of `download_model {variant?, include?, exclude?}`. Without globs, the
/// variant's whole set ([`choose`]). `include` picks the files whose names match any of its
/// globs instead of a variant (not both); `exclude` leaves out those matching any of its
/// globs, from the included files or from the variant's set. Globs match the whole name as
/// huggingface-cli's do (`*` crosses `/`; `?`, `[...]`, `{a,b}`). What is left must hold
/// every shard of any split file it holds. A set the globs changed is its own variant,
/// named by its files: `<variant or "files">-<8 hex digits>`, so it never passes for the
/// variant's whole set in the store.
pub fn select(
    siblings: &[Sibling],
    variant: Option<&str>,
    include: &[String],
    exclude: &[String],
) -> Result<FileSet, DownloadError> {
    if include.is_empty() && exclude.is_empty() {
        return choose(siblings, variant);
    }
    if !include.is_empty() && variant.is_some() {
        return Err(DownloadError::Invalid(
            "download_model takes a variant or globs that pick files, not both (a `!` glob alone leaves files out of the variant's set)".into(),
        ));
    }
    let included = globs(include)?;
    let excluded = globs(exclude)?;
    let (whole, candidates): (Option<FileSet>, Vec<&Sibling>) = match included {
        Some(inc) => (
            None,
            siblings.iter().filter(|s| inc.is_match(&s.name)).collect(),
        ),
        None => {
            let set = choose(siblings, variant)?;
            let picked = pick_set(siblings, &set);
            (Some(set), picked)
        }
    };
    let kept: Vec<&Sibling> = candidates
        .iter()
        .copied()
        .filter(|s| !excluded.as_ref().is_some_and(|e| e.is_match(&s.name)))
        .collect();
    // Nothing of the variant's set left out: it is that variant.
    if let Some(set) = &whole
        && kept.len() == set.files.len()
    {
        return Ok(set.clone());
    }
    let label = whole.map_or_else(|| "files".to_string(), |s| s.variant);
    if kept.is_empty() {
        let names: Vec<&str> = siblings.iter().take(20).map(|s| s.name.as_str()).collect();
        let more = siblings.len().saturating_sub(names.len());
        return Err(DownloadError::Choice(format!(
            "the globs select no file of the repo; it has: {}{}",
            names.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        )));
    }
    check_whole_as(&kept, "the globs select")?;
    let files = kept
        .into_iter()
        .map(chosen)
        .collect::<Result<Vec<_>, _>>()?;
    let mut names: Vec<&str> = files.iter().map(|f| f.name.as_str()).collect();
    names.sort_unstable();
    let digest = crate::hex(&sha2::Sha256::digest(names.join("\n").as_bytes()));
    Ok(FileSet {
        variant: format!("{label}-{}", &digest[..8]),
        files,
    })
}

/// One list of globs, compiled; `None` for none. A bad glob is refused naming it.
fn globs(patterns: &[String]) -> Result<Option<globset::GlobSet>, DownloadError> {
    if patterns.is_empty() {
        return Ok(None);
    }
    if patterns.len() > GLOBS_MAX {
        return Err(DownloadError::Invalid(format!(
            "glob: {} globs; at most {GLOBS_MAX}",
            patterns.len()
        )));
    }
    let mut set = globset::GlobSetBuilder::new();
    for p in patterns {
        if p.is_empty() || p.len() > 200 {
            return Err(DownloadError::Invalid(format!(
                "glob glob {p:?} is empty or longer than 200 characters"
            )));
        }
        let glob = globset::Glob::new(p).map_err(|e| {
            DownloadError::Invalid(format!("glob glob {p:?} is not a glob: {}", e.kind()))
        })?;
        set.add(glob);
    }
    set.build()
        .map(Some)
        .map_err(|e| DownloadError::Invalid(format!("glob: {e}")))
}

fn pick_set<'a>(siblings: &'a [Sibling], set: &FileSet) -> Vec<&'a Sibling> {
    siblings
        .iter()
        .filter(|s| set.files.iter().any(|f| f.name == s.name))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(name: &str, size: u64) -> Sibling {
        Sibling {
            name: name.into(),
            size: Some(size),
            sha256: None,
        }
    }

    fn names(set: &FileSet) -> Vec<&str> {
        set.files.iter().map(|f| f.name.as_str()).collect()
    }

    fn gguf_repo() -> Vec<Sibling> {
        vec![
            s("README.md", 1),
            s(".gitattributes", 1),
            s("tiny-Q4_K_M-00001-of-00003.gguf", 10),
            s("tiny-Q4_K_M-00002-of-00003.gguf", 10),
            s("tiny-Q4_K_M-00003-of-00003.gguf", 5),
            s("tiny-Q8_0.gguf", 40),
        ]
    }

    #[test]
    fn naming_one_shard_selects_every_shard() {
        let set = choose(&gguf_repo(), Some("tiny-Q4_K_M-00002-of-00003.gguf")).unwrap();
        assert_eq!(
            names(&set),
            [
                "tiny-Q4_K_M-00001-of-00003.gguf",
                "tiny-Q4_K_M-00002-of-00003.gguf",
                "tiny-Q4_K_M-00003-of-00003.gguf"
            ]
        );
        assert_eq!(set.variant, "Q4_K_M");
        assert_eq!(set.total(), 25);
    }

    #[test]
    fn a_quantisation_label_selects_its_files_case_insensitively() {
        let set = choose(&gguf_repo(), Some("q8_0")).unwrap();
        assert_eq!(names(&set), ["tiny-Q8_0.gguf"]);
        assert_eq!(set.variant, "Q8_0");
        assert_eq!(choose(&gguf_repo(), Some("Q4_K_M")).unwrap().files.len(), 3);
    }

    #[test]
    fn several_variants_and_none_named_is_refused_listing_them() {
        let e = choose(&gguf_repo(), None).unwrap_err().to_string();
        assert!(e.contains("Q4_K_M") && e.contains("Q8_0"), "{e}");
        let e = choose(&gguf_repo(), Some("Q2_K")).unwrap_err().to_string();
        assert!(e.contains("Q2_K") && e.contains("Q4_K_M"), "{e}");
    }

    #[test]
    fn a_label_several_models_share_is_refused_and_a_file_name_picks_its_own_set() {
        let repo = vec![
            s("alpha-Q4_K_M.gguf", 10),
            s("beta-Q4_K_M.gguf", 20),
            s("gamma-Q4_K_M-00001-of-00002.gguf", 5),
            s("gamma-Q4_K_M-00002-of-00002.gguf", 5),
            s("alpha-Q8_0.gguf", 30),
        ];
        let e = choose(&repo, Some("q4_k_m")).unwrap_err().to_string();
        for f in [
            "alpha-Q4_K_M.gguf",
            "beta-Q4_K_M.gguf",
            "gamma-Q4_K_M-00001-of-00002.gguf",
        ] {
            assert!(e.contains(f), "{f} in {e}");
        }
        let beta = choose(&repo, Some("beta-Q4_K_M.gguf")).unwrap();
        assert_eq!(names(&beta), ["beta-Q4_K_M.gguf"]);
        assert_eq!(beta.variant, "beta-Q4_K_M");
        let alpha = choose(&repo, Some("alpha-Q4_K_M.gguf")).unwrap();
        assert_eq!(names(&alpha), ["alpha-Q4_K_M.gguf"]);
        assert_ne!(alpha.variant, beta.variant);
        // By the variant name too, and a split model's shards stay one set.
        let gamma = choose(&repo, Some("gamma-Q4_K_M")).unwrap();
        assert_eq!(gamma.files.len(), 2);
        assert_eq!(
            choose(&repo, Some("gamma-Q4_K_M-00002-of-00002.gguf")).unwrap(),
            gamma
        );
        // A label only one model has still names it.
        let q8 = choose(&repo, Some("Q8_0")).unwrap();
        assert_eq!(
            (names(&q8), q8.variant.as_str()),
            (vec!["alpha-Q8_0.gguf"], "Q8_0")
        );
        let offered: Vec<String> = variants(&repo).into_iter().map(|v| v.variant).collect();
        assert_eq!(
            offered,
            ["alpha-Q4_K_M", "beta-Q4_K_M", "gamma-Q4_K_M", "Q8_0"]
        );
    }

    #[test]
    fn a_missing_shard_refuses_the_whole_set() {
        let mut repo = gguf_repo();
        repo.retain(|f| !f.name.contains("00003-of"));
        let e = choose(&repo, Some("Q4_K_M")).unwrap_err().to_string();
        assert!(e.contains("[1, 2] of 3"), "{e}");
    }

    fn globs(list: &[&str]) -> Vec<String> {
        list.iter().map(|g| g.to_string()).collect()
    }

    fn safetensors_repo() -> Vec<Sibling> {
        vec![
            s("README.md", 1),
            s("config.json", 1),
            s("tokenizer.json", 1),
            s("model-00001-of-00002.safetensors", 10),
            s("model-00002-of-00002.safetensors", 10),
            s("model.safetensors.index.json", 1),
            s("onnx/model.onnx", 30),
        ]
    }

    #[test]
    fn include_and_exclude_pick_files_whole_and_name_the_set_by_its_files() {
        let repo = safetensors_repo();
        // huggingface-cli's globs: `*` crosses `/`.
        let set = select(&repo, None, &globs(&["*.json", "*.onnx"]), &[]).unwrap();
        let mut got = names(&set);
        got.sort();
        assert_eq!(
            got,
            [
                "config.json",
                "model.safetensors.index.json",
                "onnx/model.onnx",
                "tokenizer.json"
            ]
        );
        assert!(
            set.variant.starts_with("files-") && set.variant.len() == 14,
            "{}",
            set.variant
        );
        // The same files are the same set, whatever globs picked them.
        let again = select(
            &repo,
            None,
            &globs(&["*"]),
            &globs(&["*.md", "model-*", "*.safetensors"]),
        )
        .unwrap();
        assert_eq!(again.variant, set.variant);
        // Exclude from a variant's set: its own variant, never the whole set's name.
        let lean = select(&repo, None, &[], &globs(&["tokenizer.*"])).unwrap();
        assert!(lean.variant.starts_with("safetensors-"), "{}", lean.variant);
        assert!(!names(&lean).contains(&"tokenizer.json"));
        // Excluding nothing of it leaves the variant as it is.
        let same = select(&repo, None, &[], &globs(&["*.gguf"])).unwrap();
        assert_eq!(same, choose(&repo, None).unwrap());
    }

    #[test]
    fn globs_that_split_a_sharded_file_or_pick_nothing_or_are_bad_are_refused() {
        let repo = safetensors_repo();
        let e = select(&repo, None, &globs(&["*00001-of-*"]), &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("the globs select shards [1] of 2"), "{e}");
        let e = select(&repo, None, &[], &globs(&["*00002-of-*"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("whole or not at all"), "{e}");
        let e = select(&repo, None, &globs(&["*.gguf"]), &[])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("select no file") && e.contains("config.json"),
            "{e}"
        );
        let e = select(&repo, Some("safetensors"), &globs(&["*.json"]), &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("not both"), "{e}");
        let e = select(&repo, None, &globs(&["[oops"]), &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"[oops\" is not a glob"), "{e}");
        let many: Vec<String> = (0..=GLOBS_MAX).map(|i| format!("{i}.json")).collect();
        let e = select(&repo, None, &[], &many).unwrap_err().to_string();
        assert!(e.contains("at most 32"), "{e}");
    }

    #[test]
    fn safetensors_come_with_config_and_tokenizer() {
        let repo = vec![
            s("README.md", 1),
            s("config.json", 1),
            s("generation_config.json", 1),
            s("tokenizer.json", 1),
            s("tokenizer_config.json", 1),
            s("tokenizer.model", 1),
            s("model-00001-of-00002.safetensors", 10),
            s("model-00002-of-00002.safetensors", 10),
            s("model.safetensors.index.json", 1),
            s("pytorch_model.bin", 20),
        ];
        let set = choose(&repo, None).unwrap();
        let mut got = names(&set);
        got.sort();
        assert_eq!(
            got,
            [
                "config.json",
                "generation_config.json",
                "model-00001-of-00002.safetensors",
                "model-00002-of-00002.safetensors",
                "model.safetensors.index.json",
                "tokenizer.json",
                "tokenizer.model",
                "tokenizer_config.json"
            ]
        );
        // Naming one weights shard gives the same whole set.
        let by_shard = choose(&repo, Some("model-00002-of-00002.safetensors")).unwrap();
        assert_eq!(by_shard.files.len(), set.files.len());
        assert_eq!(by_shard.variant, "safetensors");
    }

    #[test]
    fn names_that_leave_the_directory_are_refused() {
        for bad in [
            "../x.gguf",
            "a/../../x.gguf",
            "/abs.gguf",
            ".hidden.gguf",
            "a//b.gguf",
            "x.gguf.part",
            "x.gguf.part.ranges",
            "a\\b.gguf",
            "model-\u{202E}fuggexe.gguf",
            "x\u{200B}-Q4_0.gguf",
            "\u{2066}x.gguf",
            "\u{FEFF}x.gguf",
        ] {
            assert!(!safe_file_name(bad), "{bad}");
        }
        // A component the file system could not hold with our `.part.ranges` beside it.
        assert!(!safe_file_name(&format!("{}.gguf", "a".repeat(300))));
        assert!(safe_file_name(&format!("{}.gguf", "a".repeat(200))));
        assert!(safe_file_name("sub/dir/x-Q4_0.gguf"));
        assert!(safe_file_name("modèle-Q4_0.gguf"));
        // One store directory per repo: `a--b/c` and `a/b--c` would share `a--b--c`.
        for bad in ["a--b/c", "a/b--c", "a/b..c"] {
            assert!(check_repo(bad).is_err(), "{bad}");
        }
        let repo = vec![s("../evil-Q4_0.gguf", 1)];
        assert!(choose(&repo, None).is_err());
        for bad in ["a", "a/b/c", "../b", "a/..", "a/.b", "a b/c", ""] {
            assert!(check_repo(bad).is_err(), "{bad}");
        }
        check_repo("TheOrg/tiny-model.v2_x").unwrap();
        for bad in [
            "",
            "..",
            "a/b",
            "x y",
            "refs/pr/",
            "refs/pr/1/x",
            "refs/pr/x",
            "refs/heads/main",
        ] {
            assert!(check_revision(bad).is_err(), "{bad}");
        }
        check_revision("refs/pr/12").unwrap();
    }

    #[test]
    fn a_file_without_a_size_is_refused() {
        let repo = vec![Sibling {
            name: "m-Q4_0.gguf".into(),
            size: None,
            sha256: None,
        }];
        assert!(
            choose(&repo, None)
                .unwrap_err()
                .to_string()
                .contains("no size")
        );
    }

    #[test]
    fn a_projector_comes_with_each_gguf_variant_and_is_never_one() {
        let repo = vec![
            s("README.md", 1),
            s("model-F16.gguf", 30),
            s("model-Q4_K_M.gguf", 10),
            s("mmproj-F16.gguf", 5),
            s("mmproj-F32.gguf", 9),
            s("ggml-vocab-llama.gguf", 2),
        ];
        let offered: Vec<String> = variants(&repo)
            .into_iter()
            .map(|v| {
                let files: Vec<String> = v.files.into_iter().map(|f| f.name).collect();
                format!("{}: {}", v.variant, files.join(" "))
            })
            .collect();
        assert_eq!(
            offered,
            [
                "F16: model-F16.gguf mmproj-F16.gguf",
                "Q4_K_M: model-Q4_K_M.gguf mmproj-F16.gguf"
            ]
        );
        let set = choose(&repo, Some("q4_k_m")).unwrap();
        assert_eq!(names(&set), ["model-Q4_K_M.gguf", "mmproj-F16.gguf"]);
        let set = choose(&repo, Some("model-F16.gguf")).unwrap();
        assert_eq!(
            (set.variant.as_str(), names(&set)),
            ("F16", vec!["model-F16.gguf", "mmproj-F16.gguf"])
        );
        let e = choose(&repo, Some("mmproj-F32.gguf"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("is a multimodal projector, not a model") && e.contains("Q4_K_M"),
            "{e}"
        );
        let e = choose(&repo, Some("ggml-vocab-llama.gguf"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("vocabulary-only"), "{e}");
        // A projector alone is not a variant: before, "F32" was one, made of the projector.
        assert!(choose(&repo, Some("F32")).is_err());
    }
}
