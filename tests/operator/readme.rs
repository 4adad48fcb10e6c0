//! README.md as a front door: at most 120 lines (the detail lives in docs/ and is linked), and
//! every link into the repository lands, on a heading of the file when it names one.

use std::path::Path;

/// GitHub's anchor of a heading: lower case, spaces to hyphens, other punctuation dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .chars()
        .filter_map(|c| match c {
            ' ' | '-' => Some('-'),
            '_' => Some('_'),
            c if c.is_alphanumeric() => Some(c.to_ascii_lowercase()),
            _ => None,
        })
        .collect()
}

/// The anchors of the headings of the Markdown file `path`.
fn anchors(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter_map(|l| l.strip_prefix('#'))
        .map(|l| slug(l.trim_start_matches('#')))
        .collect()
}

#[test]
fn the_readme_is_short_and_every_link_lands() {
    let repo = harness::repo();
    let readme = std::fs::read_to_string(repo.join("README.md")).expect("README.md");
    let lines = readme.lines().count();
    assert!(
        lines <= 120,
        "README.md has {lines} lines; move detail to docs/ and link it"
    );
    let mut checked = 0;
    for (at, _) in readme.match_indices("](") {
        let rest = &readme[at + 2..];
        let target = &rest[..rest.find(')').expect("a link's closing parenthesis")];
        if target.starts_with("http") {
            continue;
        }
        let (file, anchor) = target.split_once('#').unwrap_or((target, ""));
        let path = repo.join(file);
        assert!(path.exists(), "README links {target}: no {file}");
        if !anchor.is_empty() {
            let found = anchors(&path);
            assert!(
                found.iter().any(|a| a == anchor),
                "README links {target}: {file} has no heading #{anchor} (it has {found:?})"
            );
        }
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} links checked");
    assert_eq!(
        slug("4. Readiness modes and rollouts: why the default is `member`"),
        "4-readiness-modes-and-rollouts-why-the-default-is-member"
    );
}
