//! The words of Redis errors: what a primitive was doing, what the client said without its type
//! names, what a refusal means on leasehold's side, and URLs with their passwords hidden.

use std::time::Duration;

use redis::RedisError;

/// What Redis means by `NOAUTH`.
pub(super) const NO_PASSWORD: &str = "redis asks for a password and none was given";
/// What Redis means by `WRONGPASS`, and the client by a failed `AUTH`.
pub(super) const PASSWORD_REFUSED: &str = "redis refused the password";
/// What rustls means by `UnknownIssuer`.
pub(super) const UNKNOWN_ISSUER: &str =
    "the server's certificate comes from an issuer leasehold does not trust";

/// What a primitive does, in a message's words (`observe` → "reading the lease"): the
/// primitives' names are for metrics and code, not for the person who reads the error.
pub(super) fn doing(op: &str) -> &str {
    match op {
        "acquire" => "taking the lease",
        "renew" => "renewing the lease",
        "release" => "releasing the lease",
        "observe" => "reading the lease",
        "handover" => "asking for a handover",
        "remove" => "removing the lease's keys",
        "info" => "reading the server's INFO",
        "subscribe" => "subscribing to the release channel",
        "ping" | "probe" => "checking the release channel",
        other => other,
    }
}

/// ` within 667ms` (whole milliseconds, up), or nothing for a bound not known (the client's own).
pub(super) fn within(after: Duration) -> String {
    if after.is_zero() {
        String::new()
    } else {
        let ms = Duration::from_millis(after.as_micros().div_ceil(1000) as u64);
        format!(" within {ms:?}")
    }
}

/// What the client library said, without its type names: a server's refusal as Redis words it
/// (`NOAUTH Authentication required.`, not `"NOAUTH": Authentication required.`), and the
/// library's own errors without their kind (`… - Server(ResponseError): …`).
pub(super) fn said(err: &RedisError) -> String {
    let shown = err.to_string();
    let kind = format!(" - {:?}", err.kind());
    if shown.contains(&kind) {
        return shown.replacen(&kind, "", 1);
    }
    match (err.code(), err.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        _ => shown,
    }
}

/// The words of a wrong-type error: the keys found holding another type, or all of them when
/// none was found (the look-up failed, or the key changed since).
pub(super) fn wrong_type_words(lease: &str, keys: &[String], found: &[(String, String)]) -> String {
    if found.is_empty() {
        return format!(
            "a key of lease `{lease}` holds another type than a string ({})",
            keys.join(", ")
        );
    }
    let found: Vec<String> = found
        .iter()
        .map(|(key, kind)| format!("`{key}` holds a {kind}"))
        .collect();
    format!("{}, not a string", found.join(" and "))
}

/// The code of the error a script ran into, which Redis 6.2 words as the script's own `ERR`
/// (`Error running script (call to f_…): @user_script:1: WRONGTYPE …`, at times with another
/// `@user_script: 1:` and a `-` before the code); `None` for words that start with no code.
pub(super) fn script_code(detail: &str) -> Option<&str> {
    let (_, inner) = detail.split_once("Error running script")?;
    let word = inner
        .rsplit("@user_script")
        .next()?
        .trim_start_matches([':', ' '])
        .trim_start_matches(|c: char| c.is_ascii_digit())
        .trim_start_matches([':', ' ', '-']);
    let code = word.split(' ').next()?;
    (!code.is_empty() && code.bytes().all(|b| b.is_ascii_uppercase())).then_some(code)
}

/// Whether Redis's message says a command leasehold's scripting needs is unknown to it:
/// `EVALSHA`, `EVAL` or `SCRIPT` itself (`unknown command `evalsha``, quoted with backticks
/// or quotes by the version), or one that a script calls (`Unknown Redis command called from
/// script` on 7.0, `… from Lua script` on 6.2, `Unknown command called from script` on Valkey).
pub(super) fn missing_scripting(detail: &str) -> bool {
    let d = detail.to_ascii_lowercase();
    if [
        "unknown redis command called from",
        "unknown command called from",
    ]
    .iter()
    .any(|w| d.contains(w))
    {
        return true;
    }
    let Some(rest) = d.split("unknown command ").nth(1) else {
        return false;
    };
    let command = rest
        .trim_start_matches(['`', '\'', '"'])
        .split(['`', '\'', '"', ',', ' '])
        .next()
        .unwrap_or_default();
    matches!(command, "evalsha" | "eval" | "script")
}

/// Whether a client error comes from the TLS layer (rustls words its errors this way); not a
/// connection closed without TLS's close_notify (a server that died, a proxy that cut it).
pub(super) fn looks_like_tls(detail: &str) -> bool {
    let d = detail.to_ascii_lowercase();
    !d.contains("close_notify")
        && [
            "certificate",
            "tls",
            "handshake",
            "peer sent no certificates",
            "unknownissuer",
        ]
        .iter()
        .any(|w| d.contains(w))
}

/// `url` with every password in it (user info, or a `password=` or, for a Unix socket, `pass=`
/// query parameter) replaced by `***`, for messages and logs.
pub fn redact_url(url: &str) -> String {
    redact_userinfo(&redact_query_password(url))
}

fn redact_query_password(url: &str) -> String {
    let Some(query_start) = url.find('?') else {
        return url.to_owned();
    };
    let (head, query) = url.split_at(query_start + 1);
    let params: Vec<String> = query
        .split('&')
        .map(|param| match param.split_once('=') {
            Some((name, _))
                if name.eq_ignore_ascii_case("password") || name.eq_ignore_ascii_case("pass") =>
            {
                format!("{name}=***")
            }
            _ => param.to_owned(),
        })
        .collect();
    format!("{head}{}", params.join("&"))
}

fn redact_userinfo(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        // A URL a slash short (`redis:/:pw@host`): after its scheme's `:`, whatever comes before
        // its last `@` may be a password. Words without a scheme (`deploy@host`) stay whole.
        let scheme = url.split_once(':').map(|(s, _)| s).filter(|s| {
            s.starts_with(|c: char| c.is_ascii_alphabetic())
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
        });
        return match (scheme, url.rfind('@')) {
            (Some(s), Some(at)) if s.len() < at => format!("{s}:***{}", &url[at..]),
            _ => url.to_owned(),
        };
    };
    let rest_start = scheme_end + 3;
    // The user info ends at the last `@`, not at the first `/`, `?` or `#`: a password that
    // holds one unencoded breaks the URL, and must not show in the refusal. An `@` in a Unix
    // socket's `user=` parameter ends nothing.
    let mut end = url.len();
    let at = loop {
        let Some(at) = url[rest_start..end].rfind('@').map(|i| rest_start + i) else {
            return url.to_owned();
        };
        match url[..at].rfind(['?', '&']) {
            Some(param) if param >= rest_start && url[param + 1..at].starts_with("user=") => {
                end = param
            }
            _ => break at,
        }
    };
    let userinfo = &url[rest_start..at];
    let redacted = match userinfo.find(':') {
        Some(colon) => format!("{}:***", &userinfo[..colon]),
        // `redis://secret@host` puts the password where the user goes.
        None if !userinfo.is_empty() => "***".to_owned(),
        None => String::new(),
    };
    format!("{}{}{}", &url[..rest_start], redacted, &url[at..])
}
