//! Positions as the model gives them (1-based line + a symbol substring) and as servers take
//! them (0-based line + a column counted in the negotiated encoding: UTF-16 code units by
//! default, UTF-8 bytes or UTF-32 code points when the server chose them).

use toolvisor_protocol::error::{ErrorKind, ToolError};

/// The negotiated `positionEncoding`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    Utf8,
    Utf16,
    Utf32,
}

impl From<Encoding> for toolvisor_protocol::results::LspEncoding {
    fn from(e: Encoding) -> Self {
        use toolvisor_protocol::results::LspEncoding;
        match e {
            Encoding::Utf8 => LspEncoding::Utf8,
            Encoding::Utf16 => LspEncoding::Utf16,
            Encoding::Utf32 => LspEncoding::Utf32,
        }
    }
}

impl Encoding {
    pub fn from_name(name: &str) -> Option<Encoding> {
        match name {
            "utf-8" => Some(Encoding::Utf8),
            "utf-16" => Some(Encoding::Utf16),
            "utf-32" => Some(Encoding::Utf32),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Encoding::Utf8 => "utf-8",
            Encoding::Utf16 => "utf-16",
            Encoding::Utf32 => "utf-32",
        }
    }

    fn units(self, c: char) -> usize {
        match self {
            Encoding::Utf8 => c.len_utf8(),
            Encoding::Utf16 => c.len_utf16(),
            Encoding::Utf32 => 1,
        }
    }

    /// The column of byte offset `byte` of `line`, in this encoding.
    pub fn column(self, line: &str, byte: usize) -> u32 {
        let byte = byte.min(line.len());
        let n: usize = line
            .char_indices()
            .take_while(|(i, _)| *i < byte)
            .map(|(_, c)| self.units(c))
            .sum();
        u32::try_from(n).unwrap_or(u32::MAX)
    }

    /// The byte offset in `line` of a column in this encoding (clamped to the line; a
    /// column inside a character rounds down to its start).
    pub fn byte(self, line: &str, column: u32) -> usize {
        let mut units = 0usize;
        for (i, c) in line.char_indices() {
            if units >= column as usize {
                return i;
            }
            units += self.units(c);
            if units > column as usize {
                return i;
            }
        }
        line.len()
    }
}

/// The text of 1-based line `n` (without its line ending).
pub fn line_text(text: &str, n: usize) -> Option<&str> {
    text.split('\n')
        .nth(n.checked_sub(1)?)
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
}

/// Byte offsets of every occurrence of `symbol` in `line`, non-overlapping.
pub fn occurrences(line: &str, symbol: &str) -> Vec<usize> {
    if symbol.is_empty() {
        return Vec::new();
    }
    line.match_indices(symbol).map(|(i, _)| i).collect()
}

/// The identifier the span `byte..byte + len` of `line` lies in, when it is longer than the
/// span (`Segment` in `Segments`): what a server answers about at that position.
pub fn enclosing_word(line: &str, byte: usize, len: usize) -> Option<String> {
    let word = |c: char| c.is_alphanumeric() || c == '_';
    let end = (byte + len).min(line.len());
    if !line.is_char_boundary(byte) || !line.is_char_boundary(end) {
        return None;
    }
    let start = line[..byte]
        .char_indices()
        .rev()
        .take_while(|(_, c)| word(*c))
        .last()
        .map_or(byte, |(i, _)| i);
    let stop = line[end..]
        .char_indices()
        .take_while(|(_, c)| word(*c))
        .last()
        .map_or(end, |(i, c)| end + i + c.len_utf8());
    (start < byte || stop > end).then(|| line[start..stop].to_string())
}

/// Where `symbol` is on `line` (1-based) of `text`: the byte offset of the chosen occurrence.
/// Absent → error quoting the line; several without `occurrence` → error listing them.
pub fn locate(
    text: &str,
    path: &str,
    line: usize,
    symbol: &str,
    occurrence: Option<usize>,
) -> Result<(String, usize), ToolError> {
    let total = text.split('\n').count();
    let Some(src) = line_text(text, line) else {
        return Err(ToolError::new(
            ErrorKind::InvalidArgs,
            format!("{path} has {total} lines; there is no line {line}"),
            "give a 1-based line number inside the file",
        ));
    };
    let found = occurrences(src, symbol);
    let shown = src.trim_end();
    match (found.len(), occurrence) {
        (0, _) => Err(ToolError::new(
            ErrorKind::InvalidArgs,
            format!("`{symbol}` is not on {path}:{line}: {shown}"),
            "give the line the symbol is on and a substring copied from it",
        )),
        (1, None | Some(1)) => Ok((src.to_string(), found[0])),
        (n, None) => {
            let listed: Vec<String> = found
                .iter()
                .enumerate()
                .map(|(i, &b)| {
                    format!(
                        "{}: column {} (…{}…)",
                        i + 1,
                        src[..b].chars().count() + 1,
                        context(src, b, symbol.len())
                    )
                })
                .collect();
            Err(ToolError::new(
                ErrorKind::InvalidArgs,
                format!(
                    "`{symbol}` occurs {n} times on {path}:{line}: {shown}\n{}",
                    listed.join("\n")
                ),
                "pick one with `occurrence` (1-based), or give a longer, unique substring",
            ))
        }
        (n, Some(k)) if k >= 1 && k <= n => Ok((src.to_string(), found[k - 1])),
        (n, Some(k)) => Err(ToolError::new(
            ErrorKind::InvalidArgs,
            format!("`{symbol}` occurs {n} times on {path}:{line}; occurrence {k} does not exist"),
            format!("`occurrence` must be between 1 and {n}"),
        )),
    }
}

/// Whether the span `byte..byte + len` of `line` lies inside a longer name: a name character
/// right before a span that starts with one, or right after a span that ends with one.
fn inside_word(line: &str, byte: usize, len: usize) -> bool {
    let word = |c: char| c.is_alphanumeric() || c == '_';
    let end = (byte + len).min(line.len());
    if !line.is_char_boundary(byte) || !line.is_char_boundary(end) {
        return false;
    }
    let span = &line[byte..end];
    let before = line[..byte].chars().next_back();
    let after = line[end..].chars().next();
    (span.chars().next().is_some_and(word) && before.is_some_and(word))
        || (span.chars().next_back().is_some_and(word) && after.is_some_and(word))
}

/// [`locate`] for an op about the name `symbol` names (every position op but completions,
/// which completes a prefix): an occurrence inside a longer name (`frozenbitarray` in
/// `test_frozenbitarray`, `Var` in `VarP`) is not it, since the server would answer about the
/// longer name (and a rename would rename it). Of several occurrences on the line, the one
/// standing as a name of its own is taken when it is the only such; a line where it stands
/// only inside longer names, or an `occurrence` that is inside one, is refused naming them.
pub fn locate_name(
    text: &str,
    path: &str,
    line: usize,
    symbol: &str,
    occurrence: Option<usize>,
) -> Result<(String, usize), ToolError> {
    let src = line_text(text, line).unwrap_or("");
    let found = occurrences(src, symbol);
    if found.is_empty() {
        // No such line, or not on it: `locate` says which.
        return locate(text, path, line, symbol, occurrence);
    }
    let whole: Vec<usize> = found
        .iter()
        .copied()
        .filter(|&b| !inside_word(src, b, symbol.len()))
        .collect();
    let (src, byte) = match (occurrence, whole.as_slice()) {
        (None, [one]) => (src.to_string(), *one),
        (None, []) => {
            let mut names: Vec<String> = found
                .iter()
                .filter_map(|&b| enclosing_word(src, b, symbol.len()))
                .collect();
            names.dedup();
            let names: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
            return Err(ToolError::new(
                ErrorKind::InvalidArgs,
                format!(
                    "`{symbol}` stands on {path}:{line} only inside longer names ({}), which the server would be asked about instead: {}",
                    names.join(", "),
                    src.trim_end()
                ),
                format!(
                    "give the line where `{symbol}` stands as a name of its own, or put the longer name in `symbol`"
                ),
            ));
        }
        _ => locate(text, path, line, symbol, occurrence)?,
    };
    if inside_word(&src, byte, symbol.len()) {
        let word = enclosing_word(&src, byte, symbol.len()).unwrap_or_default();
        return Err(ToolError::new(
            ErrorKind::InvalidArgs,
            format!(
                "that occurrence of `{symbol}` on {path}:{line} is inside `{word}`, which the server would be asked about instead"
            ),
            "pick an occurrence where it stands as a name of its own, or put the longer name in `symbol`",
        ));
    }
    Ok((src, byte))
}

/// A few characters around an occurrence, to tell occurrences apart.
fn context(line: &str, byte: usize, len: usize) -> String {
    let before: String = line[..byte]
        .chars()
        .rev()
        .take(12)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    let after: String = line[byte + len..].chars().take(12).collect();
    format!("{before}[{}]{after}", &line[byte..byte + len])
}

/// The identifier a `symbol` found at `byte` of `line` names: the first word character of
/// the match (`symbol` may carry punctuation, `"is_list_like ="`) and the word around it. This,
/// not the spelling of the query, is the name a server searches.
pub fn word_at(line: &str, byte: usize, len: usize) -> &str {
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    let end = (byte + len).min(line.len());
    let Some((at, _)) = line[byte..end]
        .char_indices()
        .find(|&(_, c)| is_word(c))
        .map(|(i, c)| (byte + i, c))
    else {
        return &line[byte..end];
    };
    let start = line[..at]
        .char_indices()
        .rev()
        .take_while(|&(_, c)| is_word(c))
        .last()
        .map_or(at, |(i, _)| i);
    let stop = line[at..]
        .char_indices()
        .find(|&(_, c)| !is_word(c))
        .map_or(line.len(), |(i, _)| at + i);
    &line[start..stop]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_symbol_inside_a_longer_word_names_that_word() {
        let line = "    \"\"\"Segments of text, one Segment at a time.\"\"\"";
        let first = line.find("Segment").unwrap();
        assert_eq!(enclosing_word(line, first, 7).as_deref(), Some("Segments"));
        let whole = line.find("Segment at").unwrap();
        assert_eq!(enclosing_word(line, whole, 7), None);
        assert_eq!(
            enclosing_word("x = enlist(1)", 4, 3).as_deref(),
            Some("enlist")
        );
        assert_eq!(
            enclosing_word("한글변수 = 1", 0, 3).as_deref(),
            Some("한글변수")
        );
    }

    #[test]
    fn a_name_is_located_where_it_stands_alone_never_inside_a_longer_one() {
        let text =
            "def test_frozenbitarray(self):\n    f.VarP(v); f.Var(v)\n    VarP(x)\nobj.append(1)\n";
        let e = locate_name(text, "t.py", 1, "frozenbitarray", None).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidArgs);
        assert!(
            e.message
                .contains("only inside longer names (`test_frozenbitarray`)"),
            "{e}"
        );
        // Two occurrences, one of them a name of its own: that one, without `occurrence`.
        let (src, byte) = locate_name(text, "t.py", 2, "Var", None).unwrap();
        assert_eq!(&src[byte..byte + 5], "Var(v");
        // An occurrence named inside a longer name is refused, naming it.
        let e = locate_name(text, "t.py", 2, "Var", Some(1)).unwrap_err();
        assert!(e.message.contains("inside `VarP`"), "{e}");
        assert!(locate_name(text, "t.py", 3, "Var", None).is_err());
        // Punctuation at an end is no name character: `.append` stands as written.
        assert!(locate_name(text, "t.py", 4, ".append", None).is_ok());
        assert!(locate_name(text, "t.py", 4, "obj.app", None).is_err());
        // Completions complete a prefix: plain `locate` takes it.
        assert!(locate(text, "t.py", 4, "obj.app", None).is_ok());
        // What `locate` refuses, `locate_name` refuses the same way.
        assert!(
            locate_name(text, "t.py", 9, "x", None)
                .unwrap_err()
                .message
                .contains("there is no line 9")
        );
    }

    #[test]
    fn the_word_at_a_match_ignores_how_the_query_was_spelled() {
        let line = "    def is_list_like(obj) -> bool:";
        for symbol in [
            "is_list_like",
            "is_list_like(",
            "def is_list_like",
            "list_like",
            " is_",
        ] {
            let byte = line.find(symbol).unwrap();
            let want = if symbol == "def is_list_like" {
                "def"
            } else {
                "is_list_like"
            };
            assert_eq!(word_at(line, byte, symbol.len()), want, "{symbol:?}");
        }
        assert_eq!(word_at("x = (", 4, 1), "(");
    }

    #[test]
    fn columns_follow_the_encoding() {
        let line = "s = '한글😀'; foo()";
        let byte = line.find("foo").unwrap();
        assert_eq!(Encoding::Utf8.column(line, byte), byte as u32);
        // 한, 글: one UTF-16 unit each; 😀: two.
        assert_eq!(Encoding::Utf16.column(line, byte), 12);
        assert_eq!(Encoding::Utf32.column(line, byte), 11);
        for enc in [Encoding::Utf8, Encoding::Utf16, Encoding::Utf32] {
            let col = enc.column(line, byte);
            assert_eq!(enc.byte(line, col), byte, "{enc:?}");
        }
        assert_eq!(Encoding::Utf16.byte(line, 999), line.len());
    }

    #[test]
    fn locate_errors_quote_the_line_and_list_occurrences() {
        let text = "a = 1\nb = a + a\n";
        assert_eq!(locate(text, "f.py", 1, "a", None).unwrap().1, 0);
        let e = locate(text, "f.py", 2, "a", None).unwrap_err();
        assert!(e.message.contains("occurs 2 times"), "{}", e.message);
        assert!(e.message.contains("1: column 5"), "{}", e.message);
        assert_eq!(locate(text, "f.py", 2, "a", Some(2)).unwrap().1, 8);
        let e = locate(text, "f.py", 1, "zz", None).unwrap_err();
        assert!(e.message.contains("f.py:1: a = 1"), "{}", e.message);
        assert!(locate(text, "f.py", 9, "a", None).is_err());
        assert!(locate(text, "f.py", 2, "a", Some(3)).is_err());
    }
}
