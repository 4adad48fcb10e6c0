//! Files that flags name and that hold secrets or certificates: read once at start, refused when
//! unreadable, empty or of the wrong kind, and never shown, by the one rule of
//! [`secret_file`](crate::secret_file).

use std::path::Path;

use super::CliError;
use crate::lease::Secret;
use crate::secret_file::{SecretFileError, read_nonempty};

/// The refusal of the file `path` that `flag` names.
fn refused<'a>(flag: &'static str, path: &'a Path) -> impl Fn(SecretFileError) -> CliError + 'a {
    move |e| CliError::File {
        flag,
        path: path.to_owned(),
        rule: e.to_string(),
    }
}

/// A secret from a file, trailing newlines removed.
pub(super) fn read_secret(flag: &'static str, path: &Path) -> Result<Secret, CliError> {
    crate::secret_file::read_secret(path).map_err(refused(flag, path))
}

/// A PEM file: must hold at least one `-----BEGIN` block.
pub(super) fn read_pem(flag: &'static str, path: &Path) -> Result<Vec<u8>, CliError> {
    let bytes = read_nonempty(path).map_err(refused(flag, path))?;
    if !bytes.windows(10).any(|w| w == b"-----BEGIN") {
        return Err(CliError::File {
            flag,
            path: path.to_owned(),
            rule: "is not PEM (no -----BEGIN block)".into(),
        });
    }
    Ok(bytes)
}
