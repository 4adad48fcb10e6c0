//! The Redis password file, read again when Redis refuses the password: Kubernetes updates a
//! mounted Secret's file in place, so a rotated password reaches a running replica without a
//! restart. Read only on a refusal (never polled), and the password itself is never logged.

use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};

use tracing::{info, warn};

use super::Secret;

/// The file `--redis-password-file` names, and the password in use.
#[derive(Debug)]
pub(crate) struct PasswordFile {
    path: PathBuf,
    in_use: Mutex<Option<Secret>>,
}

impl PasswordFile {
    pub(crate) fn new(path: PathBuf, in_use: Option<Secret>) -> Self {
        Self {
            path,
            in_use: Mutex::new(in_use),
        }
    }

    /// After Redis refused the password: the file's password when it is not the one in use
    /// (from then on it is), or `None` when it is the same or the file cannot be read now.
    pub(crate) fn reread(&self) -> Option<Secret> {
        let path = self.path.display();
        let read = match Secret::from_file(&self.path) {
            Ok(read) => read,
            Err(error) => {
                warn!(%path, %error, "cannot read the Redis password file again; keeping the password in use");
                return None;
            }
        };
        let mut in_use = self.in_use.lock().unwrap_or_else(PoisonError::into_inner);
        if in_use.as_ref() == Some(&read) {
            return None;
        }
        *in_use = Some(read.clone());
        info!(%path, "read the Redis password file again: it holds a new password");
        Some(read)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_new_password_in_the_file_is_handed_out() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("password");
        std::fs::write(&path, "old\n").unwrap();
        let file = PasswordFile::new(path.clone(), Some(Secret::new("old")));
        assert_eq!(file.reread(), None, "the same password");
        std::fs::write(&path, "new\n").unwrap();
        assert_eq!(
            file.reread().map(|s| s.expose().to_owned()),
            Some("new".into())
        );
        assert_eq!(file.reread(), None, "new is in use now");
        std::fs::remove_file(&path).unwrap();
        assert_eq!(
            file.reread(),
            None,
            "an unreadable file keeps the one in use"
        );
    }
}
