//! Files that flags name and that hold secrets or certificates: read once, refused when
//! unreadable, empty or of the wrong kind, and never shown.

use std::path::Path;

use super::CliError;
use crate::lease::Secret;

/// Reads a file a flag names; refuses an unreadable or empty one.
pub(super) fn read_file(flag: &'static str, path: &Path) -> Result<Vec<u8>, CliError> {
    let bytes = std::fs::read(path).map_err(|e| CliError::File {
        flag,
        path: path.to_owned(),
        rule: format!("cannot read it: {e}"),
    })?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(CliError::File {
            flag,
            path: path.to_owned(),
            rule: "the file is empty".into(),
        });
    }
    Ok(bytes)
}

/// A secret from a file, trailing newlines removed.
pub(super) fn read_secret(flag: &'static str, path: &Path) -> Result<Secret, CliError> {
    let bytes = read_file(flag, path)?;
    let text = String::from_utf8(bytes).map_err(|_| CliError::File {
        flag,
        path: path.to_owned(),
        rule: "is not UTF-8 text".into(),
    })?;
    Ok(Secret::new(text.trim_end_matches(['\n', '\r'])))
}

/// A PEM file: must hold at least one `-----BEGIN` block.
pub(super) fn read_pem(flag: &'static str, path: &Path) -> Result<Vec<u8>, CliError> {
    let bytes = read_file(flag, path)?;
    if !bytes.windows(10).any(|w| w == b"-----BEGIN") {
        return Err(CliError::File {
            flag,
            path: path.to_owned(),
            rule: "is not PEM (no -----BEGIN block)".into(),
        });
    }
    Ok(bytes)
}
