//! `.dockerignore`: which files of the context a build sees.

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

pub(super) fn clean(pattern: &str) -> String {
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

impl Ignore {
    /// Whether an exception could re-include something below the excluded directory `dir`.
    pub(super) fn has_exception_below(&self, dir: &str) -> bool {
        self.rules
            .iter()
            .any(|(exclude, p)| !exclude && p.starts_with(&format!("{dir}/")))
    }
}
