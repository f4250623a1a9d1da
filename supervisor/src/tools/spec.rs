//! The vocabulary of tools: [`ToolSpec`], one value per tool — name, tier, parallel safety,
//! approval rule, attachment, hints, the schemas derived from the handler's argument and result
//! types, and the handler itself behind one parse of the arguments. Each family declares its tools
//! next to their handlers (`tools/<family>.rs`, `declare()`); [`crate::tools::all`] assembles them
//! and [`crate::registry`] holds the rules of visibility.
//!
//! A tool is declared once, next to its handler, and its schemas are never written by hand: the
//! handler is typed over its arguments and its result (`ToolSpec::new(name, tier, resource,
//! description, |s, ctx, a| Box::pin(handler(s, ctx, a)))`). The argument type `A` is both the type
//! the schema is derived from (`schema_of`) and the type the one parse of a call's arguments feeds;
//! the result type `R` (in `protocol::results`, `Serialize + JsonSchema`) is both the output schema
//! clients see and what the result leaves as (`serde_json::to_value`, once, in the erased handler),
//! so neither can drift; its `Render` impl is the text a model reads of it (`ToolSpec.render`,
//! which the binary hands `toolvisor mcp`). Approval and per-op tier rules are typed over the
//! arguments' op enum (`Approval::ops(&[LspOp::Trust])`, read from the one parse), never strings;
//! `.summary` gives an approval prompt that says more than the arguments.
//!
//! To add a tool: its argument struct in `protocol::tools` (derive `JsonSchema`,
//! `#[serde(deny_unknown_fields)]`, a `///` doc per field, `#[schemars(range(...))]` for bounds);
//! its result type in `protocol::results` (derive `Serialize`, `Deserialize`, `JsonSchema`) and its
//! rendering for a model (`impl Render`, in `protocol::render`: the bound says so); its handler
//! (`async fn x(cx, ctx, a: XArgs) -> Result<XResult, ToolError>`) and its `ToolSpec::new` in its
//! family's `declare()` (builders: `.approval`, `.serial`, `.op_tier`, `.attachment`, `.summary`,
//! `.follows`, `.long_running`, `.passage`, the hints); an example call in `docs/TOOLS.md`, and
//! there its reference, generated from this spec (`tools::reference`: add the marker lines, then
//! run its `BLESS` command). Nothing else parses or lists it. Which calls start a job a client
//! follows, and how (its poll and stop tools), and which may run long, is spec data carried to
//! clients in `ToolInfo` (`toolvisor mcp` makes MCP tasks of them from it); how results pass the
//! result store is spec data too (`Passage`).

use std::any::{Any, TypeId};
use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value as Json};
use toolvisor_protocol::error::{ErrorKind, ToolError};
use toolvisor_protocol::render::{Render, RenderFn, render_as};
use toolvisor_protocol::value::Value;
use toolvisor_protocol::wire::{JobFollow, Tier, ToolInfo};

use super::{CallCtx, Services};

/// What a handler answers: its result type `R`, or the JSON it leaves as.
pub type ToolResult<R = Json> = Result<R, ToolError>;
/// A handler's future.
pub type BoxFut<'a, R = Json> = Pin<Box<dyn Future<Output = ToolResult<R>> + Send + 'a>>;
/// A handler typed over its arguments and its result: `|s, ctx, a| Box::pin(read(s, ctx, a))`.
pub type Handler<A, R> = for<'a> fn(&'a Services, &'a CallCtx, A) -> BoxFut<'a, R>;

/// A call's arguments parsed into its handler's type, erased until the handler takes them.
type Args = Box<dyn Any + Send + Sync>;

type Erased = Arc<dyn for<'a> Fn(&'a Services, &'a CallCtx, Args) -> BoxFut<'a> + Send + Sync>;

fn erase<F>(f: F) -> Erased
where
    F: for<'a> Fn(&'a Services, &'a CallCtx, Args) -> BoxFut<'a> + Send + Sync + 'static,
{
    Arc::new(f)
}

/// The one parse of a call's arguments into the handler's type, erased.
type ParseFn = dyn Fn(&Json) -> Result<Args, serde_json::Error> + Send + Sync;

#[derive(Clone)]
struct Parse(Arc<ParseFn>);

impl Debug for Parse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<parse>")
    }
}

/// The type-erased handler of a [`ToolSpec`].
#[derive(Clone)]
struct Run(Erased);

impl Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<handler>")
    }
}

type SummarizeFn = dyn Fn(&Services, &CallCtx, &dyn Any) -> Option<String> + Send + Sync;

#[derive(Clone)]
struct Summarize(Arc<SummarizeFn>);

impl Debug for Summarize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<summary>")
    }
}

/// The one parse of a call's arguments into its handler's type (the schema already passed).
pub fn parse_args<T: DeserializeOwned>(tool: &str, args: Json) -> Result<T, ToolError> {
    serde_json::from_value(args).map_err(|e| unparsed(tool, e))
}

fn unparsed(tool: &str, e: serde_json::Error) -> ToolError {
    ToolError::new(
        ErrorKind::InvalidArgs,
        format!("{tool}: {e}"),
        format!("`toolvisor tools --json` shows the schema of `{tool}`"),
    )
}

/// Whether the resource behind a tool is attached to this daemon.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Attachment {
    Attached,
    /// Registered, but its worker is not part of this build yet.
    NotBuilt(&'static str),
    /// Built, but its resource is not attached to this daemon (e.g. vibe mode is off: no
    /// worker command is configured); the reason says what would attach it.
    Detached(String),
}

/// A tool's operation enum and how its arguments name one: `LspOp` of `LspArgs`. Rules over
/// operations (`Approval::ops`, `ToolSpec::op_tier`) are read from the parsed arguments.
pub trait OpOf: PartialEq + Copy + Debug + Serialize + Send + Sync + 'static {
    type Args: 'static;
    fn of(args: &Self::Args) -> Self;
}

impl OpOf for toolvisor_protocol::tools::LspOp {
    type Args = toolvisor_protocol::tools::LspArgs;
    fn of(args: &Self::Args) -> Self {
        args.op
    }
}

impl OpOf for toolvisor_protocol::tools::ProcessOp {
    type Args = toolvisor_protocol::tools::ProcessArgs;
    fn of(args: &Self::Args) -> Self {
        args.op
    }
}

impl OpOf for toolvisor_protocol::tools::DebugOp {
    type Args = toolvisor_protocol::tools::DebugArgs;
    fn of(args: &Self::Args) -> Self {
        args.op
    }
}

/// A predicate over one tool's parsed arguments, erased; `true` for arguments of another
/// type (a rule never exempts what it cannot read). It says what it holds for in words
/// (``ops `trust` ``), which the tools' reference in `docs/TOOLS.md` shows.
#[derive(Clone)]
pub struct Rule {
    args: TypeId,
    args_type: &'static str,
    test: Arc<TestFn>,
    says: String,
}

type TestFn = dyn Fn(&dyn Any) -> bool + Send + Sync;

impl Rule {
    fn new<A: 'static>(says: String, test: impl Fn(&A) -> bool + Send + Sync + 'static) -> Rule {
        Rule {
            args: TypeId::of::<A>(),
            args_type: std::any::type_name::<A>(),
            test: Arc::new(move |a: &dyn Any| a.downcast_ref::<A>().is_none_or(&test)),
            says,
        }
    }

    fn ops<T: OpOf>(ops: &'static [T]) -> Rule {
        let names: Vec<String> = ops
            .iter()
            .map(|op| match serde_json::to_value(op) {
                Ok(Json::String(name)) => format!("`{name}`"),
                _ => format!("`{op:?}`"),
            })
            .collect();
        let plural = if names.len() == 1 { "op" } else { "ops" };
        Rule::new(
            format!("{plural} {}", names.join(", ")),
            move |a: &T::Args| ops.contains(&T::of(a)),
        )
    }

    /// What the rule holds for, in words: ``ops `start`, `write` ``, ``unless `dry_run` is true``.
    pub fn says(&self) -> &str {
        &self.says
    }

    fn holds(&self, args: &dyn Any) -> bool {
        (self.test)(args)
    }
}

impl Debug for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Rule<{}>", self.args_type)
    }
}

/// When a call needs the client's approval.
#[derive(Clone, Debug)]
pub enum Approval {
    Never,
    Always,
    /// The calls the rule holds for (`Approval::ops`, `Approval::unless`).
    When(Rule),
}

impl Approval {
    /// Only calls whose `op` is one of these (state-changing operations).
    pub fn ops<T: OpOf>(ops: &'static [T]) -> Approval {
        Approval::When(Rule::ops(ops))
    }

    /// Every call but those `exempt` holds for (a preview that writes nothing:
    /// `lsp_rename {dry_run: true}`), which `exempt_says` says in words (`` `dry_run` is true``).
    pub fn unless<A: 'static>(exempt: fn(&A) -> bool, exempt_says: &str) -> Approval {
        Approval::When(Rule::new(format!("unless {exempt_says}"), move |a: &A| {
            !exempt(a)
        }))
    }

    /// The rule in words: `never`, `always`, or what its rule says.
    pub fn says(&self) -> &str {
        match self {
            Approval::Never => "never",
            Approval::Always => "always",
            Approval::When(rule) => rule.says(),
        }
    }
}

/// A tier above the tool's for some of its operations.
#[derive(Clone, Debug)]
pub struct OpTier {
    pub ops: Rule,
    pub tier: Tier,
}

/// A call's arguments, parsed once into its handler's type, and what the gates decide from
/// them: its tier and whether it needs approval.
pub struct Parsed {
    args: Args,
    /// The tier of this call (above the tool's for some operations: `lsp trust`).
    pub tier: Tier,
    pub needs_approval: bool,
}

/// The JSON a handler's result leaves as: `serde_json::to_value` of it, once, here.
fn to_json<R: Serialize>(tool: &str, result: R) -> ToolResult {
    serde_json::to_value(&result).map_err(|e| {
        ToolError::new(
            ErrorKind::Internal,
            format!("{tool}: cannot encode the result: {e}"),
            "report this as a bug",
        )
    })
}

/// Parses `result` into the result type `R`, which must hold all of it: written out again it
/// is `result` (the tests check documented and recorded answers with it; a shape that parses
/// as another, looser one of the type, dropping fields, is not its own).
fn decode<R: DeserializeOwned + Serialize>(result: &Json) -> Result<(), String> {
    let typed = serde_json::from_value::<R>(result.clone()).map_err(|e| e.to_string())?;
    let back = serde_json::to_value(&typed).map_err(|e| e.to_string())?;
    match first_difference(result, &back, String::new()) {
        None => Ok(()),
        Some(at) => Err(format!("it parses, but not whole: {at}")),
    }
}

/// Where `back` (a result written out again) first differs from `sent`.
fn first_difference(sent: &Json, back: &Json, at: String) -> Option<String> {
    match (sent, back) {
        (Json::Object(a), Json::Object(b)) => a
            .iter()
            .find_map(|(k, v)| match b.get(k) {
                None if !v.is_null() => Some(format!("`{at}/{k}` is dropped")),
                None => None,
                Some(w) => first_difference(v, w, format!("{at}/{k}")),
            })
            .or_else(|| {
                b.keys()
                    .find(|k| !a.contains_key(*k) && !b[*k].is_null())
                    .map(|k| format!("`{at}/{k}` is added"))
            }),
        (Json::Array(a), Json::Array(b)) if a.len() == b.len() => a
            .iter()
            .zip(b)
            .enumerate()
            .find_map(|(i, (v, w))| first_difference(v, w, format!("{at}/{i}"))),
        (Json::Number(a), Json::Number(b)) if a.as_f64() == b.as_f64() => None,
        (a, b) if a == b => None,
        (a, b) => Some(format!("`{at}` reads {b} for {a}")),
    }
}

/// One tool, as one value: its name, tier, parallel safety, approval rule, attachment, the
/// schemas of its arguments and results and the handler typed over them. Built with
/// [`ToolSpec::new`], which derives both schemas and the one parse of the arguments from the
/// handler's types.
#[derive(Clone, Debug)]
pub struct ToolSpec {
    pub name: &'static str,
    pub description: &'static str,
    pub tier: Tier,
    pub parallel_safe: bool,
    pub approval: Approval,
    /// Operations that need a higher tier than the tool's (`lsp trust`).
    pub op_tier: Option<OpTier>,
    pub resource: &'static str,
    /// The JSON schema of the arguments, derived from `args_type`.
    pub schema: Json,
    /// The Rust type the handler parses the arguments into.
    pub args_type: &'static str,
    /// The one parse of a call's arguments into the handler's type (`prepare`).
    parse: Parse,
    args_id: TypeId,
    pub attachment: Attachment,
    /// May change or remove what exists (a file's content, a process, a document); false:
    /// only adds (a staged edit, a new download). Meaningful above the read tier.
    pub destructive: bool,
    /// Calling it again with the same arguments changes nothing more.
    pub idempotent: bool,
    /// Reaches outside the machine's known state: the network, or code that can do anything.
    pub open_world: bool,
    /// The handler, behind the one parse of the arguments into its type.
    handler: Run,
    /// The line an approval request shows, where the tool says more than its arguments.
    summary: Option<Summarize>,
    /// The JSON schema of the handler's results, derived from its result type (a type in
    /// `protocol::results`).
    pub output: Json,
    /// Parses a result into the handler's result type: serde decides whether an answer is
    /// one (the docs test reads TOOLS.md's answers with it).
    pub decode: fn(&Json) -> Result<(), String>,
    /// The model's text of a result: its result type's rendering (`toolvisor_protocol::render`),
    /// which the binary hands `toolvisor mcp` (`Options::renderer`).
    pub render: RenderFn,
    /// A call starts a job a client may follow (`.follows`): `download_model`, `load_model`,
    /// `vibe_spawn`.
    pub follow: Option<JobFollow>,
    /// A call may run for minutes (`.long_running`): `eval`, `bash`.
    pub long_running: bool,
    /// How its results pass the result store (`tools::files::finish`).
    pub passage: Passage,
}

/// How a tool's results pass the result store on their way out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Passage {
    /// Secrets masked; a large result stored and projected with refs (every tool but these).
    #[default]
    Stored,
    /// Whole, as the handler made it: results already bounded and masked
    /// (`tool_result_read`'s pages of a stored result).
    Whole,
    /// This field whole (bounded by its own limit: `eval`'s `images`), the rest stored.
    FieldWhole(&'static str),
}

impl ToolSpec {
    /// A tool whose handler takes its arguments as `A` and answers `R`: the schema is `A`'s,
    /// the one parse of a call's arguments (after the schema validated them) feeds the
    /// handler, the output schema is `R`'s and its result leaves as `R`'s JSON. Parallel
    /// safe, no approval, attached, until the builder methods say otherwise.
    ///
    /// Transitional: a handler that answers `serde_json::Value` (built by hand) declares its
    /// result type with [`ToolSpec::returns`] instead.
    pub fn new<A, R>(
        name: &'static str,
        tier: Tier,
        resource: &'static str,
        description: &'static str,
        handler: Handler<A, R>,
    ) -> Self
    where
        A: JsonSchema + DeserializeOwned + Send + Sync + 'static,
        R: JsonSchema + Serialize + DeserializeOwned + Render + Send + 'static,
    {
        assert!(
            TypeId::of::<R>() != TypeId::of::<Json>(),
            "`{name}`: a handler answers its result type (in protocol::results), not JSON"
        );
        ToolSpec {
            name,
            description,
            tier,
            parallel_safe: true,
            approval: Approval::Never,
            op_tier: None,
            resource,
            schema: schema_of::<A>(),
            args_type: std::any::type_name::<A>(),
            parse: Parse(Arc::new(|args| {
                A::deserialize(args).map(|a| Box::new(a) as Args)
            })),
            args_id: TypeId::of::<A>(),
            attachment: Attachment::Attached,
            // Until the builder says otherwise: a read changes nothing (so again is the same);
            // a write or exec may change or remove, and again may do more.
            destructive: tier != Tier::Read,
            idempotent: tier == Tier::Read,
            open_world: false,
            handler: Run(erase(move |services, ctx, args| {
                match args.downcast::<A>() {
                    Ok(a) => {
                        let answer = handler(services, ctx, *a);
                        Box::pin(async move { to_json(name, answer.await?) })
                    }
                    Err(_) => Box::pin(std::future::ready(Err(ToolError::new(
                        ErrorKind::Internal,
                        format!("{name}: arguments parsed into another type than its handler's"),
                        "report this as a bug",
                    )))),
                }
            })),
            summary: None,
            output: toolvisor_protocol::results::schema_of::<R>(),
            decode: decode::<R>,
            render: render_as::<R>,
            follow: None,
            long_running: false,
            passage: Passage::Stored,
        }
    }

    /// How its results pass the result store: `Passage::Whole` for results already bounded
    /// and masked, `Passage::FieldWhole` for one field bounded by its own limit.
    pub fn passage(mut self, passage: Passage) -> Self {
        self.passage = passage;
        self
    }

    /// A call starts a job that goes on after its answer, followed as `follow` says (its
    /// poll and stop tools, the states that end it): clients make a task of it.
    pub fn follows(mut self, follow: JobFollow) -> Self {
        self.follow = Some(follow);
        self
    }

    /// A call may run for minutes: clients that can may answer it as a task.
    pub fn long_running(mut self) -> Self {
        self.long_running = true;
        self
    }

    /// The approval prompt's line, from the same argument type the handler takes (checked:
    /// a summary of another type is a bug the declaration's own test finds at once).
    pub fn summary<A: 'static>(mut self, summarize: fn(&Services, &CallCtx, &A) -> String) -> Self {
        self.check_args(TypeId::of::<A>(), std::any::type_name::<A>(), "summary");
        self.summary = Some(Summarize(Arc::new(move |services, ctx, args| {
            args.downcast_ref::<A>()
                .map(|a| summarize(services, ctx, a))
        })));
        self
    }

    /// The one parse of a call's arguments (`args`, which passed the schema) into the
    /// handler's type, and the call's tier and approval decided from it.
    pub fn prepare(&self, args: &Json) -> Result<Parsed, ToolError> {
        let args = (self.parse.0)(args).map_err(|e| unparsed(self.name, e))?;
        let tier = match &self.op_tier {
            Some(raised) if raised.ops.holds(args.as_ref()) => raised.tier,
            _ => self.tier,
        };
        let needs_approval = match &self.approval {
            Approval::Never => false,
            Approval::Always => true,
            Approval::When(rule) => rule.holds(args.as_ref()),
        };
        Ok(Parsed {
            args,
            tier,
            needs_approval,
        })
    }

    /// Run the call (its arguments passed the gates).
    pub fn run<'a>(&self, services: &'a Services, ctx: &'a CallCtx, call: Parsed) -> BoxFut<'a> {
        (self.handler.0)(services, ctx, call.args)
    }

    /// The line an approval request shows: the tool's own summary where it has one, else
    /// the tool and its arguments (`json`, as the call sent them); at most 300 characters.
    pub fn approval_summary(
        &self,
        services: &Services,
        ctx: &CallCtx,
        call: &Parsed,
        json: &Json,
    ) -> String {
        let text = self
            .summary
            .as_ref()
            .and_then(|s| (s.0)(services, ctx, call.args.as_ref()))
            .unwrap_or_else(|| format!("{} {json}", self.name));
        text.chars().take(300).collect()
    }

    /// Only adds: a staged edit, a new file, a revision (MCP `destructiveHint: false`).
    pub fn additive(mut self) -> Self {
        self.destructive = false;
        self
    }

    /// The same call again changes nothing more (MCP `idempotentHint`).
    pub fn idempotent(mut self, idempotent: bool) -> Self {
        self.idempotent = idempotent;
        self
    }

    /// Reaches the network, or runs code that can (MCP `openWorldHint`).
    pub fn open_world(mut self) -> Self {
        self.open_world = true;
        self
    }

    pub fn approval(mut self, approval: Approval) -> Self {
        if let Approval::When(rule) = &approval {
            self.check_args(rule.args, rule.args_type, "approval rule");
        }
        self.approval = approval;
        self
    }

    /// A rule or summary reads the handler's own argument type (another is a bug its
    /// declaration's test finds at once).
    fn check_args(&self, id: TypeId, name: &str, what: &str) {
        assert!(
            id == self.args_id,
            "the {what} of `{}` reads {name}, its handler takes {}",
            self.name,
            self.args_type
        );
    }

    /// Calls run one at a time per conversation, in order (a lane).
    pub fn serial(mut self) -> Self {
        self.parallel_safe = false;
        self
    }

    pub fn op_tier<T: OpOf>(mut self, ops: &'static [T], tier: Tier) -> Self {
        let ops = Rule::ops(ops);
        self.check_args(ops.args, ops.args_type, "tier rule");
        self.op_tier = Some(OpTier { ops, tier });
        self
    }

    pub fn attachment(mut self, attachment: Attachment) -> Self {
        self.attachment = attachment;
        self
    }

    /// The typed parse the handler does (after validation), without its result.
    pub fn parses(&self, args: &Json) -> Result<(), String> {
        (self.parse.0)(args).map(drop).map_err(|e| e.to_string())
    }

    /// The tier of this call, from its parsed arguments (tests and the handlers' fuzz:
    /// `prepare` decides it for a call).
    pub fn call_tier(&self, args: &Json) -> Tier {
        self.prepare(args).map_or(self.tier, |p| p.tier)
    }

    /// Does this call need approval (tests: `prepare` decides it for a call; arguments that
    /// do not parse need it).
    pub fn needs_approval(&self, args: &Json) -> bool {
        self.prepare(args).map_or(true, |p| p.needs_approval)
    }

    pub(crate) fn info(&self, available: bool, reason: Option<String>) -> ToolInfo {
        ToolInfo {
            schema: Value(self.schema.clone()),
            output_schema: Some(Value(toolvisor_protocol::results::outward(&self.output))),
            ..self.brief(available, reason)
        }
    }

    /// What the Welcome lists: the tool without its schemas (`schema` null), which are most
    /// of a tool list's bytes and which only a client that builds calls from them asks for.
    pub(crate) fn brief(&self, available: bool, reason: Option<String>) -> ToolInfo {
        ToolInfo {
            name: self.name.to_string(),
            description: self.description.to_string(),
            tier: self.tier,
            parallel_safe: self.parallel_safe,
            requires_approval: !matches!(self.approval, Approval::Never),
            resource: self.resource.to_string(),
            schema: Value(Json::Null),
            available,
            unavailable_reason: reason,
            destructive: self.destructive,
            idempotent: self.idempotent,
            open_world: self.open_world,
            output_schema: None,
            follow: self.follow.clone(),
            long_running: self.long_running,
        }
    }
}

/// A [`JobFollow`]: the start result's field naming the job, the poll and stop calls (`"{id}"`
/// in their arguments is the job), the poll answer's list holding the job's entry, the states
/// that end it and the one that means it succeeded.
pub fn follow(
    id: &str,
    poll: (&str, Json),
    stop: (&str, Json),
    entries: Option<&str>,
    ended: &[&str],
    ok: &str,
) -> JobFollow {
    JobFollow {
        id: id.to_string(),
        poll: poll.0.to_string(),
        poll_args: Value(poll.1),
        stop: stop.0.to_string(),
        stop_args: Value(stop.1),
        entries: entries.map(str::to_string),
        ended: ended.iter().map(|s| s.to_string()).collect(),
        ok: ok.to_string(),
    }
}

/// The JSON schema clients see for arguments of type `A`: derived by schemars (field docs
/// as descriptions, ranges, enums, `required`, `additionalProperties: false` from
/// `deny_unknown_fields`), then made small and self-contained for the validator: every
/// subschema inlined (no `$ref`/`$defs`), an optional field's schema is its value's (`null`
/// means absent), an enum of unit variants is a plain string `enum`, and no `$schema`,
/// `title`, `format` or root description.
pub fn schema_of<A: JsonSchema>() -> Json {
    let mut settings = SchemaSettings::draft2020_12();
    settings.inline_subschemas = true;
    settings.meta_schema = None;
    let mut schema = settings
        .into_generator()
        .into_root_schema_for::<A>()
        .to_value();
    tidy(&mut schema);
    if let Some(root) = schema.as_object_mut() {
        root.remove("description");
        // A struct without (required) fields still says so, as clients expect.
        root.entry("properties")
            .or_insert_with(|| Json::Object(Map::new()));
        root.entry("required")
            .or_insert_with(|| Json::Array(vec![]));
    }
    schema
}

/// The post-processing of [`schema_of`], bottom-up along the subschemas (never into a
/// `properties` map's keys, which are field names).
fn tidy(schema: &mut Json) {
    toolvisor_protocol::results::tidy_with(schema, &args_only);
}

/// What only the arguments' schemas get, on each node after the common cleanup.
fn args_only(map: &mut Map<String, Json>) {
    // `["integer", "null"]` → `"integer"`: the validator treats null as absent.
    if let Some(Json::Array(types)) = map.get("type") {
        let kept: Vec<Json> = types.iter().filter(|t| *t != "null").cloned().collect();
        if kept.len() == 1 {
            map.insert("type".into(), kept[0].clone());
        }
    }
    if let Some(Json::Array(values)) = map.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
    // `anyOf`/`oneOf` of an inlined schema and `null` (an optional enum), or of
    // `const`s and `enum`s (an enum some of whose variants have docs): one string
    // enum.
    for key in ["anyOf", "oneOf"] {
        let Some(Json::Array(alternatives)) = map.get(key) else {
            continue;
        };
        let real: Vec<&Json> = alternatives
            .iter()
            .filter(|a| a.get("type") != Some(&Json::from("null")))
            .collect();
        // Each alternative a `const` or an `enum` (variants with docs and without).
        let consts: Option<Vec<Json>> = real
            .iter()
            .map(|a| match (a.get("const"), a.get("enum")) {
                (Some(one), _) => Some(vec![one.clone()]),
                (None, Some(Json::Array(many))) => Some(many.clone()),
                _ => None,
            })
            .collect::<Option<Vec<_>>>()
            .map(|lists| lists.concat());
        let merged = match (consts, real.as_slice()) {
            (Some(values), _) if values.iter().all(Json::is_string) => {
                let mut m = Map::new();
                m.insert("type".into(), "string".into());
                m.insert("enum".into(), Json::Array(values));
                m
            }
            (_, [one]) => one.as_object().cloned().unwrap_or_default(),
            _ => continue,
        };
        map.remove(key);
        for (k, v) in merged {
            // The field's own description wins over its type's.
            map.entry(k).or_insert(v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use toolvisor_protocol::results::{DebugResult, ReadResult};

    #[test]
    fn a_result_is_its_type_only_when_the_type_holds_all_of_it() {
        let output = json!({"session": "c#1", "text": "hi\n", "offset": 0, "next_offset": 3,
            "dropped": 0, "total_bytes": 3, "eof": true, "state": "exited", "console": []});
        // A debug `output` parsed as the looser stop shape (`state`, `text`) loses its slice.
        assert_eq!(decode::<DebugResult>(&output), Ok(()));
        let mut read = json!({"content": "1\tx\n", "eof": true, "kind": "text", "lines": 1,
            "next_offset": null, "offset": 1, "path": "a", "size_bytes": 2, "total_lines": 1});
        assert_eq!(decode::<ReadResult>(&read), Ok(()));
        read["colour"] = json!("blue");
        assert_eq!(
            decode::<ReadResult>(&read),
            Err("it parses, but not whole: `/colour` is dropped".into())
        );
        read["colour"] = Json::Null;
        assert_eq!(decode::<ReadResult>(&read), Ok(()), "a null says nothing");
    }
}
