//! The daemon's plain-text log, made cheap for the line that is never written: the call's
//! fields, its filter and its field formatter.
//!
//! Every call carries six fields (`call`, `session`, `conversation`, `tool`, `resource`, `run`)
//! on every line logged while it runs. As a tracing span at `info`, the default level, they
//! cost about 1 µs per call whether or not a line was logged: the text layer formats them into
//! a string, the registry gives the span a slot, and `EnvFilter` takes a lock shared by every
//! thread on the span's creation, entry, exit and close. Three parts take that away:
//!
//! - **Labels.** In the plain-text log a call runs inside [`in_call`], which keeps its
//!   [`CallLabel`] in a task-local while the call's future is polled (exactly when the span
//!   was entered), and [`TextFormat`] writes the label where `Format<Full>` wrote the span's
//!   name and fields. Nothing is formatted unless a line is logged. It is used only where the
//!   span would print the same ([`use_labels`]): plain text, uncoloured, under a `Targets`
//!   filter. A filter directive that names a span needs the span, and so do the JSON and the
//!   coloured formats; there the call is instrumented as before. `tests` checks that both
//!   print the same lines. One difference remains, which no code here meets: a span made
//!   outside a call and entered inside it printed as a root span, and now follows the label.
//! - **The filter.** [`filter`] gives a `Targets` for a filter of targets and levels only,
//!   which takes no lock per span, and an `EnvFilter` only for a directive that names a span.
//! - **The fields.** [`TextFields`] writes `DefaultFields`' text without its per-field
//!   `core::fmt` machinery (a styled name and `=` through `Display`, even without colours) and
//!   without growing the string a few bytes at a time: a number, a plain string (printable
//!   ASCII without `"` or `\`, which `Debug` writes as it is between quotes) and a field under
//!   a plain name go straight into one reused buffer, copied out once. Everything else — the
//!   message, an error, a raw (`r#`) name, a string `Debug` would escape, any field when the
//!   output is coloured — goes to `DefaultVisitor`, so the text is the same byte for byte
//!   (`tests` compares the two). The spans that remain (ractor's actors, a call's under a span
//!   filter) and every event's fields go through it.

use std::cell::RefCell;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_log::NormalizeEvent;
use tracing_subscriber::field::{RecordFields, VisitOutput};
use tracing_subscriber::filter::{EnvFilter, Targets};
use tracing_subscriber::fmt::format::{DefaultFields, DefaultVisitor, Format, Full, Writer};
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::{Layer, Registry};

/// Whether calls carry a [`CallLabel`] instead of a span (set once, where the log is set up).
static LABELS: AtomicBool = AtomicBool::new(false);

/// Calls carry a [`CallLabel`] from now on, or a span again. The log must format with
/// [`TextFormat`] and [`TextFields`], uncoloured, under a `Targets` filter (module docs).
pub fn use_labels(on: bool) {
    LABELS.store(on, Ordering::Relaxed);
}

/// Whether a call should carry a [`CallLabel`] (see [`use_labels`]).
pub fn labels() -> bool {
    LABELS.load(Ordering::Relaxed)
}

/// What every line logged while a call runs carries: the call span's fields, the same names,
/// values and order (`docs/OPERATIONS.md`, "Logs").
#[derive(Debug, Clone)]
pub struct CallLabel {
    pub call: u64,
    pub session: u64,
    pub conversation: String,
    pub tool: String,
    /// The resource kind behind the tool (`""` for none).
    pub resource: &'static str,
    pub run: String,
}

impl CallLabel {
    /// The label as `TextFields` writes the span's fields:
    /// `call=1 session=2 conversation=c tool=t resource="r" run=x`.
    fn write(&self, w: &mut Writer<'_>) -> fmt::Result {
        let mut digits = itoa::Buffer::new();
        w.write_str("call=")?;
        w.write_str(digits.format(self.call))?;
        w.write_str(" session=")?;
        w.write_str(digits.format(self.session))?;
        w.write_str(" conversation=")?;
        w.write_str(&self.conversation)?;
        w.write_str(" tool=")?;
        w.write_str(&self.tool)?;
        write!(w, " resource={:?} run=", self.resource)?;
        w.write_str(&self.run)
    }
}

tokio::task_local! {
    static CALL: CallLabel;
}

/// `fut`, with `label` on every line logged while it is polled.
pub fn in_call<F: std::future::Future>(
    label: CallLabel,
    fut: F,
) -> impl std::future::Future<Output = F::Output> {
    CALL.scope(label, fut)
}

/// tracing-subscriber's full text format (`Format<Full>`), writing a call's [`CallLabel`] as
/// the outermost span `call{…}:` when the line is logged inside [`in_call`]. Without a label,
/// or coloured, it is `Format<Full>` itself.
#[derive(Debug)]
pub struct TextFormat<T = SystemTime> {
    full: Format<Full, T>,
    timer: T,
}

impl Default for TextFormat {
    fn default() -> Self {
        TextFormat::with_timer(SystemTime)
    }
}

impl<T: FormatTime + Clone> TextFormat<T> {
    pub fn with_timer(timer: T) -> Self {
        TextFormat {
            full: Format::default().with_timer(timer.clone()),
            timer,
        }
    }
}

/// `Format<Full>`'s level column.
fn level_str(level: &Level) -> &'static str {
    match *level {
        Level::TRACE => "TRACE",
        Level::DEBUG => "DEBUG",
        Level::INFO => " INFO",
        Level::WARN => " WARN",
        Level::ERROR => "ERROR",
    }
}

impl<S, N, T> FormatEvent<S, N> for TextFormat<T>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    T: FormatTime,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        // An event with an explicit parent (`parent: None`, `parent: &span`) did not sit
        // under the call's span either: `Format<Full>` prints its own ancestry.
        if writer.has_ansi_escapes() || !event.is_contextual() || CALL.try_with(|_| ()).is_err() {
            return self.full.format_event(ctx, writer, event);
        }
        let normalized = event.normalized_metadata();
        let meta = normalized.as_ref().unwrap_or_else(|| event.metadata());
        if self.timer.format_time(&mut writer).is_err() {
            writer.write_str("<unknown time>")?;
        }
        writer.write_char(' ')?;
        writer.write_str(level_str(meta.level()))?;
        writer.write_str(" call{")?;
        CALL.with(|label| label.write(&mut writer))?;
        writer.write_str("}:")?;
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                writer.write_str(span.metadata().name())?;
                let ext = span.extensions();
                if let Some(fields) = ext.get::<FormattedFields<N>>()
                    && !fields.is_empty()
                {
                    write!(writer, "{{{fields}}}")?;
                }
                writer.write_char(':')?;
            }
        }
        writer.write_char(' ')?;
        writer.write_str(meta.target())?;
        writer.write_str(": ")?;
        ctx.format_fields(writer.by_ref(), event)?;
        writer.write_char('\n')
    }
}

/// The log filter `TOOLVISOR_LOG` asks for (`default` when it is unset or not a filter).
/// Targets and levels only (`info`, `warn,toolvisor_lsp=debug`) give a `Targets`; a directive
/// that names a span or a field (`[call{tool=lsp}]=debug`) needs, and gets, an `EnvFilter`.
/// Both read the same syntax the same way, and an invalid filter falls back to `default` as
/// `EnvFilter` always did. The flag says which: `true` for a `Targets`, which needs no span
/// (so calls may carry labels, [`use_labels`]).
pub fn filter(var: Option<&str>, default: &str) -> (Box<dyn Layer<Registry> + Send + Sync>, bool) {
    let spec = match var {
        Some(spec) if EnvFilter::builder().parse(spec).is_ok() => spec,
        _ => default,
    };
    // `EnvFilter` skips empty directives (`info,`) and reads `target=` as `target=trace`;
    // `Targets` reads an empty level as `error`. Those, and an empty filter (nothing logged),
    // stay with `EnvFilter`.
    let directives: Vec<&str> = spec.split(',').filter(|d| !d.is_empty()).collect();
    if !directives.is_empty()
        && !spec.contains(['[', '{'])
        && !directives.iter().any(|d| d.ends_with('='))
        && let Ok(targets) = directives.join(",").parse::<Targets>()
    {
        return (Box::new(targets), true);
    }
    (Box::new(EnvFilter::new(spec)), false)
}

/// `DefaultFields`' text, written faster (see the module docs).
#[derive(Debug, Default)]
pub struct TextFields;

thread_local! {
    /// The buffer a span's fields are written into before the one copy out (reused, so the
    /// span's string is allocated once at its final size).
    static BUF: RefCell<String> = const { RefCell::new(String::new()) };
}

/// A buffer that grew past this is dropped after use rather than kept per thread.
const BUF_KEEP: usize = 4096;

impl<'w> FormatFields<'w> for TextFields {
    fn format_fields<R: RecordFields>(&self, mut writer: Writer<'w>, fields: R) -> fmt::Result {
        // A writer that does not sanitize escapes can only be made inside tracing-subscriber;
        // should one come, the default formatter knows what to do with it.
        if writer.has_ansi_escapes() || !writer.sanitizes_ansi_escapes() {
            return DefaultFields::new().format_fields(writer, fields);
        }
        BUF.with(|buf| {
            // Re-entered (a field's `Debug` that logs): write straight through.
            let Ok(mut buf) = buf.try_borrow_mut() else {
                return record(writer.by_ref(), &fields);
            };
            buf.clear();
            let result =
                record(Writer::new(&mut *buf), &fields).and_then(|()| writer.write_str(&buf));
            if buf.capacity() > BUF_KEEP {
                *buf = String::new();
            }
            result
        })
    }
}

fn record<R: RecordFields>(writer: Writer<'_>, fields: &R) -> fmt::Result {
    let mut visitor = Fast {
        writer,
        empty: true,
        result: Ok(()),
    };
    fields.record(&mut visitor);
    visitor.result
}

struct Fast<'a> {
    writer: Writer<'a>,
    /// Nothing written yet (the next field needs no separating space).
    empty: bool,
    result: fmt::Result,
}

/// A name written as it is, followed by `=`: not the message (written bare), not a raw
/// identifier (`r#` stripped), not the `log` crate's metadata (skipped).
fn plain(name: &str) -> bool {
    name != "message" && !name.starts_with("r#") && !name.starts_with("log.")
}

/// Whether `Debug` writes `s` unchanged between quotes.
fn verbatim(s: &str) -> bool {
    s.bytes()
        .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
}

impl Fast<'_> {
    /// Writes the separator and `name=`, then `value`.
    /// Nothing more is written once a write failed (as `DefaultVisitor` does).
    fn field(&mut self, name: &str, value: impl FnOnce(&mut Writer<'_>) -> fmt::Result) {
        if self.result.is_err() {
            return;
        }
        let w = &mut self.writer;
        let pad = if self.empty {
            Ok(())
        } else {
            w.write_char(' ')
        };
        self.empty = false;
        self.result = pad
            .and_then(|()| w.write_str(name))
            .and_then(|()| w.write_char('='))
            .and_then(|()| value(w));
    }

    /// `DefaultVisitor` writes this one field.
    fn default(&mut self, name: &str, visit: impl FnOnce(&mut DefaultVisitor<'_>)) {
        if self.result.is_err() || name.starts_with("log.") {
            return; // Skipped by the default visitor too, and no separator.
        }
        let mut visitor = DefaultVisitor::new(self.writer.by_ref(), self.empty);
        visit(&mut visitor);
        self.result = visitor.finish();
        self.empty = false;
    }
}

impl Visit for Fast<'_> {
    fn record_u64(&mut self, field: &Field, value: u64) {
        if !plain(field.name()) {
            return self.default(field.name(), |v| v.record_u64(field, value));
        }
        self.field(field.name(), |w| {
            w.write_str(itoa::Buffer::new().format(value))
        });
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        if !plain(field.name()) {
            return self.default(field.name(), |v| v.record_i64(field, value));
        }
        self.field(field.name(), |w| {
            w.write_str(itoa::Buffer::new().format(value))
        });
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        if !plain(field.name()) {
            return self.default(field.name(), |v| v.record_bool(field, value));
        }
        self.field(field.name(), |w| {
            w.write_str(if value { "true" } else { "false" })
        });
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if !plain(field.name()) || !verbatim(value) {
            return self.default(field.name(), |v| v.record_str(field, value));
        }
        self.field(field.name(), |w| {
            w.write_char('"')?;
            w.write_str(value)?;
            w.write_char('"')
        });
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.default(field.name(), |v| v.record_error(field, value));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if !plain(field.name()) {
            return self.default(field.name(), |v| v.record_debug(field, value));
        }
        self.field(field.name(), |w| write!(w, "{value:?}"));
    }
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::fmt::MakeWriter;

    use super::*;

    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl io::Write for Sink {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Sink {
        type Writer = Sink;
        fn make_writer(&'a self) -> Sink {
            self.clone()
        }
    }

    #[derive(Debug)]
    struct Outer(Inner);
    #[derive(Debug)]
    struct Inner;
    impl fmt::Display for Outer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("outer failed")
        }
    }
    impl fmt::Display for Inner {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("inner cause")
        }
    }
    impl std::error::Error for Inner {}
    impl std::error::Error for Outer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    /// Logs every kind of field, in spans and events, and returns the lines.
    fn lines(fast: bool, ansi: bool) -> String {
        let sink = Sink::default();
        let builder = tracing_subscriber::fmt()
            .with_writer(sink.clone())
            .with_ansi(ansi)
            .without_time()
            .with_max_level(tracing::Level::TRACE);
        let dispatch: tracing::Dispatch = if fast {
            builder.fmt_fields(TextFields).finish().into()
        } else {
            builder.finish().into()
        };
        tracing::dispatcher::with_default(&dispatch, || {
            let conversation = "conv-1".to_string();
            let span = tracing::info_span!(
                "call",
                call = 42u64,
                session = 7u64,
                conversation = %conversation,
                tool = %"lsp",
                resource = "process",
                run = %"run-ab",
                empty = "",
                quoted = "say \"hi\"",
                slash = "a\\b",
                tab = "a\tb",
                unicode = "naïve é",
                control = "bell\x07",
                negative = -12i64,
                min = i64::MIN,
                max = u64::MAX,
                zero = 0u64,
                yes = true,
                no = false,
                float = 1.5f64,
                big = 1u128 << 100,
                debug = ?vec!["a", "b"],
                r#type = "raw",
                r#loop = 3u64,
            );
            let _entered = span.enter();
            tracing::info!("a plain message");
            tracing::warn!(
                count = 3u64,
                path = "/tmp/x y",
                error = &Outer(Inner) as &(dyn std::error::Error + 'static),
                lone = &Inner as &(dyn std::error::Error + 'static),
                "with \"quotes\" and \x1b[31m escapes"
            );
            tracing::error!(message = "only a message field");
            tracing::debug!(a = 1u64, b = "two", c = ?Some(3));
            tracing::info!("");
            let later = tracing::info_span!("later", first = tracing::field::Empty, second = 2u64);
            later.record("first", "recorded \"late\"");
            later.in_scope(|| tracing::info!(last = -1i64, "inside"));
        });
        String::from_utf8(sink.0.lock().unwrap().clone()).unwrap()
    }

    #[test]
    fn the_text_is_default_fields_text_byte_for_byte() {
        for ansi in [false, true] {
            let fast = lines(true, ansi);
            let default = lines(false, ansi);
            assert_eq!(fast, default, "ansi {ansi}");
            assert!(ansi || default.contains("call{call=42 session=7 conversation=conv-1"));
            assert!(default.lines().count() >= 6, "{default}");
        }
    }

    /// Which of `lines` pass `filter(spec)`.
    fn passed(spec: Option<&str>) -> (bool, String) {
        use tracing_subscriber::layer::SubscriberExt;
        let sink = Sink::default();
        let (filter, is_targets) = filter(spec, "info");
        let subscriber = tracing_subscriber::registry().with(filter).with(
            tracing_subscriber::fmt::layer()
                .with_writer(sink.clone())
                .with_ansi(false)
                .without_time()
                .fmt_fields(TextFields),
        );
        tracing::subscriber::with_default(subscriber, || {
            tracing::debug!(target: "toolvisor_lsp::server", "lsp debug");
            tracing::debug!(target: "toolvisor::session", "session debug");
            tracing::info!(target: "toolvisor::session", "session info");
            tracing::warn!(target: "toolvisor_lsp", "lsp warn");
            tracing::info_span!("call", tool = "lsp").in_scope(|| {
                tracing::debug!(target: "toolvisor::tools", "in an lsp call");
            });
            tracing::info_span!("call", tool = "eval").in_scope(|| {
                tracing::debug!(target: "toolvisor::tools", "in an eval call");
            });
        });
        let text = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        let kept = text
            .lines()
            .filter_map(|l| l.rsplit(": ").next())
            .collect::<Vec<_>>()
            .join(",");
        (is_targets, kept)
    }

    #[test]
    fn the_filter_is_targets_unless_a_directive_names_a_span_and_reads_the_same() {
        assert_eq!(passed(None), (true, "session info,lsp warn".into()));
        assert_eq!(passed(Some("warn")), (true, "lsp warn".into()));
        assert_eq!(
            passed(Some("info,toolvisor_lsp=debug")),
            (true, "lsp debug,session info,lsp warn".into())
        );
        // Empty directives are skipped, as EnvFilter does; an empty level means `trace`.
        assert_eq!(passed(Some("warn,")), (true, "lsp warn".into()));
        assert_eq!(
            passed(Some("warn,,toolvisor_lsp=debug")),
            (true, "lsp debug,lsp warn".into())
        );
        assert_eq!(
            passed(Some("warn,toolvisor_lsp=")),
            (false, "lsp debug,lsp warn".into())
        );
        assert_eq!(passed(Some("")), (false, String::new()));
        // Not a filter: the default, as before.
        assert_eq!(
            passed(Some("warn,a=b=c")),
            (true, "session info,lsp warn".into())
        );
        // A span's field in a directive: only EnvFilter can, and does.
        assert_eq!(
            passed(Some("warn,[call{tool=lsp}]=debug")),
            (false, "lsp warn,in an lsp call".into())
        );
    }

    #[derive(Clone)]
    struct Fixed;
    impl FormatTime for Fixed {
        fn format_time(&self, w: &mut Writer<'_>) -> fmt::Result {
            w.write_str("2026-12-04T00:00:00.000000Z")
        }
    }

    /// Lines logged inside and outside a call, the call carried by a label or by its span.
    fn call_lines(labelled: bool) -> String {
        let sink = Sink::default();
        let builder = tracing_subscriber::fmt()
            .with_writer(sink.clone())
            .with_ansi(false)
            .with_max_level(tracing::Level::TRACE)
            .fmt_fields(TextFields);
        let dispatch: tracing::Dispatch = if labelled {
            builder
                .event_format(TextFormat::with_timer(Fixed))
                .finish()
                .into()
        } else {
            builder
                .event_format(Format::default().with_timer(Fixed))
                .finish()
                .into()
        };
        let label = CallLabel {
            call: 42,
            session: 7,
            conversation: "conv 1".into(),
            tool: "lsp".into(),
            resource: "lsp",
            run: "run-ab".into(),
        };
        let body = async {
            tracing::info!("inside the call");
            tracing::info!(parent: None, "a root event, in the call but under no span");
            tokio::task::yield_now().await;
            tracing::warn!(path = "/a b", n = 3u64, "after a yield");
            tracing::info_span!("inner", depth = 2u64).in_scope(|| {
                tracing::error!(error = "boom", "in a span inside the call");
                tracing::info_span!("bare").in_scope(|| tracing::debug!("two spans deep"));
            });
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        tracing::dispatcher::with_default(&dispatch, || {
            tracing::info!("before the call");
            runtime.block_on(async {
                if labelled {
                    in_call(label.clone(), body).await;
                } else {
                    use tracing::Instrument;
                    body.instrument(tracing::info_span!(
                        "call",
                        call = label.call,
                        session = label.session,
                        conversation = %label.conversation,
                        tool = %label.tool,
                        resource = label.resource,
                        run = %label.run,
                    ))
                    .await;
                }
                tracing::info!("after the call");
            });
            tracing::info_span!("other", x = 1u64).in_scope(|| tracing::trace!("no call here"));
        });
        String::from_utf8(sink.0.lock().unwrap().clone()).unwrap()
    }

    #[test]
    fn a_labelled_call_logs_the_lines_its_span_did() {
        let labelled = call_lines(true);
        assert_eq!(labelled, call_lines(false));
        assert_eq!(labelled.lines().count(), 8, "{labelled}");
        assert!(
            labelled.contains(
                " WARN call{call=42 session=7 conversation=conv 1 tool=lsp resource=\"lsp\" \
                 run=run-ab}: toolvisor::logtext::tests: after a yield path=\"/a b\" n=3\n"
            ),
            "{labelled}"
        );
    }
}
