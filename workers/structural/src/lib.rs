//! Structural search and staged rewrites on ast-grep: ast_grep, ast_edit, resolve.
