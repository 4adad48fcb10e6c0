//! Files that hold a secret (a mounted Secret's password or key): the one rule for reading one,
//! used by the command line at start, and the Redis password file that the lease asks again
//! when Redis refuses the password ([`PasswordFile`]). The password itself is never logged.
//! The bound on what is read ([`read_bounded`]) holds for the `--config` file too.

use std::fs::OpenOptions;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use nix::fcntl::{FcntlArg, OFlag, fcntl};
use tracing::{info, warn};

use crate::lease::{PasswordSource, Secret};

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
    /// The file is larger than any secret or certificate file (named by mistake: a log, a disk).
    #[error("is larger than 1 MiB, more than any secret or certificate file")]
    TooLarge,
    /// A pipe that gave nothing: waiting for a writer could last for ever.
    #[error("is a pipe with nothing written to it: it is read once, without waiting for a writer")]
    Unwritten,
}

/// The most read of a secret's file: a bundle of CA certificates is a few hundred KiB.
const MAX_LEN: u64 = 1 << 20;

/// The bytes of a file a flag names, at most 1 MiB of them: a larger one (a log, a
/// device such as `/dev/zero`) is refused, not read whole. Opened without waiting for a writer,
/// then read to the end: a pipe with one (`<(…)`) is read, one without is refused.
pub fn read_bounded(path: &Path) -> Result<Vec<u8>, SecretFileError> {
    let nonblocking = OFlag::O_NONBLOCK.bits();
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(nonblocking)
        .open(path)?;
    fcntl(&file, FcntlArg::F_SETFL(OFlag::empty())).map_err(std::io::Error::from)?;
    let mut bytes = Vec::new();
    (&file).take(MAX_LEN + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_LEN {
        return Err(SecretFileError::TooLarge);
    }
    if bytes.is_empty() && file.metadata()?.file_type().is_fifo() {
        return Err(SecretFileError::Unwritten);
    }
    Ok(bytes)
}

/// The bytes of a file that must not be empty (whitespace alone counts as empty).
pub fn read_nonempty(path: &Path) -> Result<Vec<u8>, SecretFileError> {
    let bytes = read_bounded(path)?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(SecretFileError::Empty);
    }
    Ok(bytes)
}

/// The secret a file holds, trailing newlines removed.
pub fn read_secret(path: &Path) -> Result<Secret, SecretFileError> {
    let text = String::from_utf8(read_nonempty(path)?).map_err(|_| SecretFileError::NotText)?;
    Ok(Secret::new(text.trim_end_matches(['\n', '\r'])))
}

/// The file `--redis-password-file` names: Kubernetes updates a mounted Secret's file in place,
/// so a rotated password reaches a running replica without a restart. Read only after a
/// refusal (never polled).
#[derive(Debug)]
pub struct PasswordFile(pub PathBuf);

impl PasswordSource for PasswordFile {
    fn changed(&self, in_use: Option<&Secret>) -> Option<Secret> {
        let path = self.0.display();
        let read = match read_secret(&self.0) {
            Ok(read) => read,
            Err(error) => {
                warn!(%path, %error, "cannot read the Redis password file again; keeping the password in use");
                return None;
            }
        };
        if in_use == Some(&read) {
            return None;
        }
        info!(%path, "read the Redis password file again: it holds a new password");
        Some(read)
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
            let got = read_secret(&file(name, bytes));
            match want {
                Ok(secret) => assert_eq!(got.unwrap().expose(), secret, "{name}"),
                Err(words) => assert_eq!(got.unwrap_err().to_string(), words, "{name}"),
            }
        }
        let missing = read_secret(&dir.path().join("missing")).unwrap_err();
        assert!(
            missing.to_string().starts_with("cannot read it: "),
            "{missing}"
        );
    }

    #[test]
    fn only_a_password_other_than_the_one_in_use_is_handed_out() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("password");
        std::fs::write(&path, "old\n").unwrap();
        let file = PasswordFile(path.clone());
        let old = Secret::new("old");
        assert_eq!(file.changed(Some(&old)), None, "the same password");
        std::fs::write(&path, "new\n").unwrap();
        let new = file.changed(Some(&old));
        assert_eq!(new.as_ref().map(Secret::expose), Some("new"));
        assert_eq!(file.changed(new.as_ref()), None, "new is in use now");
        assert_eq!(file.changed(None).as_ref().map(Secret::expose), Some("new"));
        std::fs::remove_file(&path).unwrap();
        assert_eq!(
            file.changed(Some(&old)),
            None,
            "an unreadable file keeps the one in use"
        );
    }
}
