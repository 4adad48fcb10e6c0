//! One file, one live writer: a file that tells readers about leadership (the guard file, the
//! status file) is claimed by the leasehold that writes it, and a second one is refused.
//!
//! Two leaseholds writing one such file would each tell the other's readers about their own
//! term: the frozen leader's command, asking its guard file, would be told yes for its
//! successor's term (docs/DESIGN.md, "Readers outside leasehold"). So the writer holds an
//! exclusive `flock` on a lock file beside the file for as long as it lives:
//!
//! - beside the file, not on it: the file is replaced by a rename at every update, and a lock on
//!   it would stay on the inode the next rename unlinks;
//! - `flock`, not a pid file alone: the kernel drops the lock when its holder dies (SIGKILL, OOM),
//!   so a dead leasehold never blocks the next one (its lock file stays, to be taken over);
//! - close-on-exec (std opens every file so): the command that leasehold starts does not inherit
//!   the lock, so a command that outlives a killed leasehold does not keep the file claimed.
//!
//! The lock file holds the owner's pid and a few words about it, for the refusal's message.
//! Each update is a whole new file renamed over the old one ([`replace`]).

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

/// The longest a shutdown or a step-down waits for one write of such a file: on a filesystem
/// that stopped answering (a hung network or FUSE volume) it goes on without it.
pub const WRITE_BOUND: std::time::Duration = std::time::Duration::from_secs(1);

/// How often a claim starts again when the lock file it locked was unlinked in between (its
/// owner leaving at that instant); more would mean someone keeps replacing it.
const ATTEMPTS: usize = 8;

/// Why a file could not be claimed.
#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    /// Another live process holds the claim.
    #[error(
        "another live leasehold writes this file: {holder}; one file is written by one leasehold, else each would tell the other's readers about its own term (give each its own file)"
    )]
    Owned {
        /// Who: `pid N (…)` as the lock file says.
        holder: String,
    },
    /// The path holds what no leasehold wrote: a write would replace it.
    #[error(
        "holds {what}, which leasehold did not write: its writes would replace it; name a path of its own"
    )]
    Foreign { what: String },
    /// The lock file could not be created, locked or written.
    #[error("cannot lock it through {path}: {source}")]
    Io {
        /// The lock file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// The claim on one file: released (and its lock file removed) on drop, or by the kernel when
/// the process dies.
#[derive(Debug)]
pub struct FileClaim {
    /// The lock file beside the claimed file.
    path: PathBuf,
    /// Held, never read: the claim is this lock.
    _lock: Flock<File>,
}

impl FileClaim {
    /// Claims `file` for this process; `about` says who claims it (for a refused process's
    /// message), for example `lease shop/web`. What stands at `file` must be nothing, an empty
    /// file, or a file whose first KiB `is_ours` (as each format of such a file starts): anything
    /// else is refused ([`ClaimError::Foreign`]).
    pub fn claim(file: &Path, about: &str, is_ours: fn(&[u8]) -> bool) -> Result<Self, ClaimError> {
        let claimed = file;
        let path = beside(file, ".lock").ok_or_else(|| ClaimError::Io {
            path: file.to_owned(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a file name"),
        })?;
        let io = |source| ClaimError::Io {
            path: path.clone(),
            source,
        };
        for _ in 0..ATTEMPTS {
            // O_NOFOLLOW: a symlink planted in a shared directory (/dev/shm, /tmp) is refused,
            // not followed to a file of someone else's.
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o644)
                .custom_flags(nix::libc::O_NOFOLLOW)
                .open(&path)
                .map_err(io)?;
            let mut lock = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                Ok(lock) => lock,
                Err((file, Errno::EWOULDBLOCK)) => {
                    return Err(ClaimError::Owned {
                        holder: holder(&file),
                    });
                }
                Err((_, errno)) => return Err(io(errno.into())),
            };
            // The owner before us unlinks the lock file before it lets go: a lock taken on the
            // unlinked file claims nothing, since the next process opens a new one.
            let ours = lock.metadata().map_err(io)?;
            match std::fs::symlink_metadata(&path) {
                Ok(now) if (now.dev(), now.ino()) == (ours.dev(), ours.ino()) => {}
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io(e)),
            }
            // A hard link planted in a shared directory passes O_NOFOLLOW: refused, not
            // truncated (nor a FIFO or a device).
            if !ours.is_file() || ours.nlink() != 1 {
                return Err(io(std::io::Error::other(format!(
                    "not a regular file of one link ({} links): a lock file planted by another is refused, not written",
                    ours.nlink()
                ))));
            }
            lock.set_len(0).map_err(io)?;
            lock.write_all(format!("{} {about}\n", std::process::id()).as_bytes())
                .map_err(io)?;
            // Judged under the lock, so that no leasehold writes it meanwhile; the claim goes
            // with an error.
            let claim = Self { path, _lock: lock };
            return foreign(claimed, is_ours)
                .map_or(Ok(claim), |what| Err(ClaimError::Foreign { what }));
        }
        Err(io(std::io::Error::other(
            "the lock file was replaced at every attempt",
        )))
    }
}

impl FileClaim {
    /// Removes the lock file while still locked, as the drop does: also for a process about to
    /// exit without drops, whose lock the kernel then lets go.
    pub fn unlink(&self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Drop for FileClaim {
    fn drop(&mut self) {
        // Unlinked while still locked (see `claim`); the lock goes with `self._lock` after this.
        self.unlink();
    }
}

/// What stands at `file` that no leasehold wrote, if anything (see [`FileClaim::claim`]).
fn foreign(file: &Path, ours: fn(&[u8]) -> bool) -> Option<String> {
    let kind = std::fs::symlink_metadata(file).ok()?.file_type();
    let what = match kind {
        kind if kind.is_symlink() => "a symbolic link".to_owned(),
        kind if kind.is_dir() => "a directory".to_owned(),
        kind if !kind.is_file() => "a device, FIFO or socket".to_owned(),
        _ => {
            // Neither followed nor waited on, should the path change in between.
            let flags = nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK;
            let opened = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(flags)
                .open(file);
            let mut head = Vec::new();
            match opened.and_then(|f| f.take(1024).read_to_end(&mut head)) {
                Ok(_) if head.is_empty() || ours(&head) => return None,
                Ok(_) => "a file of another program".to_owned(),
                Err(e) => format!("a file it cannot read ({e})"),
            }
        }
    };
    Some(what)
}

/// `.<name><suffix>` beside `file`.
pub fn beside(file: &Path, suffix: &str) -> Option<PathBuf> {
    let name = file.file_name().filter(|n| !n.is_empty())?;
    let mut hidden = std::ffi::OsString::from(".");
    hidden.push(name);
    hidden.push(suffix);
    Some(file.with_file_name(hidden))
}

/// Replaces `file` with `bytes`: written to `.<name>.next` beside it, then renamed over it, so a
/// reader that opens the path gets the old file or the new one, whole. A file already at that
/// name (left by a crash, or a symlink planted in a shared directory) is removed, and the new one
/// created exclusively: `O_EXCL` follows no symlink. No fsync: both files are for readers on the
/// same machine, and a rename is atomic for them without one.
pub fn replace(file: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let next = beside(file, ".next")
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a file name"))?;
    match std::fs::remove_file(&next) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(&next)
        .and_then(|mut f| f.write_all(bytes));
    if let Err(err) = written.and_then(|()| std::fs::rename(&next, file)) {
        let _ = std::fs::remove_file(&next);
        return Err(err);
    }
    Ok(())
}

/// `pid N (about)` from the lock file's line `N about`.
fn holder(file: &File) -> String {
    let mut text = String::new();
    // A short read or garbage only makes the message vaguer.
    let _ = file.take(1024).read_to_string(&mut text);
    let line = text.lines().next().unwrap_or("").trim();
    let (pid, about) = line.split_once(' ').unwrap_or((line, ""));
    match pid.parse::<u32>() {
        Ok(pid) if pid == std::process::id() && about.is_empty() => {
            format!("pid {pid} (this process)")
        }
        Ok(pid) if pid == std::process::id() => format!("pid {pid} (this process, {about})"),
        Ok(pid) if about.is_empty() => format!("pid {pid}"),
        Ok(pid) => format!("pid {pid} ({about})"),
        Err(_) => "a process that has not written its pid yet".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_claim_is_refused_naming_the_first_and_the_file_is_free_once_released() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("guard");
        let first = FileClaim::claim(&file, "lease shop/web", |_| true).unwrap();
        assert_eq!(first.path, dir.path().join(".guard.lock"));
        let err = FileClaim::claim(&file, "lease shop/web", |_| true).unwrap_err();
        let said = err.to_string();
        let pid = std::process::id();
        assert!(
            said.contains(&format!("pid {pid} (this process, lease shop/web)")),
            "{said}"
        );
        assert!(
            said.contains("one file is written by one leasehold"),
            "{said}"
        );
        drop(first);
        assert!(
            !dir.path().join(".guard.lock").exists(),
            "removed on release"
        );
        let again = FileClaim::claim(&file, "lease other", |_| true).unwrap();
        drop(again);
    }

    #[test]
    fn a_symlink_in_place_of_the_lock_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, "keep\n").unwrap();
        std::os::unix::fs::symlink(&target, dir.path().join(".guard.lock")).unwrap();
        let err = FileClaim::claim(&dir.path().join("guard"), "x", |_| true).unwrap_err();
        assert!(matches!(err, ClaimError::Io { .. }), "{err}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep\n");
    }

    #[test]
    fn the_holder_is_read_from_the_lock_file() {
        let dir = tempfile::tempdir().unwrap();
        let read = |text: &str| {
            let path = dir.path().join("lock");
            std::fs::write(&path, text).unwrap();
            holder(&File::open(&path).unwrap())
        };
        assert_eq!(read("1 lease a/b\n"), "pid 1 (lease a/b)");
        assert_eq!(read("1\n"), "pid 1");
        assert_eq!(read(""), "a process that has not written its pid yet");
        assert_eq!(read("x y\n"), "a process that has not written its pid yet");
    }
}
