//! How a command line is shown in the logs and messages: its secrets hidden, each argument
//! quoted as a shell would need it.

/// A command line as leasehold shows it (its logs): each argument [`hidden`], and quoted as a
/// shell would need it typed, so that a reader sees where one ends. The value after an option
/// whose name says pass, pwd, secret, token, key, auth or cookie is `***`.
pub fn shown(command: &[String]) -> String {
    let mut shown = Vec::with_capacity(command.len());
    for (i, arg) in command.iter().enumerate() {
        if i.checked_sub(1).is_some_and(|i| secret_option(&command[i])) {
            shown.push("***".to_owned());
        } else {
            shown.push(shell_quoted(hidden(arg)));
        }
    }
    shown.join(" ")
}

/// One argument as leasehold shows it (also a candidate check's command or URL, as said on the
/// HTTP port): no password of a URL (`postgres://u:pw@…`) nor its query's values
/// ([`query_hidden`]), and `***` for the value of a `NAME=value` word or of an option or an
/// HTTP header whose name says pass, pwd, secret, token, key, auth or cookie, also inside the
/// argument (a shell script, a libpq string). A short option's value (`-pPASS`) is not
/// recognised.
pub fn hidden(arg: &str) -> String {
    let word = |w: &str| match w.split_once('=') {
        Some((name, _)) if !name.contains("://") && secret(name) => format!("{name}=***"),
        _ if w.contains("://") => crate::lease::redact_url(&query_hidden(w)),
        _ => crate::lease::redact_url(w),
    };
    // A header named so (`Authorization: …`, `--header=X-Api-Key:…`): its name and colon, and
    // its value hidden to the end of its argument.
    let secret_header = |w: &str| {
        let (name, _) = w.split_once(':').filter(|_| !w.contains("://"))?;
        secret(name.rsplit('=').next().unwrap_or(name)).then(|| format!("{name}:***"))
    };
    // Words end at any white space (a script's tab or line break too), which is kept.
    let (words, gaps): (Vec<&str>, Vec<&str>) = arg
        .split_inclusive(char::is_whitespace)
        .map(|piece| match piece.char_indices().last() {
            Some((at, c)) if c.is_whitespace() => piece.split_at(at),
            _ => (piece, ""),
        })
        .unzip();
    let mut header = false;
    let mut shown = String::with_capacity(arg.len());
    for (k, (&w, gap)) in words.iter().zip(gaps).enumerate() {
        let after_option = k.checked_sub(1).is_some_and(|k| secret_option(words[k]));
        if after_option || header {
            shown.push_str("***");
        } else {
            let named = secret_header(w);
            header = named.is_some();
            shown.push_str(&named.unwrap_or_else(|| word(w)));
        }
        shown.push_str(gap);
    }
    shown
}

/// Whether a name says it names a secret.
fn secret(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    ["pass", "pwd", "secret", "token", "key", "auth", "cookie"]
        .iter()
        .any(|w| name.contains(w))
}

/// An option named for a secret, whose value is the next word or argument (`--password PW`).
fn secret_option(o: &str) -> bool {
    o.starts_with('-') && !o.contains('=') && secret(o)
}

/// One argument as a shell would need it typed: as it is when every character is plain (`***`,
/// the mark of a hidden value, counts as plain), else in single quotes.
fn shell_quoted(arg: String) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c);
    if !arg.is_empty() && arg.replace("***", "").chars().all(plain) {
        return arg;
    }
    format!("'{}'", arg.replace('\'', "'\\''"))
}

/// `url` with each value of its query as `***`: one may be a token (`?access_token=…`).
pub fn query_hidden(url: &str) -> String {
    let Some((head, query)) = url.split_once('?') else {
        return url.to_owned();
    };
    let hidden: Vec<String> = query
        .split('&')
        .map(|p| format!("{}=***", p.split_once('=').map_or(p, |(name, _)| name)))
        .collect();
    format!("{head}?{}", hidden.join("&"))
}
