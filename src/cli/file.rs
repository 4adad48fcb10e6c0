//! The `--config` file: a YAML mapping of long flag names to values. Its values become the
//! defaults of the subcommand's flags, so that one parse of the command line puts flags, then
//! the environment, then the file, then the built-in defaults in that order, through the same
//! value parsers and into the same settings. A key that is no flag is refused with the nearest
//! one.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, Command, CommandFactory, FromArgMatches};

use super::{Cli, CliError, on_command_line, parse_switch};
use crate::secret_file::SecretFileError;

/// Parses `argv` (with the environment and any config file given by `--config` or
/// `LEASEHOLD_CONFIG`).
pub fn parse_from<I, T>(argv: I) -> Result<Cli, CliError>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let argv: Vec<OsString> = argv.into_iter().map(Into::into).collect();
    let command = command();
    let refused = |e: clap::Error| name_the_variable(e, &command, &argv);
    // Where the file is comes from the command line or the environment, so they are read
    // first; the file then only supplies defaults for one more parse of the same argv.
    let matches = command
        .clone()
        .try_get_matches_from(&argv)
        .map_err(refused)?;
    let Some((subcommand, given)) = matches.subcommand() else {
        return Ok(Cli::from_arg_matches(&matches)?);
    };
    let sub_command = command
        .find_subcommand(subcommand)
        .ok_or_else(|| anyhow::anyhow!("clap matched `{subcommand}`, which it does not know"))?;
    // `--` and nothing after it: a command that came to nothing (`-- $CMD` of an empty one).
    let takes_command = sub_command.get_arguments().any(|a| a.get_id() == "command");
    if takes_command && argv.iter().any(|a| a == "--") && !given.contains_id("command") {
        return Err(CliError::Misplaced {
            flag: "-- CMD",
            rule: "nothing follows `--`: give the command after it, or leave `--` out",
        });
    }
    // Not every subcommand has --config (`guard` does not).
    let Some(path) = given.try_get_one::<PathBuf>("config").ok().flatten() else {
        return with_sources(&matches, sub_command, None);
    };
    let file = read_config_file(path)?;
    let defaults = file_defaults(&command, sub_command, given, path, file)?;
    let keys: Vec<String> = defaults.iter().map(|(id, _)| id.clone()).collect();
    let with_file = command.clone().mut_subcommand(subcommand, |mut sub| {
        for (id, value) in defaults {
            sub = sub.mut_arg(id, |arg| arg.default_value(value));
        }
        sub
    });
    let matches = with_file.try_get_matches_from(&argv).map_err(refused)?;
    with_sources(&matches, sub_command, Some((path, &keys)))
}

/// The parsed command line, with where each value of `sub`'s that was not typed came from: its
/// variable, or a key of the `file` (its path, and the argument ids it gave).
fn with_sources(
    matches: &ArgMatches,
    sub: &Command,
    file: Option<(&Path, &[String])>,
) -> Result<Cli, CliError> {
    let mut cli = Cli::from_arg_matches(matches)?;
    let Some((_, given)) = matches.subcommand() else {
        return Ok(cli);
    };
    for arg in sub.get_arguments() {
        let (Some(long), id) = (arg.get_long(), arg.get_id().as_str()) else {
            continue;
        };
        let from = match (given.value_source(id), file) {
            (Some(ValueSource::EnvVariable), _) => {
                arg.get_env().map(|v| format!("${}", v.to_string_lossy()))
            }
            (Some(ValueSource::DefaultValue), Some((path, ids))) if ids.iter().any(|i| i == id) => {
                Some(format!("`{long}` in --config {}", path.display()))
            }
            _ => None,
        };
        if let Some(from) = from {
            cli.sources.insert(long.to_owned(), from);
        }
    }
    Ok(cli)
}

/// The clap tree, with every switch reading its variable through `parse_switch`, and `-h`
/// shorter than `--help` (`help::concise`).
pub fn command() -> Command {
    super::help::concise(Cli::command()).mut_subcommands(|sub| {
        let inherited = guard_file_inherited(&sub);
        // `-V` says `leasehold 0.2.0 (…)` as the binary does, not `leasehold-status …`.
        sub.display_name("leasehold").mut_args(|arg| {
            let arg = if inherited && arg.get_id() == "guard_file" {
                arg.env(None)
            } else {
                arg
            };
            // Help names each flag's variable, never its value: one may hold a password.
            let arg = arg.hide_env_values(true);
            if matches!(arg.get_action(), ArgAction::SetTrue) {
                // A switch whose variable says false is not given: clap would count it present,
                // in conflict with the flag it turns off (`--leader-label`).
                let off = arg.get_env().and_then(std::env::var_os);
                let off = off.is_some_and(|v| parse_switch(&v.to_string_lossy()) == Ok(false));
                let arg = if off { arg.env(None) } else { arg };
                arg.value_parser(parse_switch as fn(&str) -> Result<bool, String>)
            } else {
                arg
            }
        })
    })
}

/// Whether `sub` is a `run` or `lock` inside a leasehold's command (it has a term's token),
/// whose guard file `LEASEHOLD_GUARD_FILE` names (and an inherited `LEASEHOLD_CONFIG` may): it
/// takes a file of its own.
fn guard_file_inherited(sub: &Command) -> bool {
    matches!(sub.get_name(), "run" | "lock") && std::env::var_os(crate::exec::TOKEN_ENV).is_some()
}

/// Clap's refusal of a value, which names the flag, with the variable the value came from when
/// it came from one (the flag was not typed, and its variable holds the value refused); and its
/// refusal of a value that is not UTF-8, which names nothing or (read lossily by a parser of
/// possible values) the flag, with the variable that holds it.
fn name_the_variable(mut error: clap::Error, command: &Command, argv: &[OsString]) -> clap::Error {
    // The subcommand run (`lock`'s `--wait`, not `step-down`'s), read leniently.
    let run = command
        .clone()
        .ignore_errors(true)
        .try_get_matches_from(argv)
        .ok()
        .and_then(|m| m.subcommand_name().map(str::to_owned));
    let mut args = command
        .get_subcommands()
        .filter(|s| run.as_deref().is_none_or(|run| s.get_name() == run))
        .flat_map(Command::get_arguments);
    let tip = match (
        error.kind(),
        error.get(ContextKind::InvalidArg),
        error.get(ContextKind::InvalidValue),
    ) {
        // A typed one that clap confirms first: a variable may hold a path, of any bytes.
        (ErrorKind::InvalidUtf8, ..) => typed_not_utf8(command, argv).or_else(|| {
            args.filter_map(Arg::get_env)
                .find(|v| std::env::var_os(v).is_some_and(|v| v.to_str().is_none()))
                .map(|v| format!("the value of ${} is not UTF-8", v.to_string_lossy()))
        }),
        (
            ErrorKind::ValueValidation | ErrorKind::InvalidValue,
            Some(ContextValue::String(flag)),
            Some(ContextValue::String(value)),
        ) => {
            // `--lease-duration <LEASE_DURATION>`: the long flag is the first word.
            let long = flag
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .trim_start_matches('-');
            args.find(|a| a.get_long() == Some(long)).and_then(|arg| {
                let variable = arg.get_env()?;
                let held = std::env::var_os(variable)?;
                let mut names = arg.get_long_and_visible_aliases().unwrap_or_default();
                let short = arg.get_short().map(String::from);
                names.extend(short.as_deref());
                let typed = on_command_line(argv, &names);
                let variable = variable.to_string_lossy();
                // A parser of a few possible values reads a value that is not UTF-8 lossily.
                match (typed, held.to_str()) {
                    (false, Some(held)) if held == value.as_str() => {
                        Some(format!("the value comes from ${variable}"))
                    }
                    (false, None) if held.to_string_lossy() == value.as_str() => {
                        Some(format!("the value of ${variable} is not UTF-8"))
                    }
                    _ => None,
                }
            })
        }
        _ => None,
    };
    if let Some(tip) = tip {
        error.insert(
            ContextKind::Suggested,
            ContextValue::StyledStrs(vec![tip.into()]),
        );
    }
    error
}

/// The typed argument that is not UTF-8 where clap wants text (a path may be any bytes), found
/// by clap itself: the one that alone among them still fails; with the flag it is the value of
/// (`--flag VALUE`, `--flag=VALUE`; no short flag takes text), or as the command's. Its value is
/// not shown: it may hold a password. The first 16 are tried, each a parse of the whole line.
fn typed_not_utf8(command: &Command, argv: &[OsString]) -> Option<String> {
    let flag_of = |typed: &str| {
        let (flag, _) = typed.split_once('=').filter(|(f, _)| f.starts_with("--"))?;
        Some(flag.to_owned())
    };
    let garbled: Vec<usize> = (1..argv.len())
        .filter(|&i| argv[i].to_str().is_none())
        .take(16)
        .collect();
    let at = *garbled.iter().find(|&&at| {
        let mut alone = argv.to_vec();
        for &i in garbled.iter().filter(|&&i| i != at) {
            let flag = flag_of(&argv[i].to_string_lossy());
            alone[i] = flag.map_or("x".into(), |flag| format!("{flag}=x").into());
        }
        let refused = command.clone().try_get_matches_from(alone).err();
        refused.is_some_and(|e| e.kind() == ErrorKind::InvalidUtf8)
    })?;
    if argv[..at].iter().any(|a| a == "--") {
        return Some("an argument of the command after `--` is not UTF-8".to_owned());
    }
    let flag = flag_of(&argv[at].to_string_lossy())
        .unwrap_or_else(|| argv[at - 1].to_string_lossy().into_owned());
    Some(match flag.starts_with('-') {
        true => format!("the value of {flag} is not UTF-8"),
        false => "an argument is not UTF-8".to_owned(),
    })
}

/// The file's values as defaults of `sub`'s arguments (by id), each checked by the argument's
/// own value parser; those the command line or the environment give are left out, and so are,
/// for an operator command, the keys of `run` and `lock` (one file serves them and the
/// operator commands run in their pod), also those it shares with another meaning (`wait`). Any other key that is no long flag of `sub`, a switch
/// given other than true or false, and a key that conflicts with a flag given or with another
/// key of the file are refused.
fn file_defaults(
    root: &Command,
    sub: &Command,
    given: &ArgMatches,
    path: &Path,
    file: BTreeMap<String, String>,
) -> Result<Vec<(String, String)>, CliError> {
    let is_given = |id: &str| {
        matches!(
            given.value_source(id),
            Some(ValueSource::CommandLine | ValueSource::EnvVariable)
        )
    };
    let invalid = |reason: String| CliError::ConfigInvalid {
        path: path.to_owned(),
        reason,
    };
    let mut defaults = Vec::new();
    for (key, value) in file {
        let named = |a: &Arg| a.get_long() == Some(key.as_str()) && key != "config";
        let operator = ["status", "step-down", "remove-keys"].contains(&sub.get_name());
        let served = || {
            root.get_subcommands()
                .filter(|s| ["run", "lock"].contains(&s.get_name()))
                .flat_map(Command::get_arguments)
        };
        let Some(arg) = sub.get_arguments().find(|a| named(a)) else {
            if operator && served().any(named) {
                continue;
            }
            return Err(unknown_key(root, sub, path, &key));
        };
        // A key that `run` or `lock` read under another variable means something else there
        // (`wait`): theirs.
        if operator && served().any(|a| named(a) && a.get_env() != arg.get_env()) {
            continue;
        }
        // The parent's file, named by an inherited config file.
        let parents = std::env::var_os(crate::exec::GUARD_FILE_ENV);
        if key == "guard-file" && guard_file_inherited(sub) && parents == Some(value.clone().into())
        {
            continue;
        }
        let is_switch = matches!(arg.get_action(), ArgAction::SetTrue);
        // What the command line or the environment gives, the file does not.
        if is_given(arg.get_id().as_str()) {
            continue;
        }
        if is_switch {
            // In the spellings its variable takes; off is a switch's default already.
            match super::parse_switch(&value) {
                Ok(true) => defaults.push((arg, "true".to_owned())),
                Ok(false) => {}
                Err(_) => {
                    let rule = "takes true or false (or 1/0, yes/no, on/off)";
                    return Err(invalid(format!("`{key}` {rule}, not `{value}`")));
                }
            }
            continue;
        }
        check_value(sub, arg, &value).map_err(|mut error| {
            let tip = format!(
                "the value comes from `{key}` in --config {}",
                path.display()
            );
            error.insert(
                ContextKind::Suggested,
                ContextValue::StyledStrs(vec![tip.into()]),
            );
            error
        })?;
        defaults.push((arg, value));
    }
    // clap checks conflicts among given values only; a file's value is given here.
    for (arg, _) in &defaults {
        // Either of the two may name the conflict (clap's list is one way only); two keys of
        // the file meet here from the side that names it.
        let conflicts = sub.get_arguments().filter(|other| {
            let names = |a: &Arg, b: &Arg| {
                sub.get_arg_conflicts_with(a)
                    .iter()
                    .any(|c| c.get_id() == b.get_id())
            };
            names(arg, other) || (names(other, arg) && is_given(other.get_id().as_str()))
        });
        for other in conflicts {
            let long = |a: &Arg| a.get_long().unwrap_or_default().to_owned();
            let with = if is_given(other.get_id().as_str()) {
                format!("--{}, which is given", long(other))
            } else if defaults.iter().any(|(a, _)| a.get_id() == other.get_id()) {
                format!("`{}`, also in the file", long(other))
            } else {
                continue;
            };
            return Err(invalid(format!(
                "`{}` cannot be used with {with}",
                long(arg)
            )));
        }
    }
    let defaults = defaults
        .into_iter()
        .map(|(arg, value)| (arg.get_id().to_string(), value))
        .collect();
    Ok(defaults)
}

/// Refuses `value` for `arg` as its value parser refuses it on the command line: clap takes a
/// default that its parser refuses for a mistake in the program, not in the input.
fn check_value(sub: &Command, arg: &Arg, value: &str) -> Result<(), clap::Error> {
    let long = arg.get_long().unwrap_or_default().to_owned();
    let mut probe = Arg::new("value")
        .long(long.clone())
        .action(ArgAction::Set)
        .value_parser(arg.get_value_parser().clone());
    if let Some(names) = arg.get_value_names() {
        probe = probe.value_names(names.iter().cloned());
    }
    Command::new(sub.get_name().to_owned())
        .no_binary_name(true)
        .arg(probe)
        .try_get_matches_from([format!("--{long}={value}")])
        .map(drop)
}

/// The refusal of a key that no long flag of `sub` has, with the nearest one when one is near.
fn unknown_key(root: &Command, sub: &Command, path: &Path, key: &str) -> CliError {
    let known: Vec<&str> = sub
        .get_arguments()
        .filter_map(|a| a.get_long())
        .filter(|l| *l != "config" && *l != "help")
        .collect();
    // A variable's spelling (`LEASEHOLD_LEASE_DURATION`) or an alias names its flag, of any
    // command (the file serves them all); else the nearest by spelling, for a key long enough
    // to be near anything.
    let spelled = key.to_lowercase().replace('_', "-");
    let spelled = spelled.strip_prefix("leasehold-").unwrap_or(&spelled);
    let mut every = std::iter::once(sub).chain(root.get_subcommands());
    let named = every.find_map(|command| {
        command.get_arguments().find(|a| {
            (a.get_long() == Some(spelled) && spelled != "config")
                || a.get_all_aliases()
                    .is_some_and(|all| all.contains(&spelled))
        })
    });
    let nearest = named
        .and_then(Arg::get_long)
        .filter(|long| *long != key)
        .map(str::to_owned)
        .or_else(|| {
            known
                .iter()
                .map(|k| (strsim::jaro(spelled, k), *k))
                .filter(|(similarity, _)| *similarity > 0.7 && spelled.len() > 2)
                .max_by(|a, b| a.0.total_cmp(&b.0))
                .map(|(_, k)| k.to_owned())
        });
    CliError::ConfigUnknownKey {
        path: path.to_owned(),
        key: key.to_owned(),
        subcommand: sub.get_name().to_owned(),
        nearest,
        known: known.join(", "),
    }
}

fn read_config_file(path: &Path) -> Result<BTreeMap<String, String>, CliError> {
    let invalid = |reason: String| CliError::ConfigInvalid {
        path: path.to_owned(),
        reason,
    };
    let text = match crate::secret_file::read_bounded(path) {
        Ok(bytes) => String::from_utf8(bytes).map_err(|_| invalid("is not UTF-8 text".into()))?,
        Err(SecretFileError::Unreadable(source)) => {
            let path = path.to_owned();
            return Err(CliError::ConfigUnreadable { path, source });
        }
        Err(SecretFileError::TooLarge) => {
            return Err(invalid(
                "is larger than 1 MiB, more than any config file".into(),
            ));
        }
        Err(other) => return Err(invalid(other.to_string())),
    };
    // The YAML reader takes time quadratic in the nesting of brackets, minutes for a large
    // file, before it could refuse the depth; their count bounds it. A file of flags holds
    // scalars, whose brackets are few.
    const MAX_BRACKETS: usize = 1000;
    let brackets = text.matches(['[', '{']).count();
    if brackets > MAX_BRACKETS {
        return Err(invalid(format!(
            "holds {brackets} opening brackets (`[` or `{{`), more than the {MAX_BRACKETS} that a file of flags could need"
        )));
    }
    let not_yaml = |e: serde_yaml::Error| invalid(format!("not valid YAML: {e}"));
    let doc: serde_yaml::Value = serde_yaml::from_str(&text).map_err(not_yaml)?;
    let mapping = match doc {
        serde_yaml::Value::Mapping(m) => m,
        serde_yaml::Value::Null => return Ok(BTreeMap::new()),
        _ => return Err(invalid("must be a mapping of flag names to values".into())),
    };
    for (key, value) in mapping {
        let key = key.as_str().ok_or_else(|| {
            invalid(format!(
                "a key must be a long flag name, not {}",
                yaml_words(&key)
            ))
        })?;
        if !matches!(
            value,
            serde_yaml::Value::Bool(_)
                | serde_yaml::Value::String(_)
                | serde_yaml::Value::Number(_)
        ) {
            return Err(invalid(format!(
                "`{key}` must be a string, number or boolean, not {}",
                yaml_words(&value)
            )));
        }
    }
    // Each scalar as written: YAML reads `1.10` as the number 1.1 and `0x10` as 16, which a
    // text flag would take for other text than its variable given the same.
    serde_yaml::from_str(&text).map_err(not_yaml)
}

/// A YAML value in the words of a refusal: a scalar as written, anything else by its kind
/// (the library's `Debug` would say `Sequence [Number(1)]`).
fn yaml_words(value: &serde_yaml::Value) -> String {
    match value {
        serde_yaml::Value::Null => "empty".to_owned(),
        serde_yaml::Value::Bool(b) => format!("`{b}`"),
        serde_yaml::Value::Number(n) => format!("`{n}`"),
        serde_yaml::Value::String(s) => format!("`{s}`"),
        serde_yaml::Value::Sequence(_) => "a list".to_owned(),
        serde_yaml::Value::Mapping(_) => "a mapping".to_owned(),
        serde_yaml::Value::Tagged(tagged) => format!("a value tagged `{}`", tagged.tag),
    }
}
