//! docs/REFERENCE.md's tables against the code, both ways, the way the chart's Role is checked
//! against `k8s::rbac`: the flags of every subcommand (clap's command, which `--help` prints),
//! the environment variables leasehold reads or gives its command, the metrics and their labels
//! (the registry's own exposition), the step-down reasons (`gates::STEP_DOWN_REASONS`) and the log
//! events (the constant messages of the `info!`, `warn!` and `error!` events in src/). A failure
//! names what is missing on which side.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use clap::CommandFactory;
use leasehold::board::{GateHooks, Shown};
use leasehold::cli::Cli;
use leasehold::clock::{BootInstant, WallLead};
use leasehold::elector::{LeaderInfo, RedisHealth, RenewalOutcome, Role, Status, TermHooks};
use leasehold::gates::STEP_DOWN_REASONS;
use leasehold::lease::{FencingToken, LeaseError};
use leasehold::metrics::{Exposition, Metrics};

use harness::markdown::{spans, table};
use harness::repo;

// ---------------------------------------------------------------------------------------------
// Reading the reference

pub(crate) fn reference() -> String {
    std::fs::read_to_string(repo().join("docs/REFERENCE.md")).expect("docs/REFERENCE.md")
}

/// Fails, when either side has what the other lacks, with both lists.
pub(crate) fn assert_same<T: Ord + std::fmt::Debug>(
    what: &str,
    code: &BTreeSet<T>,
    doc: &BTreeSet<T>,
) {
    let undocumented: Vec<_> = code.difference(doc).collect();
    let stale: Vec<_> = doc.difference(code).collect();
    assert!(
        undocumented.is_empty() && stale.is_empty(),
        "docs/REFERENCE.md and the code differ on {what}\n  in the code, not in REFERENCE.md: \
         {undocumented:#?}\n  in REFERENCE.md, not in the code: {stale:#?}"
    );
}

#[test]
fn the_design_layout_names_only_paths_that_exist() {
    let design = std::fs::read_to_string(repo().join("docs/DESIGN.md")).expect("docs/DESIGN.md");
    let (mut dir, mut missing) = (String::new(), Vec::new());
    for path in table(&design, "## Layout")
        .iter()
        .flat_map(|row| spans(&row[1]))
    {
        // A bare file name is in the folder named before it: `src/lease/` (`scripts.rs`).
        let path = if path.contains('/') {
            path
        } else {
            format!("{dir}{path}")
        };
        if path.ends_with('/') {
            dir.clone_from(&path);
        }
        if !repo().join(&path).exists() {
            missing.push(path);
        }
    }
    assert!(
        missing.is_empty(),
        "docs/DESIGN.md's layout names what is not there: {missing:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Flags

/// One flag of one subcommand: (short, variable, default, aliases). The default is clap's, else
/// the `[default: …]` its help gives in words, backticks dropped; the aliases are the visible
/// ones (client-go's names), sorted.
type Flag = (Option<char>, Option<String>, Option<String>, Vec<String>);

/// Every flag that `leasehold <command> --help` shows, by (command, long name). `--help` and
/// `--version` are clap's own; a flag that takes no value has no default.
fn code_flags() -> BTreeMap<(String, String), Flag> {
    let mut out = BTreeMap::new();
    for command in Cli::command().get_subcommands() {
        for arg in command.get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            if arg.is_hide_set() || ["help", "version"].contains(&long) {
                continue;
            }
            let help = arg
                .get_long_help()
                .or(arg.get_help())
                .map(|h| h.to_string())
                .unwrap_or_default();
            let in_words = help
                .split_once("[default: ")
                .and_then(|(_, rest)| rest.split_once(']'))
                .map(|(words, _)| words.replace('`', ""));
            let default = arg
                .get_default_values()
                .iter()
                .map(|v| v.to_string_lossy().into_owned())
                .reduce(|a, b| format!("{a},{b}"))
                .filter(|_| arg.get_action().takes_values())
                .or(in_words);
            let env = arg.get_env().map(|e| e.to_string_lossy().into_owned());
            let mut aliases: Vec<String> = (arg.get_visible_aliases().unwrap_or_default())
                .into_iter()
                .map(|a| format!("--{a}"))
                .collect();
            aliases.sort();
            let key = (command.get_name().to_owned(), format!("--{long}"));
            out.insert(key, (arg.get_short(), env, default, aliases));
        }
    }
    out
}

/// The flags table: `| flag (and short, and aliases) | variable | default | commands | meaning |`,
/// one entry per command that a row names; the default cell with its backticks dropped.
fn doc_flags(doc: &str) -> BTreeMap<(String, String), Flag> {
    let mut out = BTreeMap::new();
    for row in table(doc, "### Flags") {
        let [flag, env, default, commands, ..] = &row[..] else {
            panic!("a flags row needs flag, variable, default, commands, meaning: {row:?}")
        };
        let names = spans(flag);
        let long = names.first().cloned().unwrap_or_default();
        let short = names
            .iter()
            .find_map(|s| s.strip_prefix('-').filter(|s| !s.starts_with('-')))
            .and_then(|s| s.chars().next());
        let mut aliases: Vec<String> = names
            .iter()
            .skip(1)
            .filter(|n| n.starts_with("--"))
            .cloned()
            .collect();
        aliases.sort();
        let env = spans(env).first().cloned();
        let default = Some(default.replace('`', "")).filter(|d| !d.is_empty());
        for command in spans(commands) {
            let entry = (short, env.clone(), default.clone(), aliases.clone());
            assert!(
                out.insert((command.clone(), long.clone()), entry).is_none(),
                "`{long}` of `{command}` has two rows in REFERENCE.md"
            );
        }
    }
    out
}

/// Whether a documented flag agrees with the code: the same short and variable, and a default
/// cell that starts with the code's default (it may go on in words: `0s` (one try)).
fn agrees((short, env, default, aliases): &Flag, doc: &Flag) -> bool {
    let default_agrees = match (default, &doc.2) {
        (None, None) => true,
        (Some(code), Some(doc)) => doc.starts_with(code.as_str()),
        _ => false,
    };
    *short == doc.0 && *env == doc.1 && default_agrees && *aliases == doc.3
}

#[test]
fn the_reference_lists_every_flag_of_every_subcommand_as_help_shows_it() {
    let code = code_flags();
    let doc = doc_flags(&reference());
    let keys = |m: &BTreeMap<(String, String), Flag>| m.keys().cloned().collect::<BTreeSet<_>>();
    assert_same("the flags (command, flag)", &keys(&code), &keys(&doc));
    let differ: Vec<String> = code
        .iter()
        .filter(|(k, v)| !agrees(v, &doc[*k]))
        .map(|(k, v)| format!("{k:?}: the code has {v:?}, REFERENCE.md {:?}", doc[k]))
        .collect();
    assert!(
        differ.is_empty(),
        "REFERENCE.md's flags table differs from --help (short, variable, default, aliases):\n{}",
        differ.join("\n")
    );
}

// ---------------------------------------------------------------------------------------------
// Environment variables

/// The Rust sources of the product (`src/`) and of its core (`crates/core/src/`).
fn code_sources() -> Vec<(String, String)> {
    let mut out = sources(&repo().join("src"));
    out.extend(sources(&repo().join("crates/core/src")));
    out
}

/// Every `.rs` file under `dir` with its text, named by its path in the repository (in full
/// outside it).
pub(crate) fn sources(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            out.extend(sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).expect("a source file");
            let name = path.strip_prefix(repo()).unwrap_or(&path);
            out.push((name.display().to_string(), text));
        }
    }
    out.sort();
    out
}

/// The string literal that starts `text` (after `"`), undone: `\"` and `\\` and a
/// backslash-newline with the next line's indentation.
fn literal(text: &str) -> Option<(String, usize)> {
    let mut out = String::new();
    let mut chars = text.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((out, i + 1)),
            '\\' => match chars.next()?.1 {
                '\n' => {
                    let rest = &text[i + 2..];
                    let skip = rest.len() - rest.trim_start().len();
                    for _ in 0..skip {
                        chars.next();
                    }
                }
                'n' => out.push('\n'),
                other => out.push(other),
            },
            _ => out.push(c),
        }
    }
    None
}

/// The environment variables src/ names outside the flags: read with `env::var(_os)("…")` or a
/// closure `var("…")`, and the `*_ENV` constants (what the command is given and `guard` reads).
fn code_variables() -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (_, text) in code_sources() {
        for call in ["var(\"", "var_os(\""] {
            for (at, _) in text.match_indices(call) {
                out.extend(literal(&text[at + call.len()..]).map(|(s, _)| s));
            }
        }
        for line in text.lines() {
            let line = line.trim_start().trim_start_matches("pub ");
            if let Some(rest) = line.strip_prefix("const ")
                && let Some((name, value)) = rest.split_once(": &str = \"")
                && name.ends_with("_ENV")
            {
                out.extend(literal(value).map(|(s, _)| s));
            }
        }
    }
    out
}

#[test]
fn the_reference_lists_every_environment_variable_leasehold_reads_or_gives() {
    let doc: BTreeSet<String> = table(&reference(), "### Environment variables")
        .iter()
        .flat_map(|row| spans(&row[0]))
        .collect();
    assert_same("the environment variables", &code_variables(), &doc);
}

// ---------------------------------------------------------------------------------------------
// Metrics

/// The exposition with every family holding a series, so that its labels show.
fn exposition() -> String {
    let metrics = Metrics::new("web-a", "shop/web");
    let after = Duration::from_secs(1);
    metrics.redis_error("renew", &LeaseError::Timeout { op: "renew", after });
    metrics.eviction_policy("volatile-lru", true);
    metrics.candidate_unhealthy();
    metrics.cooldown_started();
    metrics.renewal(RenewalOutcome::Renewed, after);
    let status = Status {
        lease: "shop/web".into(),
        identity: "web-a".into(),
        owner: "web-a-x".into(),
        role: Role::Follower {
            leader: Some(LeaderInfo {
                owner: "web-b-y".into(),
                identity: "web-b".into(),
                token: Some(FencingToken(3)),
            }),
            cooldown: None,
        },
        transitions: 0,
        last_step_down: None,
        redis: RedisHealth::default(),
        sitting_out: None,
    };
    metrics.render(
        &Shown::of(status),
        BootInstant::now(),
        WallLead::now(),
        true,
        Exposition::OpenMetrics,
    )
}

/// A metric: its documented name (a counter's with `_total`), type and label names.
type Metric = (String, String, BTreeSet<String>);

/// Every metric of the exposition (a histogram's `le` is its own, not a label).
fn code_metrics() -> BTreeSet<Metric> {
    let text = exposition();
    let mut out = BTreeSet::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let (family, kind) = rest.split_once(' ').expect("# TYPE name kind");
        let series: Vec<&str> = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter(|l| {
                let rest = l.strip_prefix(family).unwrap_or("_");
                let rest = ["_total", "_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|suffix| rest.strip_prefix(suffix))
                    .unwrap_or(rest);
                rest.starts_with(['{', ' '])
            })
            .collect();
        assert!(
            !series.is_empty(),
            "{family} has no series in the test's exposition: feed it in exposition() so that its \
             labels show"
        );
        let labels = series
            .iter()
            .filter_map(|s| s.split_once('{').and_then(|(_, l)| l.split_once('}')))
            .flat_map(|(labels, _)| labels.split(',').map(|l| l.split('=').next().unwrap_or("")))
            .filter(|l| !l.is_empty() && *l != "le")
            .map(str::to_owned)
            .collect();
        let name = match kind {
            "counter" => format!("{family}_total"),
            _ => family.to_owned(),
        };
        out.insert((name, kind.to_owned(), labels));
    }
    out
}

#[test]
fn the_reference_lists_every_metric_with_its_type_and_labels() {
    let doc: BTreeSet<Metric> = table(&reference(), "### Metrics")
        .iter()
        .map(|row| {
            let metric = spans(&row[0]).first().cloned().unwrap_or_default();
            let (name, labels) = metric.split_once('{').unwrap_or((&metric, ""));
            let labels = labels.trim_end_matches('}').split(',');
            let labels = labels.filter(|l| !l.is_empty()).map(str::to_owned);
            (name.to_owned(), row[1].clone(), labels.collect())
        })
        .collect();
    assert_same("the metrics (name, type, labels)", &code_metrics(), &doc);
}

// ---------------------------------------------------------------------------------------------
// Step-down reasons

#[test]
fn the_reference_lists_every_step_down_reason() {
    let code: BTreeSet<String> = STEP_DOWN_REASONS
        .iter()
        .map(|r| r.as_label().to_owned())
        .collect();
    let doc: BTreeSet<String> = table(&reference(), "### Step-down reasons")
        .iter()
        .flat_map(|row| spans(&row[0]))
        .collect();
    assert_same("the step-down reasons", &code, &doc);
}

// ---------------------------------------------------------------------------------------------
// Log events

/// Every event of src/: (level, constant message, where). The message is the event's first
/// string literal outside its fields' values; a format string counts up to its first `{`.
fn code_events() -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for (file, text) in code_sources() {
        for level in ["debug", "info", "warn", "error"] {
            let call = format!("{level}!(");
            for (at, _) in text.match_indices(&call) {
                let before = &text[..at];
                let this_line = &before[before.rfind('\n').map_or(0, |i| i + 1)..];
                // Not `my_info!(`, not in a comment.
                if this_line.ends_with(|c: char| c.is_alphanumeric() || c == '_')
                    || this_line.contains("//")
                {
                    continue;
                }
                let line = before.matches('\n').count() + 1;
                let place = format!("{file}:{line}");
                let message = event_message(&text[at + call.len()..])
                    .unwrap_or_else(|| panic!("{place}: a {level}! event without a message"));
                let message = match message.split_once('{') {
                    Some(("", _)) => panic!(
                        "{place}: an event's message is a constant (a value goes into a field)"
                    ),
                    Some((start, _)) => start.to_owned(),
                    None => message,
                };
                out.push((level.to_owned(), message, place));
            }
        }
    }
    out
}

/// The first top-level string literal of a macro's arguments (`text` starts after the `(`).
fn event_message(text: &str) -> Option<String> {
    let (mut depth, mut i, mut arg_start) = (0usize, 0, true);
    let bytes = text.as_bytes();
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                let (s, len) = literal(&text[i + 1..])?;
                if depth == 0 && arg_start {
                    return Some(s);
                }
                i += len;
            }
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' if depth == 0 => return None,
            b')' | b']' | b'}' => depth -= 1,
            b',' if depth == 0 => arg_start = true,
            c if !c.is_ascii_whitespace() => arg_start = false,
            _ => {}
        }
        i += 1;
    }
    None
}

/// The events table: messages in backticks (several per row, ` / ` between), their levels in the
/// second cell (one for all, or one per message). A message ending in `…` stands for every
/// message that starts with what comes before.
fn doc_events(doc: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for row in table(doc, "### Log events") {
        let messages = spans(&row[0]);
        let levels: Vec<&str> = row[1].split('/').map(str::trim).collect();
        assert!(
            levels.len() == 1 || levels.len() == messages.len(),
            "REFERENCE.md's event row {row:?} needs one level, or one per message"
        );
        for (i, message) in messages.into_iter().enumerate() {
            out.push((levels[i.min(levels.len() - 1)].to_owned(), message));
        }
    }
    out
}

fn matches(documented: &str, message: &str) -> bool {
    match documented.strip_suffix('…') {
        Some(start) => message.starts_with(start.trim_end()),
        None => documented == message,
    }
}

#[test]
fn the_reference_lists_every_log_event_at_its_level() {
    let code = code_events();
    let doc = doc_events(&reference());
    let undocumented: Vec<String> = code
        .iter()
        .filter(|(level, ..)| level != "debug")
        .filter(|(level, message, _)| !doc.iter().any(|(l, d)| l == level && matches(d, message)))
        .map(|(level, message, place)| format!("{place}: {level} `{message}`"))
        .collect();
    let stale: Vec<String> = doc
        .iter()
        .filter(|(l, d)| {
            !code
                .iter()
                .any(|(level, message, _)| l == level && matches(d, message))
        })
        .map(|(level, message)| format!("{level} `{message}`"))
        .collect();
    assert!(
        undocumented.is_empty() && stale.is_empty(),
        "docs/REFERENCE.md's log events and src/ differ\n  logged, not in REFERENCE.md (or at \
         another level):\n    {}\n  in REFERENCE.md, logged nowhere at that level:\n    {}",
        undocumented.join("\n    "),
        stale.join("\n    ")
    );
}
