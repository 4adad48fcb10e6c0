//! Host names of a test's own, seen only by the processes it starts through [`Hosts::command`]:
//! each runs in a private mount namespace (`unshare --mount`) where a file of the test's is
//! bind-mounted over `/etc/hosts`, so the machine's own name resolution is never changed, and
//! the names go through the C library's resolver (getaddrinfo) like any other.
//!
//! One name may stand for several addresses (127.0.0.2, 127.0.0.3, … are all loopback on Linux),
//! as a headless Kubernetes Service does, and [`Hosts::set`] changes them while the processes
//! run (the file is rewritten in place, so the bind mount sees it), as a pod that restarted with
//! another address does. Needs the privilege to make a mount namespace (root here).

use std::path::PathBuf;
use std::process::Command;

/// A hosts file: the machine's own lines, then the test's names.
pub struct Hosts {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl Hosts {
    /// A file where each name of `names` stands for its addresses.
    pub fn new(names: &[(&str, &[&str])]) -> Self {
        let dir = tempfile::tempdir().expect("hosts dir");
        let hosts = Self {
            path: dir.path().join("hosts"),
            _dir: dir,
        };
        hosts.set(names);
        hosts
    }

    /// Makes each name of `names` stand for its addresses from now on (and no other name of
    /// the test's).
    pub fn set(&self, names: &[(&str, &[&str])]) {
        let mut text = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        for (name, addresses) in names {
            for address in *addresses {
                text.push_str(&format!("{address} {name}\n"));
            }
        }
        // In place (one write of a small file), not by rename: the bind mount holds the inode.
        std::fs::write(&self.path, text).expect("write the hosts file");
    }

    /// A command that runs `program` with this file as its `/etc/hosts`; add the program's
    /// arguments to it.
    pub fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new("unshare");
        cmd.args(["--mount", "--", "sh", "-c"])
            .arg("mount --bind \"$1\" /etc/hosts && shift && exec \"$@\"")
            .arg("sh")
            .arg(&self.path)
            .arg(program);
        cmd
    }
}
