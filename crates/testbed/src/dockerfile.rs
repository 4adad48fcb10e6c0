//! A Dockerfile's build stage replayed without a container: the files its `COPY`s take from the
//! context (honouring `.dockerignore`) are copied into an empty directory, and its `RUN` steps
//! run there, so that a test sees a build break when the image would lack a file it needs.
//!
//! Only what a build stage of this shape needs is understood: `FROM … AS name` (the stage ends
//! at the next `FROM`), `WORKDIR`, `COPY SRC… DEST` from the context (not `--from`), and `RUN`
//! as `cmd && cmd …`. Of each `RUN`, the commands that work on the stage's own files run
//! (`mkdir`, `echo`, `touch`, `rm` on relative paths, and `cargo`, which the caller may stand in
//! for through `PATH`); the others (copying the product out of the stage) are skipped and
//! reported. `ENV` is not applied: the caller chooses the environment.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One instruction of the build stage, as replayed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Workdir(String),
    /// Sources (relative to the context) and the destination.
    Copy(Vec<String>, String),
    /// The `&&`-separated commands of one `RUN`.
    Run(Vec<String>),
}

/// The steps of stage `stage` (`FROM … AS stage`) of `dockerfile`'s text.
pub fn stage_steps(dockerfile: &str, stage: &str) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut in_stage = false;
    for line in logical_lines(dockerfile) {
        let (word, rest) = line.split_once(char::is_whitespace).unwrap_or((&line, ""));
        let rest = rest.trim();
        match word.to_ascii_uppercase().as_str() {
            "FROM" => {
                let words: Vec<&str> = rest.split_whitespace().collect();
                in_stage =
                    words.len() == 3 && words[1].eq_ignore_ascii_case("as") && words[2] == stage;
            }
            "WORKDIR" if in_stage => steps.push(Step::Workdir(rest.to_owned())),
            "COPY" if in_stage => {
                let mut words: Vec<String> = rest.split_whitespace().map(str::to_owned).collect();
                assert!(
                    !words.iter().any(|w| w.starts_with("--")),
                    "COPY with flags is not replayed: {line}"
                );
                let dest = words.pop().expect("COPY names a destination");
                steps.push(Step::Copy(words, dest));
            }
            "RUN" if in_stage => steps.push(Step::Run(
                rest.split("&&").map(|c| c.trim().to_owned()).collect(),
            )),
            _ => {}
        }
    }
    steps
}

/// Instructions with their continuation lines joined, comments and blank lines left out.
fn logical_lines(text: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut current = String::new();
    for raw in text.lines() {
        let trimmed = raw.trim();
        if current.is_empty() && (trimmed.is_empty() || trimmed.starts_with('#')) {
            continue;
        }
        match trimmed.strip_suffix('\\') {
            Some(part) => {
                current.push_str(part);
                current.push(' ');
            }
            None => {
                current.push_str(trimmed);
                lines.push(std::mem::take(&mut current));
            }
        }
    }
    if !current.is_empty() {
        lines.push(current);
    }
    lines
}

/// `.dockerignore` rules: the last pattern that matches a path (or one of its parents)
/// decides, `!` marking an exception.
#[derive(Debug, Clone, Default)]
pub struct Ignore {
    rules: Vec<(bool, String)>,
}

impl Ignore {
    pub fn parse(text: &str) -> Self {
        let rules = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(|l| match l.strip_prefix('!') {
                Some(p) => (false, clean(p)),
                None => (true, clean(l)),
            })
            .collect();
        Self { rules }
    }

    /// Whether the build context leaves out `path` (relative, `/`-separated).
    pub fn excludes(&self, path: &str) -> bool {
        let parts: Vec<&str> = path.split('/').collect();
        let mut excluded = false;
        for (exclude, pattern) in &self.rules {
            let hit = (1..=parts.len()).any(|n| glob(pattern, &parts[..n].join("/")));
            if hit {
                excluded = *exclude;
            }
        }
        excluded
    }
}

fn clean(pattern: &str) -> String {
    pattern
        .trim()
        .trim_start_matches("./")
        .trim_matches('/')
        .to_owned()
}

/// Docker's pattern match: `*` and `?` within one path element, `**` across elements.
fn glob(pattern: &str, path: &str) -> bool {
    fn go(p: &[u8], s: &[u8]) -> bool {
        match p {
            [] => s.is_empty(),
            [b'*', b'*', rest @ ..] => {
                let rest = rest.strip_prefix(b"/").unwrap_or(rest);
                (0..=s.len()).any(|i| go(rest, &s[i..]))
            }
            [b'*', rest @ ..] => (0..=s.len())
                .take_while(|&i| i == 0 || s[i - 1] != b'/')
                .any(|i| go(rest, &s[i..])),
            [b'?', rest @ ..] => s.first().is_some_and(|&c| c != b'/') && go(rest, &s[1..]),
            [c, rest @ ..] => s.first() == Some(c) && go(rest, &s[1..]),
        }
    }
    go(pattern.as_bytes(), path.as_bytes())
}

/// What a replay did.
#[derive(Debug, Default)]
pub struct Replay {
    /// The files copied, relative to the stage's root.
    pub copied: Vec<PathBuf>,
    /// The `RUN` commands that ran, and those skipped.
    pub ran: Vec<String>,
    pub skipped: Vec<String>,
}

/// Replays `steps` with files from `context` into `root`; `command` builds the command for one
/// `RUN` part (a `sh -c`, with the caller's environment). Stops at the first failure, whose
/// error names the step and carries its output.
pub fn replay(
    steps: &[Step],
    context: &Path,
    ignore: &Ignore,
    root: &Path,
    command: impl Fn(&str) -> Command,
) -> io::Result<Replay> {
    let mut done = Replay::default();
    let mut workdir = root.to_path_buf();
    for step in steps {
        match step {
            Step::Workdir(dir) => {
                workdir = root.join(dir.trim_start_matches('/'));
                std::fs::create_dir_all(&workdir)?;
            }
            Step::Copy(sources, dest) => {
                let into_dir = sources.len() > 1 || dest.ends_with('/');
                let dest = workdir.join(dest);
                for source in sources {
                    let from = clean(source);
                    let files = context_files(context, &from, ignore)?;
                    if files.is_empty() {
                        return Err(io::Error::other(format!(
                            "COPY {source}: nothing in the build context (.dockerignore)"
                        )));
                    }
                    let is_dir = context.join(&from).is_dir();
                    for file in files {
                        let target = if is_dir {
                            dest.join(file.strip_prefix(&from).map_err(io::Error::other)?)
                        } else if into_dir {
                            dest.join(
                                file.file_name()
                                    .ok_or_else(|| io::Error::other("no name"))?,
                            )
                        } else {
                            dest.clone()
                        };
                        if let Some(parent) = target.parent() {
                            std::fs::create_dir_all(parent)?;
                        }
                        std::fs::copy(context.join(&file), &target)?;
                        done.copied
                            .push(target.strip_prefix(root).unwrap_or(&target).to_owned());
                    }
                }
            }
            Step::Run(parts) => {
                for part in parts {
                    if !stays_in_stage(part) {
                        done.skipped.push(part.clone());
                        continue;
                    }
                    let out = command(part).current_dir(&workdir).output()?;
                    if !out.status.success() {
                        return Err(io::Error::other(format!(
                            "RUN {part} failed ({}):\n{}{}",
                            out.status,
                            String::from_utf8_lossy(&out.stdout),
                            String::from_utf8_lossy(&out.stderr)
                        )));
                    }
                    done.ran.push(part.clone());
                }
            }
        }
    }
    Ok(done)
}

/// Whether a `RUN` part only works on the stage's own files (see the module's doc).
fn stays_in_stage(part: &str) -> bool {
    let mut words = part.split_whitespace();
    match words.next() {
        Some("cargo" | "mkdir" | "echo" | "touch") => !part.contains("> /"),
        Some("rm") => words.all(|w| !w.starts_with('/')),
        _ => false,
    }
}

/// The files under `path` (a file or a directory, relative to `context`) that the context
/// keeps, relative to `context`.
fn context_files(context: &Path, path: &str, ignore: &Ignore) -> io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let mut pending = vec![PathBuf::from(path)];
    while let Some(relative) = pending.pop() {
        let name = relative.to_string_lossy().replace('\\', "/");
        if ignore.excludes(&name) && !has_exception_below(ignore, &name) {
            continue;
        }
        let full = context.join(&relative);
        if full.is_dir() {
            for entry in std::fs::read_dir(&full)? {
                pending.push(relative.join(entry?.file_name()));
            }
        } else if full.is_file() && !ignore.excludes(&name) {
            files.push(relative);
        }
    }
    files.sort();
    Ok(files)
}

/// Whether an exception could re-include something below the excluded directory `dir`.
fn has_exception_below(ignore: &Ignore, dir: &str) -> bool {
    ignore
        .rules
        .iter()
        .any(|(exclude, p)| !exclude && p.starts_with(&format!("{dir}/")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dockerignore_keeps_only_the_exceptions_after_a_star() {
        let ignore = Ignore::parse("# only these\n*\n!Cargo.toml\n!src\n!crates/kit/Cargo.toml\n");
        for (path, excluded) in [
            ("Cargo.toml", false),
            ("src/main.rs", false),
            ("src/deep/mod.rs", false),
            ("crates/kit/Cargo.toml", false),
            ("crates/kit/src/lib.rs", true),
            ("target/debug/x", true),
            ("README.md", true),
        ] {
            assert_eq!(ignore.excludes(path), excluded, "{path}");
        }
    }

    #[test]
    fn dockerignore_patterns_match_within_and_across_path_elements() {
        let ignore = Ignore::parse("**/*.md\n!docs/keep.md\ntarget\n");
        assert!(ignore.excludes("README.md"));
        assert!(ignore.excludes("a/b/notes.md"));
        assert!(!ignore.excludes("docs/keep.md"));
        assert!(ignore.excludes("target/debug/build"));
        assert!(!ignore.excludes("src/target.rs"));
    }

    #[test]
    fn the_build_stage_steps_are_read_with_continuations_and_other_stages_left_out() {
        let dockerfile = "ARG V=1\nFROM rust:1 AS build\nWORKDIR /src\n# c\nCOPY a b ./\n\
                          RUN mkdir x \\\n && cargo build --release\n\
                          FROM scratch\nCOPY --from=build /x /x\nRUN never\n";
        assert_eq!(
            stage_steps(dockerfile, "build"),
            vec![
                Step::Workdir("/src".into()),
                Step::Copy(vec!["a".into(), "b".into()], "./".into()),
                Step::Run(vec!["mkdir x".into(), "cargo build --release".into()]),
            ]
        );
    }

    #[test]
    fn a_copy_of_a_file_the_context_leaves_out_fails_the_replay() {
        let context = tempfile::tempdir().expect("temp dir");
        std::fs::write(context.path().join("kept"), "1").expect("write");
        std::fs::write(context.path().join("dropped"), "2").expect("write");
        let ignore = Ignore::parse("*\n!kept\n");
        let root = tempfile::tempdir().expect("temp dir");
        let sh = |part: &str| {
            let mut c = Command::new("sh");
            c.args(["-c", part]);
            c
        };
        let ok = vec![
            Step::Workdir("/w".into()),
            Step::Copy(vec!["kept".into()], "./".into()),
            Step::Run(vec!["touch made".into(), "cp made /made".into()]),
        ];
        let done = replay(&ok, context.path(), &ignore, root.path(), sh).expect("replay");
        assert_eq!(done.copied, vec![PathBuf::from("w/kept")]);
        assert_eq!(done.ran, vec!["touch made".to_owned()]);
        assert_eq!(done.skipped, vec!["cp made /made".to_owned()]);
        assert!(root.path().join("w/made").is_file());

        let bad = vec![Step::Copy(vec!["dropped".into()], "./".into())];
        let err = replay(&bad, context.path(), &ignore, root.path(), sh).expect_err("refused");
        assert!(err.to_string().contains("COPY dropped"), "{err}");
    }
}
