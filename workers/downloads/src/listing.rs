//! The hub's JSON answers read the way the real Hugging Face Hub sends them. The Hub's model
//! objects carry dozens of fields that change with the query and over time (`_id`, `id` and
//! `modelId` side by side, `gated` as `false` or `"auto"`/`"manual"`, `cardData`, `config`,
//! `gguf`, `safetensors`, `model-index: null`, …), so the answer is read as a JSON value and
//! only what the download tools use is taken from it: every other field is ignored, and a
//! field we use that comes with an unexpected type counts as absent rather than refusing the
//! whole answer. Only what cannot be worked with is malformed (not an object, `siblings` not a
//! list, a file without a name). The rules follow `huggingface_hub`'s `ModelInfo`.

use serde_json::Value as Json;

/// One file of a repo, as the listing gives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sibling {
    pub name: String,
    pub size: Option<u64>,
    /// Lower-case hex sha256 of an LFS file.
    pub sha256: Option<String>,
}

/// Whether a repo is gated, as its `gated` field says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Gated {
    /// `false` (or absent): anyone may download it.
    No,
    /// `"auto"`: access is granted as soon as the terms are accepted.
    Auto,
    /// `"manual"`: the owners approve each request.
    Manual,
    /// Any other value the Hub may send one day (`true`, a new word).
    Other(String),
}

impl Gated {
    fn from_json(v: Option<&Json>) -> Gated {
        match v {
            None | Some(Json::Null) | Some(Json::Bool(false)) => Gated::No,
            Some(Json::String(s)) if s == "auto" => Gated::Auto,
            Some(Json::String(s)) if s == "manual" => Gated::Manual,
            Some(Json::String(s)) if s.is_empty() || s == "false" => Gated::No,
            Some(Json::String(s)) => Gated::Other(s.chars().take(40).collect()),
            Some(other) => Gated::Other(other.to_string().chars().take(40).collect()),
        }
    }

    pub fn is_gated(&self) -> bool {
        *self != Gated::No
    }

    /// As the Hub spells it: `false`, `"auto"`, `"manual"`.
    pub fn shown(&self) -> toolvisor_protocol::results::Gated {
        use toolvisor_protocol::results::Gated as Shown;
        match self {
            Gated::No => Shown::Open(false),
            Gated::Auto => Shown::Gated("auto".into()),
            Gated::Manual => Shown::Gated("manual".into()),
            Gated::Other(s) => Shown::Gated(s.clone()),
        }
    }
}

/// A repo at a revision.
#[derive(Clone, Debug)]
pub struct RepoInfo {
    pub id: String,
    /// The commit the revision resolved to, when the endpoint says.
    pub sha: Option<String>,
    pub gated: Gated,
    pub siblings: Vec<Sibling>,
}

/// One search hit.
#[derive(Clone, Debug)]
pub struct Hit {
    pub id: String,
    pub downloads: Option<u64>,
    pub gated: Gated,
    pub siblings: Vec<Sibling>,
}

/// A count: an integer, an integral float, or digits in a string.
fn count(v: Option<&Json>) -> Option<u64> {
    match v? {
        Json::Number(n) => n.as_u64().or_else(|| {
            n.as_f64()
                .filter(|f| f.is_finite() && *f >= 0.0 && f.fract() == 0.0 && *f < 1.8e19)
                .map(|f| f as u64)
        }),
        Json::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn text(v: Option<&Json>) -> Option<String> {
    v?.as_str().filter(|s| !s.is_empty()).map(str::to_string)
}

/// The repo id: `id`, else `modelId` (older answers have only that).
fn id_of(obj: &serde_json::Map<String, Json>) -> Option<String> {
    text(obj.get("id")).or_else(|| text(obj.get("modelId")))
}

fn sha256_of(lfs: &serde_json::Map<String, Json>) -> Option<String> {
    // `sha256` in model info, `oid` in the tree listing; sometimes prefixed `sha256:`.
    let raw = text(lfs.get("sha256")).or_else(|| text(lfs.get("oid")))?;
    let hex = raw.trim_start_matches("sha256:").to_ascii_lowercase();
    (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit())).then_some(hex)
}

fn siblings(v: Option<&Json>) -> Result<Vec<Sibling>, String> {
    let list = match v {
        None | Some(Json::Null) => return Ok(Vec::new()),
        Some(Json::Array(list)) => list,
        Some(other) => return Err(format!("`siblings` is {}, not a list", kind(other))),
    };
    list.iter()
        .enumerate()
        .map(|(i, s)| {
            let obj = s
                .as_object()
                .ok_or_else(|| format!("`siblings[{i}]` is {}, not an object", kind(s)))?;
            let name = text(obj.get("rfilename"))
                .ok_or_else(|| format!("`siblings[{i}]` has no `rfilename`"))?;
            let lfs = obj.get("lfs").and_then(Json::as_object);
            // An LFS file's own size wins: some listings give the pointer's at top level.
            let size = lfs
                .and_then(|l| count(l.get("size")))
                .or_else(|| count(obj.get("size")));
            Ok(Sibling {
                name,
                size,
                sha256: lfs.and_then(sha256_of),
            })
        })
        .collect()
}

fn kind(v: &Json) -> &'static str {
    match v {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "a list",
        Json::Object(_) => "an object",
    }
}

/// `GET /api/models/{repo}/revision/{rev}`: `fallback_id` when the answer names no id.
pub fn repo_info(v: &Json, fallback_id: &str) -> Result<RepoInfo, String> {
    let obj = v
        .as_object()
        .ok_or_else(|| format!("the answer is {}, not a model object", kind(v)))?;
    Ok(RepoInfo {
        id: id_of(obj).unwrap_or_else(|| fallback_id.to_string()),
        sha: text(obj.get("sha")),
        gated: Gated::from_json(obj.get("gated")),
        siblings: siblings(obj.get("siblings"))?,
    })
}

/// `GET /api/models?search=`: a list of model objects; one without an id is skipped (there
/// is nothing to download by), one with a broken file list keeps its id and loses the list.
pub fn search_hits(v: &Json) -> Result<Vec<Hit>, String> {
    let list = v
        .as_array()
        .ok_or_else(|| format!("the answer is {}, not a list of models", kind(v)))?;
    Ok(list
        .iter()
        .filter_map(Json::as_object)
        .filter_map(|obj| {
            Some(Hit {
                id: id_of(obj)?,
                downloads: count(obj.get("downloads")),
                gated: Gated::from_json(obj.get("gated")),
                siblings: siblings(obj.get("siblings")).unwrap_or_default(),
            })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Json {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn the_hubs_answer_with_id_and_model_id_and_unknown_fields_is_read() {
        // What failed before: `id` and `modelId` both present ("duplicate field `id`").
        let info = repo_info(
            &parse(
                r#"{"_id":"65770c3e","id":"walk/tiny-GGUF","modelId":"walk/tiny-GGUF","gated":false,
                "cardData":{"inference":false},"model-index":null,"gguf":{"total":3},
                "siblings":[{"rfilename":"a.gguf","blobId":"x","size":10,
                  "lfs":{"sha256":"AB12AB12AB12AB12AB12AB12AB12AB12AB12AB12AB12AB12AB12AB12AB12AB12","size":10,"pointerSize":134}},
                  {"rfilename":"config.json","size":5},
                  {"rfilename":"b.gguf","lfs":{"size":7,"sha256":"not-a-hash"}}]}"#,
            ),
            "fallback/x",
        )
        .unwrap();
        assert_eq!(info.id, "walk/tiny-GGUF");
        assert_eq!(info.gated, Gated::No);
        let s = &info.siblings;
        assert_eq!(s[0].size, Some(10));
        assert_eq!(
            s[0].sha256.as_deref(),
            Some("ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12")
        );
        assert_eq!((s[1].size, s[1].sha256.is_none()), (Some(5), true));
        assert_eq!((s[2].size, s[2].sha256.is_none()), (Some(7), true));
    }

    #[test]
    fn gated_takes_every_form_the_hub_sends() {
        for (v, want) in [
            ("false", Gated::No),
            ("null", Gated::No),
            (r#""auto""#, Gated::Auto),
            (r#""manual""#, Gated::Manual),
            ("true", Gated::Other("true".into())),
        ] {
            let info = repo_info(&parse(&format!(r#"{{"id":"o/m","gated":{v}}}"#)), "o/m").unwrap();
            assert_eq!(info.gated, want, "{v}");
        }
        let shown = |g: Gated| serde_json::to_value(g.shown()).unwrap();
        assert_eq!(shown(Gated::Manual), Json::from("manual"));
        assert_eq!(shown(Gated::No), Json::Bool(false));
    }

    #[test]
    fn mixed_types_count_as_absent_and_only_unusable_answers_are_malformed() {
        let info = repo_info(
            &parse(
                r#"{"modelId":"o/m","sha":7,"siblings":[{"rfilename":"a.gguf","size":"12","lfs":null},
                {"rfilename":"b.gguf","size":-1},{"rfilename":"c.gguf","size":3.0}]}"#,
            ),
            "o/x",
        )
        .unwrap();
        assert_eq!(info.id, "o/m");
        assert_eq!(info.sha, None);
        let sizes: Vec<_> = info.siblings.iter().map(|s| s.size).collect();
        assert_eq!(sizes, [Some(12), None, Some(3)]);
        for (bad, says) in [
            ("[]", "not a model object"),
            (r#"{"siblings":"a.gguf"}"#, "`siblings` is a string"),
            (r#"{"siblings":[{"size":1}]}"#, "no `rfilename`"),
            (r#"{"siblings":[7]}"#, "`siblings[0]` is a number"),
        ] {
            let e = repo_info(&parse(bad), "o/m").unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn search_hits_skip_entries_without_an_id() {
        let hits = search_hits(&parse(
            r#"[{"_id":"1","id":"a/b","modelId":"a/b","downloads":5,"gated":"auto","siblings":[{"rfilename":"x.gguf"}]},
                {"_id":"2","likes":3},
                {"modelId":"c/d","downloads":1.5e3,"siblings":{"broken":true}}]"#,
        ))
        .unwrap();
        assert_eq!(hits.len(), 2);
        assert_eq!((hits[0].id.as_str(), hits[0].downloads), ("a/b", Some(5)));
        assert_eq!(hits[0].gated, Gated::Auto);
        assert_eq!(hits[0].siblings[0].name, "x.gguf");
        assert_eq!(
            (hits[1].id.as_str(), hits[1].downloads),
            ("c/d", Some(1500))
        );
        assert!(hits[1].siblings.is_empty());
        assert!(search_hits(&parse("{}")).is_err());
    }

    #[test]
    fn every_recorded_answer_shape_is_read_verbatim() {
        use toolvisor_testhub::{GATED_REPO, GGUF_REPO, SAFETENSORS_REPO, SEARCH_FULL};
        let gguf = repo_info(&parse(GGUF_REPO), "x/y").unwrap();
        assert_eq!(gguf.id, "TheBloke/TinyLlama-1.1B-Chat-v1.0-GGUF");
        assert_eq!(gguf.gated, Gated::No);
        assert!(gguf.sha.as_deref().is_some_and(|s| s.len() == 40));
        let q4 = gguf
            .siblings
            .iter()
            .find(|s| s.name.ends_with("Q4_K_M.gguf"))
            .unwrap();
        assert_eq!(q4.size, Some(668_788_096));
        assert!(q4.sha256.as_deref().is_some_and(|h| h.len() == 64));
        let readme = gguf
            .siblings
            .iter()
            .find(|s| s.name == "README.md")
            .unwrap();
        assert_eq!(
            (readme.size, readme.sha256.as_deref()),
            (Some(19_731), None)
        );

        let st = repo_info(&parse(SAFETENSORS_REPO), "x/y").unwrap();
        assert_eq!(st.id, "Qwen/Qwen2.5-0.5B-Instruct");
        assert!(st.siblings.iter().all(|s| s.size.is_some()));
        assert_eq!(st.siblings.len(), 10);

        let gated = repo_info(&parse(GATED_REPO), "x/y").unwrap();
        assert_eq!(gated.gated, Gated::Manual);
        assert!(
            gated
                .siblings
                .iter()
                .any(|s| s.name == "original/params.json")
        );

        let hits = search_hits(&parse(SEARCH_FULL)).unwrap();
        let ids: Vec<&str> = hits.iter().map(|h| h.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "TheBloke/TinyLlama-1.1B-Chat-v1.0-GGUF",
                "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
                "someone/tinyllama-gated-eval",
                "mlx-community/TinyLlama-1.1B-Chat-v1.0-4bit"
            ]
        );
        assert_eq!(hits[2].gated, Gated::Auto);
        // A search lists file names only.
        assert!(
            hits.iter()
                .all(|h| h.siblings.iter().all(|s| s.size.is_none()))
        );
        assert_eq!(hits[0].siblings.len(), 6);
    }
}
