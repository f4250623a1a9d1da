//! The tools' reference in `docs/TOOLS.md`, rendered from their specs: for each tool a
//! block between `<!-- generated: <tool> -->` and `<!-- end generated -->` (its tier, parallel
//! safety, approval rule, resource, description, an arguments table from its input schema, a
//! summary of its results from its output schema, and the gate errors its spec makes
//! possible), and the overview table (`<!-- generated: index -->`). Everything else in
//! TOOLS.md is written by hand. `tests/registry_docs_examples.rs` fails when a block differs
//! from what [`regenerate`] makes of the specs now, or a tool has none; [`BLESS`] rewrites the
//! blocks.

use serde_json::Value as Json;
use toolvisor_protocol::wire::Tier;

use super::spec::{Approval, Attachment, ToolSpec};

/// The command that rewrites the generated blocks of `docs/TOOLS.md` from the specs.
pub const BLESS: &str =
    "TOOLVISOR_BLESS=1 cargo test -p toolvisor --test registry_docs_examples generated_reference";

/// The line that opens the generated block of `name` (a tool, or `index`).
fn opening(name: &str) -> String {
    format!("<!-- generated: {name} -->")
}

/// The line that closes a generated block.
const CLOSING: &str = "<!-- end generated -->";

/// The overview: one row per tool, in the order given.
fn index(specs: &[ToolSpec]) -> String {
    let mut out = String::from(
        "| tool | tier | parallel-safe | approval | resource |\n|---|---|---|---|---|\n",
    );
    for spec in specs {
        out += &format!(
            "| `{}` | {} | {} | {} | {} |\n",
            spec.name,
            tier_of(spec),
            if spec.parallel_safe { "yes" } else { "**no**" },
            spec.approval.says(),
            spec.resource,
        );
    }
    out
}

/// The reference block of one tool (without its marker lines); `specs` are every tool, in
/// order: arguments or a result of the same schema as an earlier tool's are named as that
/// one's.
fn block(spec: &ToolSpec, specs: &[ToolSpec]) -> String {
    let mut facts = vec![
        format!("**Tier** {}", tier_of(spec)),
        format!(
            "**parallel-safe** {}",
            if spec.parallel_safe {
                "yes"
            } else {
                "no (one call at a time per conversation)"
            }
        ),
        format!("**approval** {}", spec.approval.says()),
        format!("**resource** `{}`", spec.resource),
    ];
    if spec.long_running {
        facts.push("**long-running** (may run for minutes)".into());
    }
    if let Some(f) = &spec.follow {
        facts.push(format!(
            "**starts a job**, named by its result's `{}`, followed with `{}`, stopped with `{}`",
            f.id, f.poll, f.stop
        ));
    }
    let mut out = format!("{}.\n\n{}\n\n", facts.join(" · "), cell(spec.description));
    let earlier = || specs.iter().take_while(|s| s.name != spec.name);
    let has_args = spec.schema["properties"]
        .as_object()
        .is_some_and(|p| !p.is_empty());
    match earlier().find(|s| has_args && s.schema == spec.schema) {
        Some(same) => out += &format!("**Arguments**: as `{}`'s.\n", same.name),
        None => out += &arguments(&spec.schema),
    }
    out += "\n";
    match earlier().find(|s| s.output == spec.output) {
        Some(earlier) => out += &format!("**Result**: as `{}`'s.\n", earlier.name),
        None => out += &results(spec.name, &spec.output),
    }
    out += "\n";
    out += &errors(spec);
    out
}

/// The tier, and the operations above it.
fn tier_of(spec: &ToolSpec) -> String {
    match &spec.op_tier {
        Some(raised) => format!("{} ({}: {})", spec.tier, raised.ops.says(), raised.tier),
        None => spec.tier.to_string(),
    }
}

/// The gate errors this tool's spec makes possible (those of every tool — `busy`,
/// `policy_denied`, `shutting_down` — are TOOLS.md's opening list).
fn errors(spec: &ToolSpec) -> String {
    let mut kinds = vec!["`invalid_args`".to_string()];
    if spec.tier > Tier::Read {
        kinds.push(format!("`surface_denied` (below {})", spec.tier));
    }
    if let Some(raised) = &spec.op_tier {
        kinds.push(format!(
            "`surface_denied` ({} below {})",
            raised.ops.says(),
            raised.tier
        ));
    }
    match &spec.approval {
        Approval::Never => {}
        Approval::Always => kinds.push("`approval_denied`".into()),
        Approval::When(rule) => kinds.push(format!("`approval_denied` ({})", rule.says())),
    }
    match &spec.attachment {
        Attachment::Attached => {}
        Attachment::NotBuilt(why) => kinds.push(format!("`not_available` ({why})")),
        Attachment::Detached(why) => {
            kinds.push(format!("`not_available` until configured ({why})"))
        }
    }
    format!("**Gate errors**: {}.\n", kinds.join(", "))
}

/// The arguments table: one row per property, nested objects' properties as `a.b` and those
/// of an array's objects as `a[].b`; the type cell says whether it is required, its limits
/// and its default.
fn arguments(schema: &Json) -> String {
    let mut rows = Vec::new();
    argument_rows(schema, "", &mut rows);
    if rows.is_empty() {
        return "**Arguments**: none.\n".into();
    }
    let mut out = String::from("| argument | type | description |\n|---|---|---|\n");
    for row in rows {
        out += &row;
    }
    out
}

fn argument_rows(schema: &Json, prefix: &str, rows: &mut Vec<String>) {
    let required = names(&schema["required"]);
    for (name, prop) in ordered(schema) {
        let path = format!("{prefix}{name}");
        let mut ty = arg_type(prop);
        if required.contains(&name) {
            ty += ", required";
        }
        let limits = limits(prop);
        if !limits.is_empty() {
            ty += &format!(": {limits}");
        }
        if let Some(default) = prop.get("default").filter(|d| !d.is_null()) {
            ty += &format!("; default `{default}`");
        }
        rows.push(format!(
            "| `{path}` | {} | {} |\n",
            cell(&ty),
            cell(prop["description"].as_str().unwrap_or_default()),
        ));
        if prop.get("properties").is_some() {
            argument_rows(prop, &format!("{path}."), rows);
        } else if prop["items"].get("properties").is_some() {
            argument_rows(&prop["items"], &format!("{path}[]."), rows);
        }
    }
}

/// An argument's JSON type: `integer`, `string or integer`, `array of string`, `map of
/// string`.
fn arg_type(prop: &Json) -> String {
    if prop.get("type").is_none() && prop.get("properties").is_some() {
        return "object".into();
    }
    let types: Vec<&str> = match &prop["type"] {
        Json::String(t) => vec![t.as_str()],
        Json::Array(ts) => ts.iter().filter_map(Json::as_str).collect(),
        _ => vec!["any"],
    };
    types
        .iter()
        .map(|t| match *t {
            "array" => format!("array of {}", arg_type(&prop["items"])),
            "object" => match prop.get("additionalProperties").filter(|v| v.is_object()) {
                Some(values) if prop.get("properties").is_none() => {
                    format!("map of {}", arg_type(values))
                }
                _ => "object".into(),
            },
            other => other.to_string(),
        })
        .collect::<Vec<_>>()
        .join(" or ")
}

/// Bounds, enum values and word counts, as the validator enforces them.
fn limits(prop: &Json) -> String {
    let mut out = Vec::new();
    if let Some(values) = prop["enum"].as_array() {
        let values: Vec<String> = values.iter().map(shown).collect();
        out.push(values.join(", "));
    }
    // A bound as wide as the type's is no limit a reader needs.
    let min = prop["minimum"].as_i64().filter(|m| *m > i64::MIN);
    let max = prop["maximum"].as_i64().filter(|m| *m < i64::MAX);
    match (min, max) {
        (Some(lo), Some(hi)) => out.push(format!("{lo} ..= {hi}")),
        (Some(lo), None) => out.push(format!("≥ {lo}")),
        (None, Some(hi)) => out.push(format!("≤ {hi}")),
        (None, None) => {}
    }
    match (prop["minWords"].as_u64(), prop["maxWords"].as_u64()) {
        (Some(lo), Some(hi)) => out.push(format!("{lo} ..= {hi} words")),
        (Some(lo), None) => out.push(format!("≥ {lo} words")),
        (None, Some(hi)) => out.push(format!("≤ {hi} words")),
        (None, None) => {}
    }
    out.join("; ")
}

/// The results of `tool`: the fields of an object by name, or one line per alternative with
/// its fields; a `?` after a field (TOOLS.md's opening says so) marks one that may be null or
/// left out.
fn results(tool: &str, schema: &Json) -> String {
    let root = schema;
    let intro = schema["description"].as_str().unwrap_or("The result.");
    // "The result of `bash`: the command's output" under `bash`'s heading says no more
    // than "the command's output".
    let intro = match intro.strip_prefix(&format!("The result of `{tool}`")) {
        Some(".") => "",
        Some(rest) => rest.strip_prefix(": ").unwrap_or(intro),
        None => intro,
    };
    let alternatives = schema
        .get("anyOf")
        .or_else(|| schema.get("oneOf"))
        .and_then(Json::as_array);
    let head = match cell(intro) {
        intro if intro.is_empty() => "**Result**:".to_string(),
        intro => format!("**Result**: {intro}"),
    };
    // The fields by name (`?`: may be null or left out); what each means is in the output schema
    // (`toolvisor tools --json`) and its type in `protocol/src/results/`.
    let Some(alternatives) = alternatives else {
        return format!("{head} Fields: {}.\n", field_names(resolve(schema, root)));
    };
    let mut out = format!("{head} One of:\n\n");
    for alt in alternatives {
        let target = resolve(alt, root);
        let name = alt["$ref"]
            .as_str()
            .and_then(|r| r.rsplit('/').next())
            .unwrap_or("");
        let says = alt["description"]
            .as_str()
            .or_else(|| target["description"].as_str())
            .unwrap_or_default();
        let label = if name.is_empty() {
            String::new()
        } else {
            format!("`{name}`: ")
        };
        out += &format!("- {label}{} Fields: {}.\n", cell(says), field_names(target));
    }
    out
}

/// A result object's fields by name, in order, `?` after one that may be null or left out.
fn field_names(target: &Json) -> String {
    let required = names(&target["required"]);
    let fields: Vec<String> = ordered(target)
        .into_iter()
        .map(|(f, _)| {
            let optional = !required.contains(&f);
            format!("`{f}`{}", if optional { "?" } else { "" })
        })
        .collect();
    fields.join(", ")
}

/// `schema`, or what its `$ref` (into the root's `$defs`) points at.
fn resolve<'a>(schema: &'a Json, root: &'a Json) -> &'a Json {
    match schema["$ref"].as_str().and_then(|r| r.strip_prefix('#')) {
        Some(pointer) => root.pointer(pointer).unwrap_or(schema),
        None => schema,
    }
}

/// The properties of an object schema: the required ones in their declared order, then the
/// others by name.
fn ordered(schema: &Json) -> Vec<(String, &Json)> {
    let Some(props) = schema["properties"].as_object() else {
        return Vec::new();
    };
    let required = names(&schema["required"]);
    let mut out: Vec<(String, &Json)> = required
        .iter()
        .filter_map(|r| props.get(r).map(|p| (r.clone(), p)))
        .collect();
    out.extend(
        props
            .iter()
            .filter(|(k, _)| !required.contains(k))
            .map(|(k, v)| (k.clone(), v)),
    );
    out
}

fn names(list: &Json) -> Vec<String> {
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(Json::as_str)
        .map(String::from)
        .collect()
}

/// A value as a reader sees it in a table: strings in backticks.
fn shown(v: &Json) -> String {
    match v {
        Json::String(s) => format!("`{s}`"),
        other => format!("`{other}`"),
    }
}

/// Text fit for one table cell: one line, `|` escaped.
fn cell(text: &str) -> String {
    text.replace('\n', " ").replace('|', "\\|")
}

/// `doc` with every generated block rewritten from `specs` (a tool's from its spec, `index`
/// from all of them), and the names of the blocks that changed; an error names a tool without
/// a block, a block of no tool, a block opened twice or never closed.
pub fn regenerate(doc: &str, specs: &[ToolSpec]) -> Result<(String, Vec<String>), String> {
    let mut out = String::with_capacity(doc.len());
    let mut changed = Vec::new();
    let mut seen: Vec<String> = Vec::new();
    let mut lines = doc.split_inclusive('\n');
    while let Some(line) = lines.next() {
        out += line;
        let Some(name) = line
            .trim_end()
            .strip_prefix("<!-- generated: ")
            .and_then(|rest| rest.strip_suffix(" -->"))
        else {
            continue;
        };
        if seen.iter().any(|s| s == name) {
            return Err(format!("two `{}` blocks", opening(name)));
        }
        seen.push(name.to_string());
        let fresh = if name == "index" {
            index(specs)
        } else {
            match specs.iter().find(|s| s.name == name) {
                Some(spec) => block(spec, specs),
                None => return Err(format!("`{}`: there is no tool `{name}`", opening(name))),
            }
        };
        let mut old = String::new();
        let mut closed = false;
        for inner in lines.by_ref() {
            if inner.trim_end() == CLOSING {
                out += &fresh;
                out += inner;
                closed = true;
                break;
            }
            old += inner;
        }
        if !closed {
            return Err(format!(
                "`{}` is never closed by `{CLOSING}`",
                opening(name)
            ));
        }
        if old != fresh {
            changed.push(name.to_string());
        }
    }
    let missing: Vec<&str> = specs
        .iter()
        .map(|s| s.name)
        .filter(|n| !seen.iter().any(|s| s == n))
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "tools without a generated reference block: {}; add the two lines `{}` and `{CLOSING}` to each one's section and run `{BLESS}`",
            missing.join(", "),
            opening("<tool>"),
        ));
    }
    Ok((out, changed))
}

#[cfg(test)]
mod tests {
    use super::regenerate;

    fn doc_of(names: &[&str]) -> String {
        names
            .iter()
            .map(|n| format!("## {n}\n\n<!-- generated: {n} -->\nstale\n<!-- end generated -->\n"))
            .collect()
    }

    #[test]
    fn blocks_are_rewritten_and_a_second_pass_changes_nothing() {
        let specs = crate::tools::all(true);
        let names: Vec<&str> = specs.iter().map(|s| s.name).collect();
        let doc = format!("# Tools\n\n{}", doc_of(&names));
        let (fresh, changed) = regenerate(&doc, &specs).unwrap();
        assert_eq!(changed.len(), specs.len());
        assert!(
            fresh.contains("**approval** unless `dry_run` is true"),
            "{fresh}"
        );
        assert!(
            fresh.contains("| `timeout_s` | integer: 1 ..= 3600 |"),
            "{fresh}"
        );
        let (again, changed) = regenerate(&fresh, &specs).unwrap();
        assert_eq!(again, fresh);
        assert!(changed.is_empty(), "{changed:?}");
    }

    #[test]
    fn a_tool_without_a_block_a_block_of_no_tool_and_an_open_block_are_errors() {
        let specs = crate::tools::all(true);
        let names: Vec<&str> = specs.iter().map(|s| s.name).collect();
        let missing = regenerate(&doc_of(&names[1..]), &specs).unwrap_err();
        assert!(
            missing.contains(names[0]) && missing.contains("TOOLVISOR_BLESS=1"),
            "{missing}"
        );
        let mut extra = names.clone();
        extra.push("no_such_tool");
        let unknown = regenerate(&doc_of(&extra), &specs).unwrap_err();
        assert!(unknown.contains("no tool `no_such_tool`"), "{unknown}");
        let open = format!("{}<!-- generated: bash -->\n", doc_of(&names[1..]));
        let open = regenerate(&open, &specs).unwrap_err();
        assert!(open.contains("never closed"), "{open}");
    }
}
