//! `--status-file`: the elector's status kept in a file for apps that share a volume with
//! leasehold (docs/REFERENCE.md, "The status file"; [`document`] says what it holds). A watcher
//! like an event stream's, with a bounded buffer: a disk so slow that it falls behind makes it
//! start again from the current status, never holds the elector back.

pub mod document;

use std::path::{Path, PathBuf};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

pub use document::StatusDocument;

use crate::board::{Shown, Watchers};
use crate::elector::Role;
use crate::lease::LeaseName;
use crate::owned_file::{ClaimError, FileClaim, replace};

/// Events the file may fall behind by before it skips to the current status.
const FILE_BUFFER: usize = 64;

/// The status file of one leasehold process, claimed for it.
#[derive(Debug)]
pub struct StatusFile {
    path: PathBuf,
    claim: FileClaim,
}

impl StatusFile {
    /// Claims `path` for this process (writing `lease`); refused while another live leasehold
    /// writes it.
    pub fn claim(path: PathBuf, lease: &LeaseName) -> Result<Self, ClaimError> {
        // This format's, or 0.1.0's (`/leader`'s JSON).
        let ours = |head: &[u8]| {
            head.starts_with(br#"{"format":"leasehold-status"#)
                || head.starts_with(br#"{"identity":"#)
        };
        let claim = FileClaim::claim(&path, &format!("lease {lease}"), ours)?;
        Ok(Self { path, claim })
    }

    /// Starts the writer; it writes the current status at once, then every event in order and
    /// every renewal seen on `status` (the elector's), and stops after the elector's last event
    /// (or at `stop`, after writing what it had). The claim is released when it stops.
    pub fn spawn<R>(
        self,
        watchers: &Watchers,
        mut status: watch::Receiver<Shown>,
        render: R,
        stop: CancellationToken,
    ) -> tokio::task::JoinHandle<()>
    where
        R: Fn(&Shown) -> String + Send + 'static,
    {
        let watchers = watchers.clone();
        tokio::spawn(async move {
            let Self { path, claim } = self;
            let _claim = claim;
            let mut writer = Writer {
                path,
                failing: false,
            };
            let mut events = watchers.subscribe(FILE_BUFFER);
            // The status written last: a renewal is written only on top of the same term.
            let mut written: Option<Shown> = None;
            let mut renewals = true;
            loop {
                tokio::select! {
                    biased;
                    event = events.recv() => match event {
                        Some(event) => {
                            writer.write(render(&event.status)).await;
                            written = Some(event.status);
                        }
                        // Dropped for falling behind (a slow disk): start again from the current status.
                        None if !watchers.is_closed() => events = watchers.subscribe(FILE_BUFFER),
                        None => return,
                    },
                    changed = status.changed(), if renewals => {
                        if changed.is_err() {
                            renewals = false;
                            continue;
                        }
                        let now = status.borrow_and_update().clone();
                        if written.as_ref().is_some_and(|w| renewed(w, &now)) {
                            writer.write(render(&now)).await;
                            written = Some(now);
                        }
                    },
                    _ = stop.cancelled() => {
                        let mut last = None;
                        while let Ok(event) = events.try_recv() {
                            last = Some(event.status);
                        }
                        if let Some(event) = last {
                            writer.write(render(&event)).await;
                        }
                        return;
                    }
                }
            }
        })
    }
}

/// Whether `now` is `written` with only the term's deadline moved on: the same term, the same
/// candidacy. Anything else is an event, written in its order by the watcher; writing it here
/// could put it before an event still queued.
fn renewed(written: &Shown, now: &Shown) -> bool {
    match (&written.role, &now.role) {
        (
            Role::Leader {
                token: was,
                valid_until: before,
                ..
            },
            Role::Leader {
                token, valid_until, ..
            },
            // Forward, or back: a renewal that found Redis's clock fast ends the term sooner.
        ) => was == token && valid_until != before && written.candidacy == now.candidacy,
        _ => false,
    }
}

/// The file, and whether the last write failed (said once per run of failures).
struct Writer {
    path: PathBuf,
    failing: bool,
}

impl Writer {
    /// Writes on the blocking pool: a slow disk must not hold up a runtime worker that the
    /// elector's watchdog may need.
    async fn write(&mut self, json: String) {
        let path = self.path.clone();
        let written = tokio::task::spawn_blocking(move || write_atomically(&path, json.as_bytes()))
            .await
            .unwrap_or_else(|join| Err(std::io::Error::other(join.to_string())));
        match written {
            Ok(()) if self.failing => {
                debug!(path = %self.path.display(), "the status file is written again");
                self.failing = false;
            }
            Ok(()) => {}
            Err(err) if !self.failing => {
                warn!(path = %self.path.display(), error = %err, "cannot write the status file");
                self.failing = true;
            }
            Err(_) => {}
        }
    }
}

/// Replaces the file at `path` with `json` and a newline ([`replace`]).
pub fn write_atomically(path: &Path, json: &[u8]) -> std::io::Result<()> {
    replace(path, &[json, b"\n"].concat())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_replaces_the_whole_file_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("leader.json");
        write_atomically(&path, b"{\"role\":\"leader\"}").unwrap();
        write_atomically(&path, b"{}").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{}\n");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("leader.json")]);
    }

    #[test]
    fn a_symlink_planted_where_the_next_file_is_written_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("leader.json");
        // The temporary file's name, and the one it had before (with this process's id).
        let names = [
            ".leader.json.next",
            &format!(".leader.json.{}.tmp", std::process::id()),
        ];
        for name in names {
            let victim = dir.path().join(format!("victim{name}"));
            std::fs::write(&victim, "kept").unwrap();
            std::os::unix::fs::symlink(&victim, dir.path().join(name)).unwrap();
        }
        write_atomically(&path, b"{}").unwrap();
        for name in names {
            let victim = dir.path().join(format!("victim{name}"));
            let kept = std::fs::read_to_string(&victim).unwrap();
            assert_eq!(kept, "kept", "the write went through the symlink at {name}");
        }
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{}\n");
    }

    #[test]
    fn a_write_into_a_missing_directory_fails_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gone").join("leader.json");
        assert!(write_atomically(&path, b"{}").is_err());
    }
}
