//! A Dockerfile's stages without a container engine that can pull a base image.
//!
//! The build stage is replayed in a directory: the files its `COPY`s take from the context
//! (honouring `.dockerignore`) are copied into an empty directory, and its `RUN` steps run
//! there, so that a test sees a build break when the image would lack a file it needs.
//!
//! Only what a build stage of this shape needs is understood: `FROM … AS name` (the stage ends
//! at the next `FROM`), `WORKDIR`, `COPY SRC… DEST` from the context (not `--from`), and `RUN`
//! as `cmd && cmd …`. Of each `RUN`, the commands that work on the stage's own files run
//! (`mkdir`, `echo`, `touch`, `rm` on relative paths, and `cargo`, which the caller may stand in
//! for through `PATH`); the others (copying the product out of the stage) are skipped and
//! reported. `ENV` is not applied: the caller chooses the environment, and [`stage_env`] reads it.
//!
//! The final stage, `FROM scratch` with `COPY --from=` the build stage, is rewritten by
//! [`final_stage`] into a Containerfile that buildah builds here: each file it copies from the
//! build stage comes from where the caller says that stage would have it, every other
//! instruction stays as it is.

mod ignore;
mod scratch;

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

pub use ignore::Ignore;
pub use scratch::final_stage;

/// One stage of a Dockerfile: the image it starts `FROM`, its name (`AS name`) and its
/// instructions after the `FROM`, continuation lines joined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stage {
    pub image: String,
    pub name: Option<String>,
    pub instructions: Vec<String>,
}

/// The stages of `dockerfile`'s text, in order (what comes before the first `FROM`, such as
/// `ARG`, is left out).
pub fn stages(dockerfile: &str) -> Vec<Stage> {
    let mut stages: Vec<Stage> = Vec::new();
    for line in logical_lines(dockerfile) {
        let (word, rest) = split_instruction(&line);
        if word.eq_ignore_ascii_case("FROM") {
            let words: Vec<&str> = rest.split_whitespace().collect();
            let name = (words.len() == 3 && words[1].eq_ignore_ascii_case("as"))
                .then(|| words[2].to_owned());
            stages.push(Stage {
                image: words.first().map(|w| (*w).to_owned()).unwrap_or_default(),
                name,
                instructions: Vec::new(),
            });
        } else if let Some(stage) = stages.last_mut() {
            stage.instructions.push(line);
        }
    }
    stages
}

/// An instruction's keyword and the rest of its line.
pub(crate) fn split_instruction(line: &str) -> (&str, &str) {
    let (word, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    (word, rest.trim())
}

/// The stage named `stage`; panics naming the stages there are when there is none.
fn named<'a>(stages: &'a [Stage], stage: &str) -> &'a Stage {
    stages
        .iter()
        .find(|s| s.name.as_deref() == Some(stage))
        .unwrap_or_else(|| {
            let names: Vec<_> = stages.iter().map(|s| &s.name).collect();
            panic!("no stage `{stage}` in the Dockerfile: {names:?}")
        })
}

/// Words as a shell splits them: on white space outside double quotes, the quotes removed.
pub(crate) fn words(text: &str) -> Vec<String> {
    let (mut all, mut word, mut quoted, mut any) = (Vec::new(), String::new(), false, false);
    for c in text.chars() {
        match c {
            '"' => (quoted, any) = (!quoted, true),
            c if c.is_whitespace() && !quoted => {
                if any {
                    all.push(std::mem::take(&mut word));
                }
                any = false;
            }
            c => (word, any) = (word + &c.to_string(), true),
        }
    }
    if any {
        all.push(word);
    }
    all
}

/// The variables the `ENV` instructions of stage `stage` set (`ENV K=V …`, values unquoted).
pub fn stage_env(dockerfile: &str, stage: &str) -> Vec<(String, String)> {
    let stages = stages(dockerfile);
    let mut env = Vec::new();
    for line in &named(&stages, stage).instructions {
        let (word, rest) = split_instruction(line);
        if word.eq_ignore_ascii_case("ENV") {
            for pair in words(rest) {
                let (key, value) = pair
                    .split_once('=')
                    .unwrap_or_else(|| panic!("ENV as KEY=VALUE only: {line}"));
                env.push((key.to_owned(), value.to_owned()));
            }
        }
    }
    env
}

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
    let stages = stages(dockerfile);
    let Some(found) = stages.iter().find(|s| s.name.as_deref() == Some(stage)) else {
        return Vec::new();
    };
    let mut steps = Vec::new();
    for line in &found.instructions {
        let (word, rest) = split_instruction(line);
        match word.to_ascii_uppercase().as_str() {
            "WORKDIR" => steps.push(Step::Workdir(rest.to_owned())),
            "COPY" => {
                let mut words: Vec<String> = rest.split_whitespace().map(str::to_owned).collect();
                assert!(
                    !words.iter().any(|w| w.starts_with("--")),
                    "COPY with flags is not replayed: {line}"
                );
                let dest = words.pop().expect("COPY names a destination");
                steps.push(Step::Copy(words, dest));
            }
            "RUN" => steps.push(Step::Run(
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
                    let from = ignore::clean(source);
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
        if ignore.excludes(&name) && !ignore.has_exception_below(&name) {
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
    fn the_env_of_a_stage_is_read_with_quotes_and_continuations() {
        let dockerfile =
            "FROM rust:1 AS build\nENV A=\"-C x=+y\" \\\n    B=2\nFROM scratch\nENV C=3\n";
        assert_eq!(
            stage_env(dockerfile, "build"),
            vec![("A".into(), "-C x=+y".into()), ("B".into(), "2".into())]
        );
    }

    #[test]
    fn the_final_stage_copies_from_the_files_standing_in_for_the_build_stage() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("bin"), "binary").expect("write");
        let dockerfile = "FROM rust:1 AS build\nRUN cargo build\nFROM scratch\n\
                          COPY --from=build --chmod=0755 /out/bin /usr/bin/app\n\
                          USER 1:1\nENTRYPOINT [\"/usr/bin/app\"]\n";
        let context = dir.path().join("context");
        let asked = std::cell::RefCell::new(Vec::new());
        let text = final_stage(dockerfile, &context, |stage, src| {
            asked.borrow_mut().push(format!("{stage}:{src}"));
            Ok(dir.path().join("bin"))
        })
        .expect("assembled");
        assert_eq!(asked.into_inner(), vec!["build:/out/bin".to_owned()]);
        assert_eq!(
            text,
            "FROM scratch\nCOPY --chmod=0755 from-build/out/bin /usr/bin/app\nUSER 1:1\n\
             ENTRYPOINT [\"/usr/bin/app\"]\n"
        );
        let copied = std::fs::read_to_string(context.join("from-build/out/bin")).expect("copied");
        assert_eq!(copied, "binary");

        let pulled =
            "FROM rust:1 AS build\nFROM gcr.io/distroless/static\nCOPY --from=build /a /a\n";
        let err =
            final_stage(pulled, &context, |_, _| Ok(dir.path().join("bin"))).expect_err("refused");
        assert!(err.to_string().contains("only FROM scratch"), "{err}");
        let shell = "FROM scratch\nRUN echo hi\n";
        let err =
            final_stage(shell, &context, |_, _| Ok(dir.path().join("bin"))).expect_err("refused");
        assert!(err.to_string().contains("no shell"), "{err}");
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
