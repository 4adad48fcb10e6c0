//! A directory on a filesystem of its own, a small tmpfs, that can be filled to its last page,
//! as a `/dev/shm` or a volume that another program filled: a write of anything new there then
//! fails with ENOSPC. Unmounted when dropped.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The filesystem's size: a few pages, filled in a moment.
const SIZE: &str = "size=64k";

/// A mounted directory that can be filled.
pub struct FullDir {
    root: tempfile::TempDir,
}

impl FullDir {
    /// Mounts a fresh, empty tmpfs; panics (naming the command) when it cannot (`mount` needs
    /// root, as the tests have on these machines).
    pub fn mount() -> Self {
        let root = tempfile::tempdir().expect("a temporary directory");
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", SIZE, "tmpfs"])
            .arg(root.path())
            .status()
            .expect("run mount");
        assert!(
            status.success(),
            "mount -t tmpfs -o {SIZE} tmpfs {}: {status}",
            root.path().display()
        );
        Self { root }
    }

    /// The mounted directory.
    pub fn path(&self) -> &Path {
        self.root.path()
    }

    fn filler(&self) -> PathBuf {
        self.path().join(".filler")
    }

    /// Fills what is left with zeros: from then on a write that needs a new page fails.
    pub fn fill(&self) {
        let mut file = std::fs::File::create(self.filler()).expect("create the filler");
        let page = [0u8; 4096];
        loop {
            match file.write(&page) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(nix::libc::ENOSPC) => break,
                Err(e) => panic!("fill {}: {e}", self.filler().display()),
            }
        }
    }

    /// Frees the space that [`fill`](Self::fill) took.
    pub fn free(&self) {
        std::fs::remove_file(self.filler()).expect("remove the filler");
    }
}

impl Drop for FullDir {
    fn drop(&mut self) {
        // Lazily: a process of the test may still hold a file open there.
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.root.path())
            .status();
    }
}
