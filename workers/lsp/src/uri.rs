//! `file://` URIs to and from paths, percent-encoding everything but unreserved bytes and `/`
//! (so a Korean or spaced path survives the round trip).

use std::path::{Path, PathBuf};

pub fn from_path(path: &Path) -> String {
    let mut out = String::from("file://");
    for &b in path.as_os_str().as_encoded_bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The path of a `file://` URI; `None` for other schemes.
pub fn to_path(uri: &str) -> Option<PathBuf> {
    let rest = uri.strip_prefix("file://")?;
    // `file://localhost/x` and `file:///x`
    let rest = rest.strip_prefix("localhost").unwrap_or(rest);
    let bytes = rest.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Ok(v) = u8::from_str_radix(std::str::from_utf8(&bytes[i + 1..i + 3]).ok()?, 16)
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    Some(PathBuf::from(String::from_utf8(out).ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_odd_paths() {
        for p in ["/tmp/a b/한글.py", "/x/y%z.c", "/plain/file.rs"] {
            let uri = from_path(Path::new(p));
            assert!(uri.is_ascii(), "{uri}");
            assert_eq!(to_path(&uri).unwrap(), PathBuf::from(p));
        }
        assert_eq!(to_path("file:///a/%3A").unwrap(), PathBuf::from("/a/:"));
        assert_eq!(to_path("untitled:x"), None);
    }
}
