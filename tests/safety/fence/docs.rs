//! docs/FENCING.md cannot drift from what is tested. Every code block in it carries a tag after
//! its language: `fence:from=PATH` (its lines stand together, in order, in PATH, a file that
//! the tests build and run; indentation may differ as a whole) or `fence:run=NAME` (a test of
//! this binary runs the block as it stands; NAME is listed in [`RUN`]).

use std::path::Path;
use std::process::{Command, Output, Stdio};

const DOC: &str = include_str!("../../../docs/FENCING.md");

/// The blocks that tests run, by name: which test runs each is said next to it.
pub const RUN: &[&str] = &[
    // postgres_table: the_psql_recipe_writes_with_a_newer_token_and_fails_with_a_stale_one
    "postgres-example-table",
    "psql-write",
    // redis_script: the_redis_cli_recipe_writes_with_a_newer_token_and_fails_with_a_stale_one
    "redis-cli-write",
    // http_service: the_curl_recipe_writes_with_a_newer_token_and_fails_with_a_stale_one
    "curl-write",
];

/// One fenced code block of the doc.
pub struct Block {
    /// 1-based line of the opening fence.
    pub line: usize,
    /// What follows the opening backticks: language and tags.
    pub info: String,
    pub text: String,
}

impl Block {
    fn tag(&self, key: &str) -> Option<&str> {
        self.info
            .split_whitespace()
            .find_map(|word| word.strip_prefix(key))
    }
}

/// The doc's fenced code blocks (fences may be indented, as in a list).
pub fn blocks() -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut open: Option<(usize, String, usize, Vec<&str>)> = None;
    for (i, line) in DOC.lines().enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        match open.take() {
            None => {
                if let Some(info) = trimmed.strip_prefix("```") {
                    open = Some((i + 1, info.trim().to_owned(), indent, Vec::new()));
                }
            }
            Some((start, info, fence_indent, mut lines)) => {
                if trimmed.starts_with("```") {
                    blocks.push(Block {
                        line: start,
                        info,
                        text: lines.join("\n"),
                    });
                } else {
                    lines.push(line.get(fence_indent..).unwrap_or(line.trim_start()));
                    open = Some((start, info, fence_indent, lines));
                }
            }
        }
    }
    assert!(open.is_none(), "docs/FENCING.md has an unclosed code block");
    blocks
}

/// The text of the block tagged `fence:run=<name>`.
pub fn snippet(name: &str) -> String {
    let wanted = format!("fence:run={name}");
    let found: Vec<Block> = blocks()
        .into_iter()
        .filter(|b| b.info.split_whitespace().any(|w| w == wanted))
        .collect();
    assert_eq!(
        found.len(),
        1,
        "docs/FENCING.md must have exactly one block tagged {wanted}"
    );
    found.into_iter().next().map(|b| b.text).unwrap_or_default()
}

/// Runs a shell snippet with `sh -c` in `dir`, with `env` added.
pub fn run_sh(snippet: &str, dir: &Path, env: &[(&str, &str)]) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg(snippet)
        .current_dir(dir)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("run sh")
}

fn dedent<S: AsRef<str>>(lines: &[S]) -> Vec<String> {
    let indent = lines
        .iter()
        .map(AsRef::as_ref)
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    lines
        .iter()
        .map(|l| {
            let l = l.as_ref();
            l.get(indent..).unwrap_or("").trim_end().to_owned()
        })
        .collect()
}

/// Whether `block`'s lines stand together, in order, in `file` (indentation shifted as a whole).
fn quoted_in(file: &str, block: &str) -> bool {
    let file_lines: Vec<&str> = file.lines().collect();
    let wanted = dedent(&block.lines().collect::<Vec<_>>());
    !wanted.is_empty()
        && file_lines
            .windows(wanted.len())
            .any(|w| dedent(w) == wanted)
}

#[test]
fn every_code_block_in_the_fencing_doc_is_quoted_from_a_tested_file_or_run_by_a_test() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let blocks = blocks();
    assert!(blocks.len() >= 10, "only {} blocks found", blocks.len());
    let mut run = Vec::new();
    for block in &blocks {
        let at = format!("docs/FENCING.md:{} ({})", block.line, block.info);
        match (block.tag("fence:from="), block.tag("fence:run=")) {
            (Some(path), None) => {
                let file = std::fs::read_to_string(root.join(path))
                    .unwrap_or_else(|e| panic!("{at}: cannot read {path}: {e}"));
                assert!(
                    quoted_in(&file, &block.text),
                    "{at}: the block is not in {path} as it stands:\n{}",
                    block.text
                );
            }
            (None, Some(name)) => {
                assert!(RUN.contains(&name), "{at}: no test runs `{name}`");
                run.push(name.to_owned());
            }
            _ => panic!("{at}: tag the block with fence:from=PATH or fence:run=NAME"),
        }
    }
    for name in RUN {
        assert_eq!(
            run.iter().filter(|n| n == name).count(),
            1,
            "exactly one block is tagged fence:run={name}"
        );
    }
}

#[test]
fn a_block_is_quoted_only_when_its_lines_stand_together_in_order() {
    let file = "fn a() {\n    let x = 1;\n    let y = 2;\n}\n";
    assert!(quoted_in(file, "let x = 1;\nlet y = 2;"));
    assert!(quoted_in(file, "fn a() {\n    let x = 1;"));
    assert!(!quoted_in(file, "let y = 2;\nlet x = 1;"));
    assert!(!quoted_in(file, "let x = 1;\n  let y = 2;"));
    assert!(!quoted_in(file, ""));
}
