//! IPython idioms typed by reflex, rewritten to plain Python before a cell runs: `%pip`,
//! `%cd`, `%timeit`, `%matplotlib`, `!cmd`, `x = !cmd`, and the cell magics `%%bash` and
//! `%%timeit`. The rewritten calls go to `__tv__`, the helper the Python driver installs in
//! builtins.
//!
//! A line is only a magic where a statement can start: not inside a string, not inside open
//! brackets, not after a backslash continuation. Each rewritten line stays one line, so line
//! numbers in tracebacks still match the cell. An unknown magic is refused before anything
//! runs, with the list of supported ones.

/// What the error message lists.
pub const SUPPORTED: &str = "%pip, %cd, %timeit, %matplotlib (a no-op: figures always come back inline), %%bash, %%timeit, !cmd, x = !cmd";

/// A cell that uses an idiom this kernel does not rewrite.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct MagicError {
    pub message: String,
}

fn unknown(what: &str, line_no: usize) -> MagicError {
    MagicError {
        message: format!(
            "line {line_no}: `{what}` is not a supported IPython idiom; supported: {SUPPORTED}"
        ),
    }
}

/// A Python string literal with `text` as its value (a JSON string is one, for the escapes
/// serde_json writes).
fn literal(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "''".into())
}

/// Rewrite `code`; code without idioms comes back unchanged.
pub fn rewrite_python(code: &str) -> Result<String, MagicError> {
    if !code.contains('%') && !code.contains('!') {
        return Ok(code.to_string());
    }
    if let Some(rewritten) = cell_magic(code)? {
        return Ok(rewritten);
    }
    let mut out = String::with_capacity(code.len() + 64);
    let mut scan = Scanner::default();
    for (i, line) in code.split_inclusive('\n').enumerate() {
        let (body, newline) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        if scan.at_statement_start()
            && let Some(rewritten) = line_magic(body, i + 1)?
        {
            out.push_str(&rewritten);
            out.push_str(newline);
            continue;
        }
        scan.feed(body);
        out.push_str(line);
    }
    Ok(out)
}

/// `%%name args` on the first non-blank line: the whole cell is one call.
fn cell_magic(code: &str) -> Result<Option<String>, MagicError> {
    let mut lines = code.split_inclusive('\n');
    let mut skipped = 0;
    let first = loop {
        match lines.next() {
            Some(l) if l.trim().is_empty() => skipped += 1,
            Some(l) => break l.trim_end_matches(['\n', '\r']),
            None => return Ok(None),
        }
    };
    let Some(rest) = first.strip_prefix("%%") else {
        return Ok(None);
    };
    let name: String = rest
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    let args = rest[name.len()..].trim();
    let body: String = lines.collect();
    let call = match name.as_str() {
        "bash" => format!("__tv__.bash({})", literal(&body)),
        "timeit" => format!("__tv__.timeit({}, {})", literal(args), literal(&body)),
        _ => return Err(unknown(&format!("%%{name}"), skipped + 1)),
    };
    Ok(Some(call))
}

/// One statement-start line: `%magic`, `!cmd`, `target = !cmd`, or nothing to rewrite.
fn line_magic(line: &str, line_no: usize) -> Result<Option<String>, MagicError> {
    let trimmed = line.trim_start();
    let indent = &line[..line.len() - trimmed.len()];
    if let Some(rest) = trimmed.strip_prefix('%') {
        if let Some(cell) = rest.strip_prefix('%') {
            let name: String = cell
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            return Err(MagicError {
                message: format!(
                    "line {line_no}: the cell magic `%%{name}` must be the first line of the cell"
                ),
            });
        }
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let args = rest[name.len()..].trim();
        let helper = match name.as_str() {
            "pip" | "cd" | "timeit" | "matplotlib" => name.as_str(),
            _ => return Err(unknown(&format!("%{name}"), line_no)),
        };
        return Ok(Some(format!("{indent}__tv__.{helper}({})", literal(args))));
    }
    if let Some(cmd) = trimmed.strip_prefix('!') {
        return Ok(Some(format!("{indent}__tv__.sh({})", literal(cmd.trim()))));
    }
    if let Some((target, cmd)) = capture_assignment(trimmed) {
        return Ok(Some(format!(
            "{indent}{target} = __tv__.sh({}, capture=True)",
            literal(cmd.trim())
        )));
    }
    Ok(None)
}

/// `x = !cmd` / `a, b = !cmd`: the target list and the command.
fn capture_assignment(line: &str) -> Option<(&str, &str)> {
    let eq = line.find('=')?;
    let target = line[..eq].trim_end();
    let after = line[eq + 1..].trim_start();
    let cmd = after.strip_prefix('!')?;
    let first = target.chars().next()?;
    let valid = (first.is_alphabetic() || first == '_')
        && target
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '.' | ',' | ' '));
    valid.then_some((target, cmd))
}

/// Tracks, line by line, whether the next line starts a statement: strings, brackets and
/// backslash continuations carry over.
#[derive(Default)]
struct Scanner {
    /// Inside a string: its quote character and whether it is triple-quoted.
    string: Option<(char, bool)>,
    depth: u32,
    continued: bool,
}

impl Scanner {
    fn at_statement_start(&self) -> bool {
        self.string.is_none() && self.depth == 0 && !self.continued
    }

    fn feed(&mut self, line: &str) {
        let chars: Vec<char> = line.chars().collect();
        let mut i = 0;
        let mut ends_with_backslash = false;
        while i < chars.len() {
            let c = chars[i];
            ends_with_backslash = false;
            match self.string {
                Some((q, triple)) => {
                    if c == '\\' {
                        ends_with_backslash = i + 1 == chars.len();
                        i += 2;
                        continue;
                    }
                    if c == q {
                        if !triple {
                            self.string = None;
                        } else if chars.get(i + 1) == Some(&q) && chars.get(i + 2) == Some(&q) {
                            self.string = None;
                            i += 3;
                            continue;
                        }
                    }
                }
                None => match c {
                    '#' => break,
                    '\\' if i + 1 == chars.len() => ends_with_backslash = true,
                    '"' | '\'' => {
                        let triple = chars.get(i + 1) == Some(&c) && chars.get(i + 2) == Some(&c);
                        self.string = Some((c, triple));
                        if triple {
                            i += 3;
                            continue;
                        }
                    }
                    '(' | '[' | '{' => self.depth += 1,
                    ')' | ']' | '}' => self.depth = self.depth.saturating_sub(1),
                    _ => {}
                },
            }
            i += 1;
        }
        // A one-line string ends with its line unless continued by a backslash.
        if let Some((_, false)) = self.string
            && !ends_with_backslash
        {
            self.string = None;
        }
        self.continued = ends_with_backslash;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rw(code: &str) -> String {
        rewrite_python(code).unwrap()
    }

    #[test]
    fn plain_code_is_untouched() {
        for code in [
            "x = 1\nx",
            "a = 10 % 3\nb = a != 2",
            "print('%d' % 5)\n",
            "s = '''\n!not a command\n%not a magic\n'''",
            "t = (1\n  % 2)",
            "u = 3 \\\n  % 2",
            "if x != 1:\n    pass",
            "d = {'a': 1,\n     'b': 2}\n",
            "# !comment\nx = 1",
        ] {
            assert_eq!(rw(code), code, "{code:?}");
        }
    }

    #[test]
    fn line_idioms_become_helper_calls_on_the_same_line() {
        assert_eq!(rw("!ls -la\nx = 1"), "__tv__.sh(\"ls -la\")\nx = 1");
        assert_eq!(
            rw("for i in range(2):\n    !echo {i}\n"),
            "for i in range(2):\n    __tv__.sh(\"echo {i}\")\n"
        );
        assert_eq!(
            rw("files = !ls \"a b\"\n"),
            "files = __tv__.sh(\"ls \\\"a b\\\"\", capture=True)\n"
        );
        assert_eq!(
            rw("a, b = !echo 1; echo 2"),
            "a, b = __tv__.sh(\"echo 1; echo 2\", capture=True)"
        );
        assert_eq!(rw("%pip install six"), "__tv__.pip(\"install six\")");
        assert_eq!(
            rw("%cd /tmp\n%timeit sum(range(9))"),
            "__tv__.cd(\"/tmp\")\n__tv__.timeit(\"sum(range(9))\")"
        );
        assert_eq!(rw("%matplotlib inline"), "__tv__.matplotlib(\"inline\")");
        // After a closed multi-line string, statements start again.
        assert_eq!(
            rw("s = \"\"\"\nx\n\"\"\"\n!pwd"),
            "s = \"\"\"\nx\n\"\"\"\n__tv__.sh(\"pwd\")"
        );
    }

    #[test]
    fn cell_magics_take_the_whole_cell() {
        assert_eq!(
            rw("%%bash\necho hi\nls\n"),
            "__tv__.bash(\"echo hi\\nls\\n\")"
        );
        assert_eq!(
            rw("\n%%timeit -n 3 x = 2\ny = x * 2\n"),
            "__tv__.timeit(\"-n 3 x = 2\", \"y = x * 2\\n\")"
        );
    }

    #[test]
    fn unknown_idioms_are_refused_naming_the_supported_ones() {
        let err = rewrite_python("x = 1\n%load_ext autoreload").unwrap_err();
        assert!(err.message.starts_with("line 2: `%load_ext`"), "{err}");
        assert!(
            err.message.contains("%pip") && err.message.contains("%%bash"),
            "{err}"
        );
        let err = rewrite_python("%%writefile a.py\nx").unwrap_err();
        assert!(err.message.contains("`%%writefile`"), "{err}");
        let err = rewrite_python("x = 1\n%%bash\nls").unwrap_err();
        assert!(err.message.contains("must be the first line"), "{err}");
    }
}
