//! What the binary says about itself: `leasehold completions SHELL` prints a script the shell
//! takes (bash loads it here for real), and `-h` gives each flag one sentence where `--help`
//! gives all, under the same headings.

use std::io::Write;
use std::process::{Command, Stdio};

use harness::replica::run_to_end;

/// The subcommands, as `leasehold --help` lists them.
const SUBCOMMANDS: &[&str] = &[
    "run",
    "status",
    "guard",
    "step-down",
    "remove-keys",
    "lock",
    "completions",
];

#[test]
fn the_bash_completion_loads_in_bash_and_completes_every_subcommand_and_flag() {
    let (code, script, err) = run_to_end(&["completions", "bash"], &[]);
    assert_eq!(code, 0, "{err}");
    for word in SUBCOMMANDS
        .iter()
        .chain(&["--lease-duration", "--redis-url", "--to"])
    {
        assert!(script.contains(word), "the bash script lacks {word}");
    }
    // bash sources it and registers the function for `leasehold`.
    let mut bash = Command::new("bash")
        .args(["--norc", "-c", "source /dev/stdin && complete -p leasehold"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run bash");
    bash.stdin
        .take()
        .expect("stdin")
        .write_all(script.as_bytes())
        .expect("write the script to bash");
    let out = bash.wait_with_output().expect("bash");
    assert!(
        out.status.success(),
        "bash refused the script: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("-F _leasehold"),
        "{out:?}"
    );
}

#[test]
fn zsh_and_fish_get_scripts_of_their_own() {
    for (shell, first, flag) in [
        ("zsh", "#compdef leasehold", "--lease-duration"),
        ("fish", "", "complete -c leasehold"),
    ] {
        let (code, script, err) = run_to_end(&["completions", shell], &[]);
        assert_eq!(code, 0, "{shell}: {err}");
        assert!(script.starts_with(first), "{shell}: {}", &script[..80]);
        assert!(script.contains(flag), "{shell} lacks {flag}");
        assert!(script.contains("step-down"), "{shell} lacks step-down");
    }
}

#[test]
fn an_unknown_shell_is_refused_with_the_ones_there_are() {
    let (code, _, err) = run_to_end(&["completions", "tcsh"], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("'tcsh'")
            && err.contains("bash")
            && err.contains("zsh")
            && err.contains("fish"),
        "{err}"
    );
}

#[test]
fn dash_h_gives_one_sentence_per_flag_and_dash_dash_help_all_of_it() {
    let (code, short, _) = run_to_end(&["run", "-h"], &[]);
    assert_eq!(code, 0);
    let (code, long, _) = run_to_end(&["run", "--help"], &[]);
    assert_eq!(code, 0);
    assert!(
        short.lines().count() * 3 < long.lines().count() * 2,
        "-h has {} lines, --help {}",
        short.lines().count(),
        long.lines().count()
    );
    for heading in ["Redis:", "Lease:", "Timing", "HTTP", "Kubernetes:", "Logs:"] {
        assert!(short.contains(heading), "-h lacks {heading}:\n{short}");
        assert!(long.contains(heading), "--help lacks {heading}");
    }
    // The second sentence of --redis-eviction's help, and a default said in words.
    let second = "`refuse` also stays out of the election";
    assert!(!short.contains(second), "{short}");
    assert!(
        long.replace('\n', " ")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .contains(second)
    );
    assert!(
        short.contains("[default: $POD_NAME, else the hostname]"),
        "{short}"
    );
    assert!(short.contains("see more with '--help'"));
}
