//! What became of a result on its way to the model that its rendering says but its type does
//! not hold: where each image went (`toolvisor mcp` takes the images out of the result, into
//! MCP image content or a file under the workdir).

use serde_json::{Map, Value as Json};

/// Where an image went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ImageFate {
    /// MCP image content.
    Shown,
    /// A file under the workdir: its path relative to the workdir, and its size.
    Written(String, u64),
    /// Nowhere, and why.
    NotShown(String),
}

impl ImageFate {
    /// In words, in place of the image's `data` (what a typed result keeps).
    pub fn note(&self) -> String {
        match self {
            ImageFate::Shown => "(sent as MCP image content)".into(),
            ImageFate::Written(path, n) => format!("(written to {path}, {n} bytes)"),
            ImageFate::NotShown(why) => format!("(not shown: {why})"),
        }
    }

    /// In keys of its own (`shown`, `file` and `file_bytes`, `not_shown`) in place of the
    /// image's `data`, for the rendering.
    pub fn show(&self, map: &mut Map<String, Json>) {
        map.remove("data");
        match self {
            ImageFate::Shown => {
                map.insert("shown".into(), "as image content".into());
            }
            ImageFate::Written(path, n) => {
                map.insert("file".into(), path.clone().into());
                map.insert("file_bytes".into(), (*n).into());
            }
            ImageFate::NotShown(why) => {
                map.insert("not_shown".into(), why.clone().into());
            }
        }
    }
}

/// What became of a result on its way out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outward {
    /// Where each image went: at `None` the result itself is the image (`read` of one), at
    /// `Some(i)` its `images[i]` (`eval`'s figures).
    pub images: Vec<(Option<usize>, ImageFate)>,
}

impl Outward {
    /// The image object at `at` in `value`: the result itself (`None`) or its `images[i]`.
    pub fn image_at(value: &mut Json, at: Option<usize>) -> Option<&mut Map<String, Json>> {
        match at {
            None => value.as_object_mut(),
            Some(i) => value.get_mut("images")?.get_mut(i)?.as_object_mut(),
        }
    }

    /// `value` with each image's `data` as its fate's note (a typed result's shape).
    pub fn note(&self, value: &mut Json) {
        for (at, fate) in &self.images {
            if let Some(map) = Outward::image_at(value, *at) {
                map.insert("data".into(), fate.note().into());
            }
        }
    }

    /// `value` with each image's `data` replaced by its fate's keys (what the rendering
    /// reads).
    pub fn show(&self, value: &mut Json) {
        for (at, fate) in &self.images {
            if let Some(map) = Outward::image_at(value, *at) {
                fate.show(map);
            }
        }
    }
}
