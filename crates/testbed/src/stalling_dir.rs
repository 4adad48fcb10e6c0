//! A directory whose filesystem can be made to stop answering, as a network or FUSE volume does
//! when its server hangs: a `fuse-overlayfs` mount in the foreground, frozen with SIGSTOP. A
//! call on a file under it then waits, unanswered, until the mount is thawed or dropped.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nix::sys::signal::Signal;

use crate::child::Guarded;
use crate::wait::wait_for;

/// The longest a freeze lasts: a test that fails while the directory is frozen still ends (its
/// processes, stuck in calls to the directory, cannot be reaped before the thaw).
const THAW_AFTER: Duration = Duration::from_secs(20);

/// A mounted directory whose answers can be stopped; unmounted when dropped.
pub struct StallingDir {
    /// Holds the upper, lower and work directories and the mount point.
    root: tempfile::TempDir,
    daemon: Guarded,
    /// Cleared when dropped: a late thaw leaves a pid that may be another process's alone.
    mounted: Arc<AtomicBool>,
}

impl StallingDir {
    /// Mounts a fresh, empty directory; panics (naming the package) when it cannot.
    pub fn mount() -> Self {
        let root = tempfile::tempdir().expect("a temporary directory");
        for dir in ["lower", "upper", "work", "mnt"] {
            std::fs::create_dir(root.path().join(dir)).expect("a directory of the mount");
        }
        let at = |dir: &str| root.path().join(dir).display().to_string();
        let mut cmd = Command::new("fuse-overlayfs");
        cmd.arg("-f").arg("-o").arg(format!(
            "lowerdir={},upperdir={},workdir={}",
            at("lower"),
            at("upper"),
            at("work")
        ));
        cmd.arg(at("mnt"));
        let daemon = Guarded::spawn(cmd, "fuse-overlayfs")
            .unwrap_or_else(|e| panic!("{e} (apt-get install fuse-overlayfs)"));
        let point = at("mnt");
        let dir = Self {
            root,
            daemon,
            mounted: Arc::new(AtomicBool::new(true)),
        };
        let mounts = || std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        wait_for("the fuse-overlayfs mount", Duration::from_secs(10), || {
            mounts().contains(&format!(" {point} ")).then_some(())
        });
        dir
    }

    /// The mounted directory.
    pub fn path(&self) -> PathBuf {
        self.root.path().join("mnt")
    }

    /// The directory behind the mount, where what the filesystem answered is kept: read there,
    /// a file shows what the mount answers once thawed, also while it is frozen.
    pub fn behind(&self) -> PathBuf {
        self.root.path().join("upper")
    }

    /// Stops the filesystem's answers: every call under [`path`](Self::path) waits from now on,
    /// until [`thaw`](Self::thaw), and at most 20 s.
    pub fn freeze(&self) {
        self.daemon
            .signal(Signal::SIGSTOP)
            .expect("SIGSTOP fuse-overlayfs");
        let (pid, mounted) = (self.daemon.pid(), self.mounted.clone());
        std::thread::spawn(move || {
            std::thread::sleep(THAW_AFTER);
            if mounted.load(Ordering::SeqCst) {
                let _ = nix::sys::signal::kill(pid, Signal::SIGCONT);
            }
        });
    }

    /// Lets the calls waiting, and those to come, be answered again.
    pub fn thaw(&self) {
        let _ = self.daemon.signal(Signal::SIGCONT);
    }

    fn unmount(point: &Path) {
        let _ = Command::new("fusermount3").arg("-uz").arg(point).status();
    }
}

impl Drop for StallingDir {
    fn drop(&mut self) {
        self.thaw();
        self.mounted.store(false, Ordering::SeqCst);
        Self::unmount(&self.path());
    }
}
