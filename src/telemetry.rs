//! Logs: JSON lines when nobody is watching a terminal, readable text when someone is, with a
//! RUST_LOG-style filter. Messages are constant strings; values go in named fields. A thread of
//! their own writes them: a reader of stderr that stops reading makes lines dropped, never the
//! election wait.

use std::fmt;
use std::io::IsTerminal;
use std::sync::Mutex;

use leasehold_core::locked::locked;
use tracing::field::{Field, Visit};
use tracing_appender::non_blocking::{NonBlockingBuilder, WorkerGuard};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::FormatFields;
use tracing_subscriber::fmt::format::Writer;

use crate::printable;

/// The writing thread's guard, until [`flush`].
static WRITER: Mutex<Option<WorkerGuard>> = Mutex::new(None);

/// Lines kept for the writing thread while stderr does not take them (a few MiB); more are
/// dropped.
const BUFFERED_LINES: usize = 16_384;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// JSON when stderr is not a terminal, text when it is.
    Auto,
    /// One JSON object per line.
    Json,
    /// Human-readable text.
    Text,
}

/// Why logging could not start.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The filter does not parse.
    #[error("`{filter}`: not a valid filter ({reason}); examples: info, leasehold=debug,kube=warn")]
    Filter {
        /// The filter given.
        filter: String,
        /// The parser's words.
        reason: String,
    },
}

/// Checks a filter without installing it, so that a bad one is refused with exit code 2; also a
/// blank one, which would keep no line, errors included.
pub fn parse_filter(filter: &str) -> Result<EnvFilter, TelemetryError> {
    let refused = |reason: String| TelemetryError::Filter {
        filter: filter.to_owned(),
        reason,
    };
    if filter.trim().is_empty() {
        return Err(refused("empty: it keeps no line, errors included".into()));
    }
    let parsed = EnvFilter::try_new(filter).map_err(|e| refused(e.to_string()))?;
    if !keeps_leaseholds_errors(filter) {
        return Err(refused(
            "it keeps no line of leasehold's, errors included: give a level for it too".into(),
        ));
    }
    Ok(parsed)
}

/// Whether `filter`'s level for leasehold's own lines (a `leasehold…` directive, else the bare
/// default level) keeps errors: `kube=debug` alone, or `off`, keeps none.
fn keeps_leaseholds_errors(filter: &str) -> bool {
    let mut level = None;
    for directive in filter.split(',').map(str::trim) {
        match directive.split_once('=') {
            Some((target, to)) if target.starts_with("leasehold") => return to != "off",
            Some(_) => {}
            None if !directive.is_empty() => level = Some(directive),
            None => {}
        }
    }
    level.is_some_and(|level| level != "off")
}

/// What the logs look like and which lines they keep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogSettings {
    /// Text, JSON, or by terminal.
    pub format: LogFormat,
    /// A filter in RUST_LOG syntax.
    pub filter: String,
}

/// Checks the filter and installs the global subscriber, writing to stderr (stdout belongs to
/// the singleton command and to `leasehold status`).
pub fn start(settings: &LogSettings) -> Result<(), TelemetryError> {
    let filter = parse_filter(&settings.filter)?;
    let json = match settings.format {
        LogFormat::Json => true,
        LogFormat::Text => false,
        LogFormat::Auto => !std::io::stderr().is_terminal(),
    };
    let (writer, guard) = NonBlockingBuilder::default()
        .lossy(true)
        .buffered_lines_limit(BUFFERED_LINES)
        .thread_name("leasehold-logs")
        .finish(std::io::stderr());
    *locked(&WRITER) = Some(guard);
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer)
        .with_target(true);
    if json {
        builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .init();
    } else {
        builder
            .with_ansi(std::env::var_os("NO_COLOR").is_none() && std::io::stderr().is_terminal())
            .fmt_fields(EscapedFields)
            .init();
    }
    Ok(())
}

/// The text format's fields as the default writes them (the message, then `name=value`, the
/// names in italics on a terminal; the `log.` metadata of a dependency's `log` records left
/// out), each value with its control characters escaped: a value read from Redis that leasehold
/// did not write (a holder's identity) would otherwise forge a log line with its line break and
/// act on the terminal with its escape sequence. JSON escapes them by itself.
struct EscapedFields;

impl<'w> FormatFields<'w> for EscapedFields {
    fn format_fields<R: RecordFields>(&self, writer: Writer<'w>, fields: R) -> fmt::Result {
        let mut escaping = Escaping {
            writer,
            first: true,
            result: Ok(()),
        };
        fields.record(&mut escaping);
        escaping.result
    }
}

/// Writes one event's or span's fields for [`EscapedFields`].
struct Escaping<'w> {
    writer: Writer<'w>,
    first: bool,
    result: fmt::Result,
}

impl Escaping<'_> {
    fn field(&mut self, name: &str, value: &str) {
        if self.result.is_err() || name.starts_with("log.") {
            return;
        }
        let (gap, value) = (if self.first { "" } else { " " }, printable(value));
        self.first = false;
        self.result = match name {
            "message" => write!(self.writer, "{gap}{value}"),
            _ if self.writer.has_ansi_escapes() => {
                write!(
                    self.writer,
                    "{gap}\x1b[3m{name}\x1b[0m\x1b[2m=\x1b[0m{value}"
                )
            }
            _ => write!(self.writer, "{gap}{name}={value}"),
        };
    }
}

/// A text value is quoted (`record_str`'s default calls this with it), as the default does.
impl Visit for Escaping<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.field(field.name(), &format!("{value:?}"));
    }
}

/// Writes what is buffered before the process ends (waiting a second at most for a stalled
/// stderr); lines logged after it are dropped.
pub fn flush() {
    drop(locked(&WRITER).take());
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// What one event logs in the text format, without colours.
    fn text_of(event: impl FnOnce()) -> String {
        let lines = Arc::new(Mutex::new(Vec::<u8>::new()));
        let sink = lines.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .without_time()
            .fmt_fields(EscapedFields)
            .with_writer(move || Sink(sink.clone()))
            .finish();
        tracing::subscriber::with_default(subscriber, event);
        String::from_utf8(locked(&lines).clone()).unwrap()
    }

    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Sink {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            locked(&self.0).extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn text_fields_are_written_as_the_default_writes_them_with_control_characters_escaped() {
        let leader = "evil\n\u{1b}[31mfake: line";
        let text =
            text_of(|| tracing::info!(%leader, quoted = "a b", token = 41, "following leader"));
        assert_eq!(
            text.trim(),
            r#"INFO leasehold::telemetry::tests: following leader leader=evil\n\u{1b}[31mfake: line quoted="a b" token=41"#
        );
        // A dependency's `log` record carries where it was logged; the default leaves that out.
        // (A message of leasehold's own here: the docs' check reads every event in `src`.)
        let text =
            text_of(|| tracing::info!(log.target = "rustls", log.line = 7, "following leader"));
        assert_eq!(
            text.trim(),
            "INFO leasehold::telemetry::tests: following leader"
        );
    }

    #[test]
    fn a_bad_filter_names_the_filter() {
        assert!(parse_filter("leasehold=debug,kube=warn").is_ok());
        for keeps_none in [
            "off",
            "kube=debug",
            "leasehold=off,info",
            "info,leasehold=off",
        ] {
            let err = parse_filter(keeps_none).unwrap_err().to_string();
            assert!(
                err.contains("keeps no line of leasehold's"),
                "{keeps_none}: {err}"
            );
        }
        for keeps in [
            "error",
            "warn,kube=debug",
            "kube=debug,leasehold=info",
            "leasehold_core=warn",
        ] {
            assert!(parse_filter(keeps).is_ok(), "{keeps}");
        }
        let err = parse_filter("leasehold=loud").unwrap_err().to_string();
        assert!(
            err.starts_with("`leasehold=loud`: not a valid filter"),
            "{err}"
        );
    }
}
