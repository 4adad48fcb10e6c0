//! What the command line says about itself: `-h` gives each flag its first sentence, `--help`
//! all of it (both under the same headings: Redis, Lease, Timing, …), and `leasehold completions
//! SHELL` prints a completion script generated from the same clap tree.

use clap::builder::StyledStr;
use clap::{Args, Command};
use clap_complete::Shell;

/// `leasehold completions`.
#[derive(Debug, Clone, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for: bash, zsh or fish (elvish and powershell work too).
    #[arg(value_enum)]
    pub shell: Shell,
}

/// The first sentence of a flag's help: up to the first `. ` or `; `, or all of it.
fn first_sentence(help: &str) -> &str {
    let ends = [". ", "; ", ".\n", ";\n"];
    ends.iter()
        .filter_map(|end| help.find(end))
        .min()
        .map_or(help, |at| &help[..at])
}

/// Gives every flag of `command` and of its subcommands a short help for `-h` (its first
/// sentence) and keeps the whole text for `--help`. A `[default: …]` said in words stays in
/// both: it is what `-h` readers need most after the sentence.
pub(super) fn concise(command: Command) -> Command {
    command
        .mut_args(|arg| {
            let Some(full) = arg.get_help().map(StyledStr::to_string) else {
                return arg;
            };
            if arg.get_long_help().is_some() {
                return arg;
            }
            let mut short = first_sentence(&full).trim_end_matches('.').to_owned();
            if let Some(at) = full.find("[default: ")
                && !short.contains("[default: ")
            {
                short = format!("{short} {}", &full[at..]);
            }
            if short.len() == full.len() {
                return arg;
            }
            arg.help(short).long_help(full)
        })
        .mut_subcommands(concise)
}

/// The completion script for `shell`, of the command line as [`command`](super::command) builds
/// it. Into memory first: clap_complete panics on a failed write, and stdout may be a closed pipe.
pub fn completions(shell: Shell) -> Vec<u8> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut super::command(), "leasehold", &mut script);
    script
}

#[cfg(test)]
mod tests {
    use super::first_sentence;

    #[test]
    fn the_short_help_is_the_first_sentence() {
        for (help, short) in [
            ("ACL user name.", "ACL user name."),
            ("Prefix of keys", "Prefix of keys"),
            ("One. Two. Three.", "One"),
            ("How long; at most 1h.", "How long"),
            (
                "A URL: `redis://`. Put no password here",
                "A URL: `redis://`",
            ),
            ("Line one.\nLine two.", "Line one"),
            ("Version 1.2 is fine", "Version 1.2 is fine"),
        ] {
            assert_eq!(first_sentence(help), short, "{help:?}");
        }
    }
}
