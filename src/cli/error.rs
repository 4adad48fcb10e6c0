//! The one error type of the command line: every refusal, and the exit code it means.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use crate::elector::{TimingBound, TimingError, TimingField};
use crate::telemetry::TelemetryError;

/// Why the binary stops before or instead of doing its work. Each refusal names the flag (or
/// config key), the value and the rule; [`CliError::exit_code`] is the one place that decides
/// the exit code.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Clap refused the command line (its message names the flag), or `--help`/`--version`;
    /// printed as clap prints it, with clap's exit code.
    #[error("{0}")]
    Usage(#[from] clap::Error),
    /// The config file could not be read.
    #[error("--config {path}: cannot read it: {source}")]
    ConfigUnreadable {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The config file is not a YAML mapping of flag names to values.
    #[error("--config {path}: {reason}")]
    ConfigInvalid { path: PathBuf, reason: String },
    /// A key of the config file is no flag of this subcommand.
    #[error(
        "--config {path}: unknown key `{key}`; the keys are the long flag names of `leasehold {subcommand}`{}",
        did_you_mean(.nearest.as_deref(), .known)
    )]
    ConfigUnknownKey {
        path: PathBuf,
        key: String,
        subcommand: String,
        /// The accepted key nearest to the one given, when one is near.
        nearest: Option<String>,
        known: String,
    },
    /// The durations break the timing rule (the library names fields; this names flags).
    #[error("{}", .0.describe(timing_flag))]
    Timing(#[from] TimingError),
    /// The log filter does not parse.
    #[error("--log {0}")]
    Log(#[from] TelemetryError),
    /// The Redis URL.
    #[error("--redis-url `{url}`: {rule}")]
    RedisUrl {
        /// The URL with its password redacted.
        url: String,
        rule: String,
    },
    /// A file given by a flag (password, certificate, key).
    #[error("--{flag} {path}: {rule}")]
    File {
        flag: &'static str,
        path: PathBuf,
        rule: String,
    },
    /// A duration that must be shorter than another.
    #[error("--{flag} {} must be shorter than {other} {}", humantime::format_duration(*value), humantime::format_duration(*other_value))]
    Order {
        flag: &'static str,
        value: Duration,
        other: &'static str,
        other_value: Duration,
    },
    /// A value that breaks a rule: a name, a URL, a count, a command (see
    /// [`CliError::value`]).
    #[error("{} `{value}`: {rule}", flag_words(flag))]
    Value {
        /// The flag without its dashes, or words such as `-- CMD`.
        flag: &'static str,
        value: String,
        rule: String,
    },
    /// A duration outside its range, in the units people type (`2h`, not `Debug`'s `7200s`).
    #[error("--{flag} {}: {rule}", humantime::format_duration(*value))]
    Duration {
        flag: &'static str,
        value: Duration,
        rule: &'static str,
    },
    /// A flag given where it means nothing, or without the one it goes with, whatever its
    /// value: `--restart-command` without a command, a Sentinel flag with another URL.
    #[error("{flag}: {rule}")]
    Misplaced {
        /// The flag as typed (`--restart-command`, `-- CMD`).
        flag: &'static str,
        rule: &'static str,
    },
    /// A refusal of a value that was not typed, and where it came from (`$VARIABLE`, the file).
    #[error("{error} (the value comes from {from})")]
    From { error: Box<CliError>, from: String },
    /// Input that is the user's to fix, found only once the command ran (no Deployment to
    /// name the lease after, no cluster for `--kubernetes on`, a guard file that cannot be
    /// written).
    #[error("{0}")]
    Refused(String),
    /// A failure at run time that is not the input's fault.
    #[error("{0:#}")]
    Failed(#[from] anyhow::Error),
}

/// The flag of a timing field: `lease_duration` → `--lease-duration`.
fn timing_flag(field: TimingField) -> String {
    format!("--{}", field.name().replace('_', "-"))
}

/// The end of an unknown key's refusal: the nearest key, if any, then all of them.
fn did_you_mean(nearest: Option<&str>, known: &str) -> String {
    match nearest {
        Some(nearest) => format!("; did you mean `{nearest}`? (all: {known})"),
        None => format!(": {known}"),
    }
}

/// `--flag` for a flag name, or the words as they are (`-- CMD`).
fn flag_words(flag: &str) -> String {
    if flag.starts_with('-') {
        flag.to_owned()
    } else {
        format!("--{flag}")
    }
}

impl CliError {
    /// The refusal of `value` given to `flag` (without its dashes), with the rule it breaks.
    pub fn value(flag: &'static str, value: impl ToString, rule: impl Into<String>) -> Self {
        CliError::Value {
            flag,
            value: value.to_string(),
            rule: rule.into(),
        }
    }

    /// This refusal, saying where the values of the flags it names came from when `sources` (by
    /// long flag) says they were not typed.
    pub fn sourced(self, sources: &BTreeMap<String, String>) -> Self {
        use TimingError::{DriftFactor, Order, TooLong, TooShort};
        let timing = |field: TimingField| timing_flag(field).split_off(2);
        let flags = match &self {
            CliError::Value { flag, .. }
            | CliError::Duration { flag, .. }
            | CliError::File { flag, .. }
            | CliError::Order { flag, .. }
            | CliError::Misplaced { flag, .. } => vec![flag.trim_start_matches('-').to_owned()],
            CliError::RedisUrl { .. } => vec!["redis-url".to_owned()],
            CliError::Log(_) => vec!["log".to_owned()],
            CliError::Timing(TooShort { field, .. } | TooLong { field, .. }) => {
                vec![timing(*field)]
            }
            CliError::Timing(Order { larger, than, .. }) => {
                let than = match than {
                    TimingBound::Field(field) => *field,
                    TimingBound::JitteredRetry | TimingBound::DriftAndRetry => {
                        TimingField::RetryPeriod
                    }
                };
                vec![timing(*larger), timing(than)]
            }
            CliError::Timing(DriftFactor { .. }) => vec!["drift-factor".to_owned()],
            _ => return self,
        };
        let from: Vec<&str> = flags
            .iter()
            .filter_map(|f| sources.get(f))
            .map(String::as_str)
            .collect();
        if from.is_empty() {
            return self;
        }
        self.came_from(from.join(" and "))
    }

    /// This refusal, of a value that came from `from` (`$POD_NAME`).
    pub fn came_from(self, from: impl Into<String>) -> Self {
        CliError::From {
            error: Box::new(self),
            from: from.into(),
        }
    }

    /// The exit code: clap's for the command line (0 for `--help`), 1 for a failure at run
    /// time, 2 for every refusal of input.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Usage(e) => u8::try_from(e.exit_code()).unwrap_or(2),
            CliError::From { error, .. } => error.exit_code(),
            CliError::Failed(_) => 1,
            _ => 2,
        }
    }

    /// Says what went wrong where users look (clap's help on stdout, errors on stderr) and
    /// returns the exit code.
    pub fn report(&self) -> ExitCode {
        match self {
            CliError::Usage(e) => {
                // A value's escape sequence or carriage return would act on the terminal, and
                // one of 100 kB fill it: such an error is said line by line, escaped and cut,
                // without colours. Nothing more to say when even stderr is gone.
                let text = e.render().to_string();
                let control = text.contains(|c: char| c.is_control() && c != '\n');
                if e.use_stderr() && (control || text.len() > crate::SAID_AT_MOST) {
                    text.lines().for_each(|line| say!("{line}"));
                } else {
                    let _ = e.print();
                }
            }
            other => say!("error: {other}"),
        }
        ExitCode::from(self.exit_code())
    }
}
