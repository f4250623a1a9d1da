//! Capped lists page: `references`, `call_hierarchy` and `symbols` (outline and workspace) take
//! `offset`, say `next_offset` until the last page, and the pages together are the whole list,
//! each entry once (197 references to a class could be counted but 51–197 could not be read;
//! an outline stopped at 200 symbols and workspace symbols at 100).

use std::collections::BTreeSet;

use serde_json::{Value, json};
use toolvisor_tests::TestDaemon;
use toolvisor_tests::lsp::{
    enlist_package, lsp_config, ok_in, project, require, says_cut_at, word_count,
};

const MODULES: usize = 60;

#[test]
fn references_and_call_hierarchy_page_through_the_whole_list() {
    require("pyright-langserver");
    let p = enlist_package(MODULES, |i| {
        format!(
            "from pkg.core import enlist\n\n\ndef use{i}() -> str:\n    return enlist(\"m{i}\")\n"
        )
    });
    let root = p.path().canonicalize().unwrap();
    let d = TestDaemon::start(&lsp_config(""));
    let want = word_count(&root, "enlist", &["py"]);

    // References: pages of 50 until there is no next_offset.
    let mut seen = BTreeSet::new();
    let mut offset: Option<u64> = None;
    let mut pages = 0;
    loop {
        let mut args =
            json!({"op": "references", "file": "pkg/core.py", "line": 1, "symbol": "enlist"});
        if let Some(o) = offset {
            args["offset"] = json!(o);
        }
        let v = ok_in(&d, &root, "lsp", args);
        pages += 1;
        assert_eq!(v["total"].as_u64().unwrap() as usize, want, "{v}");
        assert_eq!(
            v["offset"].as_u64().unwrap_or(0),
            offset.unwrap_or(0),
            "{v}"
        );
        assert_eq!(v["complete"], false, "a page of a longer list: {v}");
        let locs = v["locations"].as_array().unwrap();
        assert!(locs.len() <= 50, "{v}");
        for l in locs {
            let key = format!("{}:{}:{}", l["path"], l["line"], l["column"]);
            assert!(seen.insert(key.clone()), "{key} on two pages");
        }
        match v["next_offset"].as_u64() {
            Some(next) => {
                let text = v["text"].as_str().unwrap();
                assert!(
                    text.contains(&format!("`offset: {next}` shows the next")),
                    "{text}"
                );
                offset = Some(next);
            }
            None => {
                assert!(v["text"].as_str().unwrap().contains("the last page"), "{v}");
                break;
            }
        }
        assert!(pages < 10, "no end to the pages");
    }
    assert_eq!(seen.len(), want, "the pages together are the whole list");
    assert_eq!(pages, want.div_ceil(50));

    // Incoming calls: 60 callers, two pages.
    let page = |offset: u64| -> Value {
        ok_in(
            &d,
            &root,
            "lsp",
            json!({"op": "call_hierarchy", "file": "pkg/core.py", "line": 1, "symbol": "enlist", "offset": offset}),
        )
    };
    let first = page(0);
    assert_eq!(first["incoming"].as_array().unwrap().len(), 50, "{first}");
    assert_eq!(first["incoming_truncated"], true, "{first}");
    assert_eq!(
        first["complete"], false,
        "a cut list is not complete: {first}"
    );
    assert_eq!(first["next_offset"], 50, "{first}");
    let second = page(50);
    let callers = |v: &Value| -> BTreeSet<String> {
        v["incoming"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["caller"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        second["incoming"].as_array().unwrap().len(),
        MODULES - 50,
        "{second}"
    );
    assert!(second["next_offset"].is_null(), "{second}");
    let all: BTreeSet<String> = callers(&first).union(&callers(&second)).cloned().collect();
    assert_eq!(all.len(), MODULES, "every caller once: {all:?}");
}

/// Every page of `args` (`offset` from 0 until no `next_offset`): the names listed, in order,
/// and the pages seen. Each page says the same `total`; a cut one is `complete: false`.
fn symbol_pages(d: &TestDaemon, root: &std::path::Path, args: Value) -> (Vec<String>, usize) {
    let mut names = Vec::new();
    let mut offset = 0;
    let mut pages = 0;
    let mut total = None;
    loop {
        let mut a = args.clone();
        a["offset"] = json!(offset);
        let v = ok_in(d, root, "lsp", a);
        pages += 1;
        assert!(pages < 20, "no end to the pages: {v}");
        let t = v["total"].as_u64().unwrap();
        assert_eq!(
            *total.get_or_insert(t),
            t,
            "every page counts the same: {v}"
        );
        assert_eq!(v["complete"], false, "a page of a longer list: {v}");
        names.extend(
            v["symbols"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s["name"].as_str().unwrap().to_string()),
        );
        match v["next_offset"].as_u64() {
            Some(next) => {
                assert!(
                    v["text"]
                        .as_str()
                        .unwrap()
                        .contains(&format!("`offset: {next}` shows the next")),
                    "{v}"
                );
                offset = next;
            }
            None => {
                assert!(v["text"].as_str().unwrap().contains("the last page"), "{v}");
                assert_eq!(names.len() as u64, t, "the pages together are the list");
                return (names, pages);
            }
        }
    }
}

#[test]
fn document_and_workspace_symbols_page_through_the_whole_list() {
    require("pyright-langserver");
    const UNITS: usize = 250;
    let module: String = (0..UNITS)
        .map(|i| format!("def unit_{i}() -> int:\n    return {i}\n\n\n"))
        .collect();
    let p = enlist_package(1, |_| "X = 1\n".to_string());
    let root = p.path().canonicalize().unwrap();
    toolvisor_tests::lsp::write(&root, "pkg/units.py", &module);
    let d = TestDaemon::start(&lsp_config(""));
    // The truth: the functions the file defines, in its order.
    let want: Vec<String> = module
        .lines()
        .filter_map(|l| l.strip_prefix("def "))
        .map(|l| l.split('(').next().unwrap().to_string())
        .collect();

    // The outline: 200 a page.
    let (names, pages) = symbol_pages(&d, &root, json!({"op": "symbols", "file": "pkg/units.py"}));
    assert_eq!(names, want, "the outline's pages, in the file's order");
    assert_eq!(pages, UNITS.div_ceil(200));

    // Workspace symbols: 100 a page, each once.
    let (names, pages) = symbol_pages(&d, &root, json!({"op": "symbols", "query": "unit_"}));
    let listed: BTreeSet<&String> = names.iter().collect();
    assert_eq!(
        listed.len(),
        names.len(),
        "a symbol on two pages: {names:?}"
    );
    for w in &want {
        assert!(listed.contains(w), "{w} is on no page");
    }
    assert_eq!(pages, names.len().div_ceil(100));
}

/// clangd cuts workspace symbols at its `--limit-results` (100) without a word: a list of
/// exactly that many is not said to be complete (a fresh probe: query `Py` on a C extension
/// gave 100 "complete" and left out `PyLong_FromLong`).
#[test]
fn a_workspace_symbol_list_clangd_cut_at_its_limit_says_so() {
    require("clangd");
    let funcs: String = (0..130)
        .map(|i| format!("int pyfun_{i}(void) {{ return {i}; }}\n"))
        .collect();
    let p = project(&[("compile_flags.txt", "-std=c11\n"), ("funcs.c", &funcs)]);
    let d = TestDaemon::start(&lsp_config(""));
    let v = ok_in(
        &d,
        p.path(),
        "lsp",
        json!({"op": "symbols", "query": "pyfun_", "file": "funcs.c"}),
    );
    says_cut_at(&v, 100);
}
