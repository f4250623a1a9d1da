//! Secrets recognised by their form, whatever variable (if any) held them: the token
//! formats that providers publish so scanners can find leaked tokens (GitHub, GitLab, AWS,
//! Slack, Stripe, Google, Hugging Face, npm, OpenAI/Anthropic keys, private key blocks, JWTs),
//! and an AWS secret access key written after its name. One combined regex, one pass.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;

/// (group name, what the mask says, pattern). A pattern with an inner group `v_<name>` masks
/// only that group (the name before it stays: `aws_secret_access_key = [masked:…]`).
const FORMATS: &[(&str, &str, &str)] = &[
    ("gh", "github token", r"\bgh[pousr]_[A-Za-z0-9]{36,255}\b"),
    ("ghpat", "github token", r"\bgithub_pat_[A-Za-z0-9_]{82}\b"),
    ("glpat", "gitlab token", r"\bglpat-[A-Za-z0-9_-]{20,}"),
    (
        "akid",
        "aws access key id",
        r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b",
    ),
    (
        "awssecret",
        "aws secret access key",
        r#"(?i:aws)[A-Za-z0-9_.-]{0,24}(?i:secret)[A-Za-z0-9_.-]{0,24}["']?\s*[:=]\s*["']?(?P<v_awssecret>[A-Za-z0-9/+]{40})\b"#,
    ),
    ("slack", "slack token", r"\bxox[abprse]-[A-Za-z0-9-]{10,}"),
    (
        "stripe",
        "stripe key",
        r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}\b",
    ),
    ("gapi", "google api key", r"\bAIza[0-9A-Za-z_-]{35}"),
    ("hf", "hugging face token", r"\bhf_[A-Za-z0-9]{34,}\b"),
    ("npm", "npm token", r"\bnpm_[A-Za-z0-9]{36}\b"),
    (
        "sk",
        "api key",
        r"\bsk-(?:proj-|ant-(?:api|admin)\d\d-)?[A-Za-z0-9_-]{32,}",
    ),
    (
        "pem",
        "private key",
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----",
    ),
    (
        "jwt",
        "jwt",
        r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{16,}",
    ),
];

static COMBINED: LazyLock<Regex> = LazyLock::new(|| {
    let alternatives: Vec<String> = FORMATS
        .iter()
        .map(|(name, _, pattern)| format!("(?P<{name}>{pattern})"))
        .collect();
    Regex::new(&alternatives.join("|")).expect("the token formats compile")
});

/// `text` with every token of a known format replaced by `[masked:<format>]`; counts per
/// format go to `masked` (as `<format> (format)`). `None` when nothing matched.
pub fn mask(text: &str, masked: &mut BTreeMap<String, u64>) -> Option<String> {
    // Nearly every string of nearly every result holds no token: a match test first, which
    // sets up no capture groups (every result's every key and string passes here).
    if !COMBINED.is_match(text) {
        return None;
    }
    let mut out: Option<String> = None;
    let mut last = 0;
    for caps in COMBINED.captures_iter(text) {
        let Some((name, label)) = FORMATS
            .iter()
            .find(|(name, _, _)| caps.name(name).is_some())
            .map(|(n, l, _)| (*n, *l))
        else {
            continue;
        };
        let Some(span) = caps.name(&format!("v_{name}")).or_else(|| caps.name(name)) else {
            continue;
        };
        let buf = out.get_or_insert_with(|| String::with_capacity(text.len()));
        buf.push_str(&text[last..span.start()]);
        buf.push_str("[masked:");
        buf.push_str(label);
        buf.push(']');
        last = span.end();
        *masked.entry(format!("{label} (format)")).or_default() += 1;
    }
    let mut out = out?;
    out.push_str(&text[last..]);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(text: &str) -> String {
        mask(text, &mut BTreeMap::new()).unwrap_or_else(|| text.to_string())
    }

    #[test]
    fn well_known_token_formats_are_masked() {
        let gh = format!("ghp_{}", &"A1b2C3d4".repeat(5)[..36]);
        assert_eq!(
            m(&format!("token {gh} end")),
            "token [masked:github token] end"
        );
        assert_eq!(
            m("export AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE"),
            "export AWS_ACCESS_KEY_ID=[masked:aws access key id]"
        );
        assert_eq!(
            m("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
            "aws_secret_access_key = [masked:aws secret access key]"
        );
        assert_eq!(
            m(r#"{"AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}"#),
            r#"{"AWS_SECRET_ACCESS_KEY": "[masked:aws secret access key]"}"#
        );
        assert_eq!(
            m(
                "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk=\n-----END OPENSSH PRIVATE KEY-----\nrest"
            ),
            "[masked:private key]\nrest"
        );
        assert_eq!(
            m(&format!("hf_{}", "x".repeat(34))),
            "[masked:hugging face token]"
        );
        let mut counts = BTreeMap::new();
        mask(&format!("{gh} {gh}"), &mut counts);
        assert_eq!(counts["github token (format)"], 2);
    }

    #[test]
    fn ordinary_text_is_left_alone() {
        for text in [
            "ghp_short",
            "the AKIA prefix alone",
            "sk-learn and scikit-learn",
            "a 40-character hash 0123456789abcdef0123456789abcdef01234567",
            "aws is a cloud; its secrets live elsewhere",
            "-----BEGIN PUBLIC KEY-----",
            "eyJhbGciOi alone",
            "/home/me/src/hf_transfer/lib.rs",
        ] {
            assert_eq!(mask(text, &mut BTreeMap::new()), None, "{text}");
        }
    }
}
