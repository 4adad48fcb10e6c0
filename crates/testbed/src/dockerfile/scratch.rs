//! The final stage rebuilt from files, for an engine that cannot pull a base image.

use std::io;
use std::path::{Path, PathBuf};

use super::{split_instruction, stages, words};

/// The last stage of `dockerfile` as a Containerfile that builds without pulling anything: it
/// must start `FROM scratch` and run nothing (there is no shell in it). Each source of a
/// `COPY --from=STAGE SRC… DEST` is the file `source(STAGE, SRC)` names, copied into `context`
/// (under `from-STAGE/`), and the instruction copies it from there; every other instruction is
/// kept as it is. Build it with `context` as the build context.
pub fn final_stage(
    dockerfile: &str,
    context: &Path,
    source: impl Fn(&str, &str) -> io::Result<PathBuf>,
) -> io::Result<String> {
    let stages = stages(dockerfile);
    let last = stages
        .last()
        .ok_or_else(|| io::Error::other("the Dockerfile has no FROM"))?;
    if last.image != "scratch" {
        return Err(io::Error::other(format!(
            "the final stage starts FROM {}, which cannot be had here: only FROM scratch",
            last.image
        )));
    }
    let mut out = String::from("FROM scratch\n");
    for line in &last.instructions {
        let (word, rest) = split_instruction(line);
        match word.to_ascii_uppercase().as_str() {
            "RUN" => {
                return Err(io::Error::other(format!(
                    "RUN in a FROM scratch stage has no shell to run in: {line}"
                )));
            }
            "COPY" | "ADD" => {
                let all = words(rest);
                let (flags, mut paths): (Vec<String>, Vec<String>) =
                    all.into_iter().partition(|w| w.starts_with("--"));
                let Some(from) = flags.iter().find_map(|f| f.strip_prefix("--from=")) else {
                    return Err(io::Error::other(format!(
                        "only COPY --from= a stage is rebuilt here: {line}"
                    )));
                };
                let dest = paths
                    .pop()
                    .ok_or_else(|| io::Error::other(format!("no destination: {line}")))?;
                let mut copied = Vec::new();
                for src in paths {
                    let file = source(from, &src)?;
                    let relative =
                        Path::new(&format!("from-{from}")).join(src.trim_start_matches('/'));
                    let target = context.join(&relative);
                    if let Some(parent) = target.parent() {
                        std::fs::create_dir_all(parent)?;
                    }
                    std::fs::copy(&file, &target).map_err(|e| {
                        io::Error::other(format!(
                            "{line}: {} stands in for {src}: {e}",
                            file.display()
                        ))
                    })?;
                    copied.push(relative.to_string_lossy().into_owned());
                }
                let kept: Vec<&String> =
                    flags.iter().filter(|f| !f.starts_with("--from=")).collect();
                let mut instruction = vec![word.to_owned()];
                instruction.extend(kept.into_iter().cloned());
                instruction.extend(copied);
                instruction.push(dest);
                out.push_str(&instruction.join(" "));
            }
            _ => out.push_str(line),
        }
        out.push('\n');
    }
    Ok(out)
}
