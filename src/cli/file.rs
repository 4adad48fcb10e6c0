//! The `--config` file: a YAML mapping of long flag names to values, merged under the flags
//! and the environment (a value the command line or the environment gave wins).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::parser::ValueSource;
use clap::{ArgAction, CommandFactory, FromArgMatches};

use super::{Cli, CliError};

/// Parses `argv` (with the environment and any config file given by `--config` or
/// `LEASEHOLD_CONFIG`): flags beat the environment, which beats the file, which beats the
/// defaults.
pub fn parse_from<I, T>(argv: I) -> Result<Cli, CliError>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let argv: Vec<OsString> = argv.into_iter().map(Into::into).collect();
    let command = Cli::command();
    let matches = command.clone().try_get_matches_from(&argv)?;
    let Some((subcommand, sub_matches)) = matches.subcommand() else {
        return Ok(Cli::from_arg_matches(&matches)?);
    };
    // Not every subcommand has --config (`guard` does not).
    let config = sub_matches.try_get_one::<PathBuf>("config").ok().flatten();
    let Some(path) = config.cloned() else {
        return Ok(Cli::from_arg_matches(&matches)?);
    };
    let file = read_config_file(&path)?;
    let sub_command = command
        .find_subcommand(subcommand)
        .expect("clap matched this subcommand");
    let mut extra: Vec<OsString> = Vec::new();
    for (key, value) in file {
        let arg = sub_command
            .get_arguments()
            .find(|a| a.get_long() == Some(key.as_str()) && key != "config")
            .ok_or_else(|| CliError::ConfigUnknownKey {
                path: path.clone(),
                known: sub_command
                    .get_arguments()
                    .filter_map(|a| a.get_long())
                    .filter(|l| *l != "config" && *l != "help")
                    .collect::<Vec<_>>()
                    .join(", "),
                key: key.clone(),
                subcommand: subcommand.to_owned(),
            })?;
        let given = matches!(
            sub_matches.value_source(arg.get_id().as_str()),
            Some(ValueSource::CommandLine | ValueSource::EnvVariable)
        );
        if given {
            continue;
        }
        let is_switch = matches!(arg.get_action(), ArgAction::SetTrue);
        match (is_switch, value) {
            (true, FileValue::Bool(true)) => extra.push(format!("--{key}").into()),
            (true, FileValue::Bool(false)) => {}
            (true, other) => {
                return Err(CliError::ConfigInvalid {
                    path,
                    reason: format!("`{key}` takes true or false, not {other}"),
                });
            }
            (false, FileValue::Bool(b)) => extra.push(format!("--{key}={b}").into()),
            (false, FileValue::Text(text)) => extra.push(format!("--{key}={text}").into()),
        }
    }
    // The file's values go right after the subcommand, before any `--`.
    let position = argv
        .iter()
        .position(|a| a.to_str() == Some(subcommand))
        .map_or(argv.len(), |i| i + 1);
    let mut merged = argv[..position].to_vec();
    merged.extend(extra);
    merged.extend_from_slice(&argv[position..]);
    let matches = command.try_get_matches_from(merged)?;
    Ok(Cli::from_arg_matches(&matches)?)
}

/// A scalar value of the config file.
#[derive(Debug)]
enum FileValue {
    Bool(bool),
    Text(String),
}

impl std::fmt::Display for FileValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FileValue::Bool(b) => write!(f, "{b}"),
            FileValue::Text(t) => write!(f, "`{t}`"),
        }
    }
}

fn read_config_file(path: &Path) -> Result<BTreeMap<String, FileValue>, CliError> {
    let text = std::fs::read_to_string(path).map_err(|source| CliError::ConfigUnreadable {
        path: path.to_owned(),
        source,
    })?;
    let invalid = |reason: String| CliError::ConfigInvalid {
        path: path.to_owned(),
        reason,
    };
    let doc: serde_yaml::Value =
        serde_yaml::from_str(&text).map_err(|e| invalid(format!("not valid YAML: {e}")))?;
    let mapping = match doc {
        serde_yaml::Value::Mapping(m) => m,
        serde_yaml::Value::Null => return Ok(BTreeMap::new()),
        _ => return Err(invalid("must be a mapping of flag names to values".into())),
    };
    let mut out = BTreeMap::new();
    for (key, value) in mapping {
        let key = key
            .as_str()
            .ok_or_else(|| invalid(format!("key {key:?} is not a string")))?
            .to_owned();
        let value = match value {
            serde_yaml::Value::Bool(b) => FileValue::Bool(b),
            serde_yaml::Value::String(s) => FileValue::Text(s),
            serde_yaml::Value::Number(n) => FileValue::Text(n.to_string()),
            other => {
                return Err(invalid(format!(
                    "`{key}` must be a string, number or boolean, not {other:?}"
                )));
            }
        };
        out.insert(key, value);
    }
    Ok(out)
}
