//! Files that hold a secret (a mounted Secret's password or key): the one rule for reading one,
//! used by the command line at start and again by a connection whose password Redis refused.

use std::path::Path;

use super::Secret;

/// Why a secret's file was refused. The messages never show the file's content.
#[derive(Debug, thiserror::Error)]
pub enum SecretFileError {
    /// The file could not be read.
    #[error("cannot read it: {0}")]
    Unreadable(#[from] std::io::Error),
    /// The file holds nothing but whitespace.
    #[error("the file is empty")]
    Empty,
    /// The file is not UTF-8 text.
    #[error("is not UTF-8 text")]
    NotText,
}

/// The bytes of a file that must not be empty (whitespace alone counts as empty).
pub fn read_nonempty(path: &Path) -> Result<Vec<u8>, SecretFileError> {
    let bytes = std::fs::read(path)?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(SecretFileError::Empty);
    }
    Ok(bytes)
}

impl Secret {
    /// The secret a file holds, trailing newlines removed.
    pub fn from_file(path: &Path) -> Result<Self, SecretFileError> {
        let text = String::from_utf8(read_nonempty(path)?).map_err(|_| SecretFileError::NotText)?;
        Ok(Self::new(text.trim_end_matches(['\n', '\r'])))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_file_is_read_by_one_rule() {
        let dir = tempfile::tempdir().unwrap();
        let file = |name: &str, bytes: &[u8]| {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).unwrap();
            path
        };
        let cases: [(&str, &[u8], Result<&str, &str>); 5] = [
            ("plain", b"s3cret", Ok("s3cret")),
            ("newline", b"s3cret\r\n\n", Ok("s3cret")),
            ("inner", b"  s3 cret", Ok("  s3 cret")),
            ("blank", b" \n\t", Err("the file is empty")),
            ("binary", b"\xff\xfe", Err("is not UTF-8 text")),
        ];
        for (name, bytes, want) in cases {
            let got = Secret::from_file(&file(name, bytes));
            match want {
                Ok(secret) => assert_eq!(got.unwrap().expose(), secret, "{name}"),
                Err(words) => assert_eq!(got.unwrap_err().to_string(), words, "{name}"),
            }
        }
        let missing = Secret::from_file(&dir.path().join("missing")).unwrap_err();
        assert!(
            missing.to_string().starts_with("cannot read it: "),
            "{missing}"
        );
    }
}
