//! Secret masking: values of the daemon's environment variables whose names the operator
//! lists (`[secrets] env`) or that match a name pattern (`*_TOKEN`, `*_KEY`, ...) are
//! replaced by `[masked:NAME]` in everything a tool returns to the model, and tokens of the
//! well-known formats ([`formats`]) by `[masked:<format>]` wherever they come from.

pub mod formats;

use std::collections::BTreeMap;

use memchr::memmem;
use serde_json::Value as Json;

/// Known secret values, longest first (so a value containing another is masked whole).
#[derive(Clone, Debug, Default)]
pub struct Secrets {
    known: Vec<(String, String)>,
    /// Mask tokens of the well-known formats too (`[secrets] formats`).
    formats: bool,
}

/// Name patterns masked by default.
pub const DEFAULT_PATTERNS: &[&str] = &[
    "*_TOKEN",
    "*_KEY",
    "*_SECRET",
    "*_PASSWORD",
    "*_PASSWD",
    "*_CREDENTIALS",
];

impl Secrets {
    /// Secrets from `vars` (name, value): names in `names` or matching a glob in
    /// `patterns`, with values of at least `min_len` characters (shorter ones would mask
    /// ordinary words).
    pub fn from_vars(
        vars: impl IntoIterator<Item = (String, String)>,
        names: &[String],
        patterns: &[String],
        min_len: usize,
    ) -> Result<Secrets, String> {
        let mut set = globset::GlobSetBuilder::new();
        for p in patterns {
            set.add(globset::Glob::new(p).map_err(|e| format!("secret name pattern {p:?}: {e}"))?);
        }
        let set = set
            .build()
            .map_err(|e| format!("secret name patterns: {e}"))?;
        let mut known: Vec<(String, String)> = Vec::new();
        for (name, value) in vars {
            // Credentials inside a URL are secret whatever the variable is called
            // (`DATABASE_URL=postgres://user:pass@host`, `HTTPS_PROXY=http://u:p@proxy`).
            known.extend(url_credentials(&name, &value, min_len));
            if value.chars().count() >= min_len
                && (names.iter().any(|n| n == &name) || set.is_match(&name))
            {
                known.push((name, value));
            }
        }
        known.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(&b.0)));
        let mut seen = std::collections::HashSet::new();
        known.retain(|(_, value)| seen.insert(value.clone()));
        Ok(Secrets {
            known,
            formats: true,
        })
    }

    /// Whether tokens of the well-known formats are masked too (on unless turned off).
    pub fn with_formats(mut self, on: bool) -> Secrets {
        self.formats = on;
        self
    }

    /// Secrets from the daemon's own environment.
    pub fn from_env(
        names: &[String],
        patterns: &[String],
        min_len: usize,
    ) -> Result<Secrets, String> {
        Self::from_vars(std::env::vars(), names, patterns, min_len)
    }

    /// Nothing to mask: no known values and no formats.
    pub fn is_empty(&self) -> bool {
        self.known.is_empty() && !self.formats
    }

    /// Names of the known secrets (never their values).
    pub fn names(&self) -> Vec<&str> {
        self.known.iter().map(|(n, _)| n.as_str()).collect()
    }

    /// `text` with every known secret replaced; counts per name go to `masked`.
    pub fn mask_str(&self, text: &str, masked: &mut BTreeMap<String, u64>) -> Option<String> {
        let mut out: Option<String> = None;
        for (name, value) in &self.known {
            let current = out.as_deref().unwrap_or(text);
            let finder = memmem::Finder::new(value.as_bytes());
            if finder.find(current.as_bytes()).is_none() {
                continue;
            }
            let mut next = String::with_capacity(current.len());
            let mut last = 0;
            let mut count = 0;
            for at in finder.find_iter(current.as_bytes()) {
                next.push_str(&current[last..at]);
                next.push_str("[masked:");
                next.push_str(name);
                next.push(']');
                last = at + value.len();
                count += 1;
            }
            next.push_str(&current[last..]);
            *masked.entry(name.clone()).or_default() += count;
            out = Some(next);
        }
        if self.formats
            && let Some(masked_formats) = formats::mask(out.as_deref().unwrap_or(text), masked)
        {
            out = Some(masked_formats);
        }
        out
    }

    /// Mask every string in `value` (keys too); returns counts per secret name.
    pub fn mask_json(&self, value: &mut Json) -> BTreeMap<String, u64> {
        let mut masked = BTreeMap::new();
        if !self.is_empty() {
            self.walk(value, &mut masked);
        }
        masked
    }

    fn walk(&self, value: &mut Json, masked: &mut BTreeMap<String, u64>) {
        match value {
            Json::String(s) => {
                if let Some(m) = self.mask_str(s, masked) {
                    *s = m;
                }
            }
            Json::Array(items) => items.iter_mut().for_each(|v| self.walk(v, masked)),
            Json::Object(map) => {
                let renamed: Vec<(String, String)> = map
                    .keys()
                    .filter_map(|k| self.mask_str(k, masked).map(|m| (k.clone(), m)))
                    .collect();
                for (old, new) in renamed {
                    if let Some(v) = map.remove(&old) {
                        map.insert(new, v);
                    }
                }
                map.values_mut().for_each(|v| self.walk(v, masked));
            }
            _ => {}
        }
    }
}

/// The secrets inside every URL of `value` that carries a password
/// (`scheme://user:password@host`): the `user:password` pair, always (it cannot be an
/// ordinary word), and the password alone (also percent-decoded) when it has at least
/// `min_len` characters.
fn url_credentials(name: &str, value: &str, min_len: usize) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = value;
    while let Some(at) = rest.find("://") {
        let after = &rest[at + 3..];
        let end = after
            .find(|c: char| matches!(c, '/' | '?' | '#') || c.is_whitespace())
            .unwrap_or(after.len());
        let authority = &after[..end];
        rest = &after[end..];
        let Some((userinfo, _host)) = authority.rsplit_once('@') else {
            continue;
        };
        let Some((user, password)) = userinfo.split_once(':') else {
            continue;
        };
        if password.is_empty() {
            continue;
        }
        out.push((
            format!("{name} (URL credentials)"),
            format!("{user}:{password}"),
        ));
        let decoded = percent_decode(password);
        for candidate in [password.to_string(), decoded] {
            if candidate.chars().count() >= min_len
                && !out.iter().any(|(_, v): &(String, String)| v == &candidate)
            {
                out.push((format!("{name} (URL password)"), candidate));
            }
        }
    }
    out
}

/// `%XX` escapes decoded; anything malformed is kept as it is.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push(h * 16 + l);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap_or_else(|_| text.to_string())
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn secrets() -> Secrets {
        let vars = [
            ("GITHUB_TOKEN", "ghp_abcdefghijklmnop"),
            ("API_KEY", "k-1234567890"),
            ("SHORT_KEY", "abc"),
            ("DATABASE_URL", "postgres://u:pw@h/db"),
            ("PATH", "/usr/bin:/bin"),
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()));
        let patterns: Vec<String> = DEFAULT_PATTERNS.iter().map(|s| s.to_string()).collect();
        Secrets::from_vars(vars, &["DATABASE_URL".into()], &patterns, 8).unwrap()
    }

    #[test]
    fn masks_values_by_name_and_pattern() {
        let s = secrets();
        assert_eq!(
            s.names(),
            [
                "DATABASE_URL",
                "GITHUB_TOKEN",
                "API_KEY",
                "DATABASE_URL (URL credentials)"
            ]
        );
        let mut v = json!({"stdout": "token=ghp_abcdefghijklmnop and k-1234567890 twice k-1234567890", "n": 1, "list": ["postgres://u:pw@h/db", "abc"]});
        let masked = s.mask_json(&mut v);
        assert_eq!(
            v["stdout"],
            "token=[masked:GITHUB_TOKEN] and [masked:API_KEY] twice [masked:API_KEY]"
        );
        assert_eq!(v["list"], json!(["[masked:DATABASE_URL]", "abc"]));
        assert_eq!(masked["API_KEY"], 2);
        assert_eq!(masked.len(), 3);
    }

    #[test]
    fn url_credentials_are_masked_whatever_the_variable_is_called() {
        let vars = [
            ("PG", "postgres://app:s3cr%40t-pass@db.internal:5432/prod"),
            ("HTTPS_PROXY", "http://me:pw@proxy:3128"),
            ("PLAIN_URL", "https://example.org/path?q=a:b@c"),
            ("NO_PASSWORD", "ssh://git@host/repo"),
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()));
        let s = Secrets::from_vars(vars, &[], &[], 8).unwrap();
        let mut v = json!({
            "a": "connecting to postgres://app:s3cr%40t-pass@db.internal:5432/prod",
            "b": "password s3cr@t-pass and s3cr%40t-pass",
            "c": "proxy http://me:pw@proxy:3128 and the word pw",
            "d": "git@host and a:b@c",
        });
        s.mask_json(&mut v);
        assert_eq!(
            v["a"],
            "connecting to postgres://[masked:PG (URL credentials)]@db.internal:5432/prod"
        );
        assert_eq!(
            v["b"],
            "password [masked:PG (URL password)] and [masked:PG (URL password)]"
        );
        // A short password is masked only as part of its `user:password` pair.
        assert_eq!(
            v["c"],
            "proxy http://[masked:HTTPS_PROXY (URL credentials)]@proxy:3128 and the word pw"
        );
        // No password, or `@` outside the authority: nothing to mask.
        assert_eq!(v["d"], "git@host and a:b@c");
    }
}
