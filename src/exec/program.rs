//! Finding the command before it is needed, as `execvp` will look for it at each term: a command
//! that cannot be started is refused at start, not at every leader's first term (exit 126 or
//! 127, each replica crashing in turn).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::{ExecError, interpreter};

/// The search path `execvp` takes when `$PATH` is not set (glibc's `_CS_PATH`).
const DEFAULT_PATH: &str = "/bin:/usr/bin";

/// What a path holds, for `execve`.
enum Candidate {
    /// An executable regular file.
    Executable,
    /// Nothing.
    Missing,
    /// Something that cannot be executed, and why.
    Refused(&'static str),
}

fn candidate(path: &Path) -> Candidate {
    match std::fs::metadata(path) {
        Err(_) => Candidate::Missing,
        Ok(m) if m.is_dir() => Candidate::Refused("is a directory"),
        Ok(m) if !m.is_file() => Candidate::Refused("is not a regular file"),
        Ok(m) if m.permissions().mode() & 0o111 == 0 => {
            Candidate::Refused("is not executable (no x bit)")
        }
        Ok(_) => Candidate::Executable,
    }
}

/// Finds `program` as `execvp` does, and what starts it (a `#!` interpreter, a dynamic loader).
pub fn find_program(program: &str) -> Result<PathBuf, ExecError> {
    startable(find(program)?)
}

/// `path`, once what starts it is there too ([`interpreter::of`]); for `#!/usr/bin/env NAME`,
/// NAME on `$PATH` as `env` looks for it.
fn startable(path: PathBuf) -> Result<PathBuf, ExecError> {
    let Some((interpreter, argument)) = interpreter::of(&path).map_err(ExecError::Unfit)? else {
        return Ok(path);
    };
    let why = match (candidate(&interpreter), argument) {
        (Candidate::Executable, Some(name)) if interpreter.ends_with("env") => match find(&name) {
            Err(e) if !name.starts_with('-') => format!("cannot find {name}: {e}"),
            _ => return Ok(path),
        },
        (Candidate::Executable, _) => return Ok(path),
        (Candidate::Missing, _) => "does not exist".to_owned(),
        (Candidate::Refused(why), _) => why.to_owned(),
    };
    Err(ExecError::NoInterpreter { interpreter, why })
}

/// Finds `program` as `execvp` does: a name with a `/` is that path; any other name is the first
/// executable regular file of that name in a directory of `$PATH`. A name that only matches a
/// directory or a file without an x bit is refused with the first such match, as `execvp` fails
/// with `EACCES` then.
fn find(program: &str) -> Result<PathBuf, ExecError> {
    let refused = |path: &Path, on_path: bool, why: &'static str| ExecError::NotExecutable {
        path: path.to_owned(),
        on_path,
        why,
    };
    if program.contains('/') {
        let path = Path::new(program);
        return match candidate(path) {
            Candidate::Executable => Ok(path.to_owned()),
            Candidate::Missing => Err(ExecError::NotFound),
            Candidate::Refused(why) => Err(refused(path, false, why)),
        };
    }
    let search = std::env::var_os("PATH").unwrap_or_else(|| DEFAULT_PATH.into());
    let mut first_refusal = None;
    for dir in std::env::split_paths(&search) {
        let path = dir.join(program);
        match candidate(&path) {
            Candidate::Executable => return Ok(path),
            Candidate::Missing => {}
            Candidate::Refused(why) => {
                first_refusal.get_or_insert_with(|| refused(&path, true, why));
            }
        }
    }
    Err(first_refusal.unwrap_or(ExecError::NotFound))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_are_found_on_the_path() {
        assert!(find_program("sh").is_ok());
        assert!(find_program("/bin/sh").is_ok());
        assert!(matches!(
            find_program("no-such-program-leasehold"),
            Err(ExecError::NotFound)
        ));
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("plain");
        std::fs::write(&plain, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(
            find_program(plain.to_str().unwrap()),
            Err(ExecError::NotExecutable {
                on_path: false,
                why: "is not executable (no x bit)",
                ..
            })
        ));
        assert!(matches!(
            find_program(dir.path().to_str().unwrap()),
            Err(ExecError::NotExecutable {
                why: "is a directory",
                ..
            })
        ));
    }

    #[test]
    fn a_script_whose_interpreter_is_missing_is_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("script");
        let cases = [
            (
                "#!/nonexistent/python9\n",
                Some("/nonexistent/python9, which does not exist"),
            ),
            (
                "#!/usr/bin/env no-such-interpreter-x\n",
                Some("cannot find no-such-interpreter-x"),
            ),
            ("#!/bin/sh\n", None),
            ("#!/usr/bin/env sh\n", None),
        ];
        for (first_line, refused) in cases {
            std::fs::write(&script, first_line).unwrap();
            std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
            let found = find_program(script.to_str().unwrap());
            match refused {
                Some(words) => {
                    let err = found.expect_err(first_line).to_string();
                    assert!(err.contains(words), "{first_line}: {err}");
                }
                None => assert!(found.is_ok(), "{first_line}: {found:?}"),
            }
        }
    }
}
