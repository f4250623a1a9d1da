//! A file in progress on disk: its bytes in `<name>.part`, and for a ranged transfer the range
//! map beside it (`<name>.part.ranges`, JSON) saying what each range has of its bytes. The
//! store reads how much of a file is there; the transfers write both.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::DownloadError;

/// `<dir>/<name>.part`.
pub(crate) fn part_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.part"))
}

/// The range map: the file's size and, per range, its bytes `[start, end)` and how many from
/// its start are on disk and synced.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct RangeMap {
    pub(crate) size: u64,
    pub(crate) ranges: Vec<Span>,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Span {
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) done: u64,
}

impl RangeMap {
    /// The ranges cover `[0, size)` in order, each `done` within its range.
    pub(crate) fn valid(&self, size: u64) -> bool {
        let mut at = 0;
        for s in &self.ranges {
            if s.start != at || s.end < s.start || s.done > s.end - s.start {
                return false;
            }
            at = s.end;
        }
        self.size == size && at == size && !self.ranges.is_empty()
    }

    pub(crate) fn have(&self) -> u64 {
        self.ranges.iter().map(|s| s.done).sum()
    }
}

/// `<dir>/<name>.part.ranges`.
pub(crate) fn map_path(part: &Path) -> PathBuf {
    let mut name = OsString::from(part.as_os_str());
    name.push(".ranges");
    PathBuf::from(name)
}

/// The range map of `part` when it is one for a file of `size` bytes.
pub(crate) fn read_map(part: &Path, size: u64) -> Option<RangeMap> {
    let text = std::fs::read(map_path(part)).ok()?;
    let map: RangeMap = serde_json::from_slice(&text).ok()?;
    map.valid(size).then_some(map)
}

/// The bytes of a file a ranged transfer has on disk: `None` when there is no range map.
pub(crate) fn have(part: &Path, size: u64) -> Option<u64> {
    read_map(part, size).map(|m| m.have())
}

pub(crate) fn write_map(part: &Path, map: &RangeMap) -> Result<(), DownloadError> {
    let path = map_path(part);
    let bytes = serde_json::to_vec(map).expect("a range map encodes");
    toolvisor_kit::private::write_private_file(
        &path,
        &bytes,
        "a download's range map",
        toolvisor_kit::private::Durability::Synced,
    )
    .map_err(|e| DownloadError::io("cannot write", &path, e))
}
