//! The writer of the guard file: where it lives, claiming it, publishing a term, zeroing it,
//! removing it.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use leasehold_core::locked::locked;

use super::{GuardError, GuardRecord};
use crate::clock::{BootInstant, WallLead};
use crate::lease::{FencingToken, LeaseName};
use crate::owned_file::{FileClaim, replace};

/// The guard file of one leasehold process and one lease. Claimed for this process (a second
/// live leasehold given the same path is refused) and created with the zeroed record; removed,
/// and the claim released, on drop.
///
/// Every update replaces the whole file ([`replace`]), so that a reader that opens the path
/// reads one complete record (docs/REFERENCE.md, "The format").
#[derive(Debug)]
pub struct GuardFile {
    path: PathBuf,
    lease: LeaseName,
    /// Serialises updates, which share the file beside; once the file ended at exit
    /// ([`end_at_exit`](Self::end_at_exit)), whether it is gone, and nothing touches it more.
    writing: Mutex<Option<bool>>,
    /// Released last (fields drop after `Drop::drop` removed the file): the file is gone before
    /// another leasehold may claim the path.
    _claim: FileClaim,
}

impl GuardFile {
    /// The guard file of `lease` at `path`, claimed for this process and created (or replaced)
    /// with the zeroed record. Refused ([`GuardError::Unclaimable`]) while another live
    /// leasehold writes it.
    pub fn create(path: impl Into<PathBuf>, lease: &LeaseName) -> Result<Self, GuardError> {
        let path = path.into();
        if path.file_name().is_none_or(|n| n.is_empty()) {
            return Err(GuardError::Unwritable {
                path,
                source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a file name"),
            });
        }
        let claim = match FileClaim::claim(&path, &format!("lease {lease}"), |head| {
            head.starts_with(super::record::MAGIC.as_bytes())
        }) {
            Ok(claim) => claim,
            Err(source) => return Err(GuardError::Unclaimable { path, source }),
        };
        let guard = Self {
            path,
            lease: lease.clone(),
            writing: Mutex::new(None),
            _claim: claim,
        };
        guard.revoke().map_err(|source| GuardError::Unwritable {
            path: guard.path.clone(),
            source,
        })?;
        Ok(guard)
    }

    /// A guard file for `lease` named after the lease and this process, in the first of
    /// `$XDG_RUNTIME_DIR`, `/dev/shm` (both tmpfs as a rule) and the temporary directory where
    /// one can be created.
    pub fn in_runtime_dir(lease: &LeaseName) -> Result<Self, GuardError> {
        let mut dirs = Vec::new();
        if let Some(dir) = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
            dirs.push(PathBuf::from(dir));
        }
        dirs.push(PathBuf::from("/dev/shm"));
        dirs.push(std::env::temp_dir());
        Self::in_first_of(&dirs, lease)
    }

    /// A guard file for `lease` in the first of `dirs` where one can be created.
    pub fn in_first_of(dirs: &[PathBuf], lease: &LeaseName) -> Result<Self, GuardError> {
        let name = file_name(lease.as_str(), std::process::id());
        let mut last = None;
        for dir in dirs {
            match Self::create(dir.join(&name), lease) {
                Ok(guard) => return Ok(guard),
                Err(err) => last = Some(err),
            }
        }
        Err(last.unwrap_or_else(|| GuardError::Unwritable {
            path: PathBuf::from(&name),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "no directory to put it in"),
        }))
    }

    /// Where the file is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The lease whose terms it publishes.
    pub fn lease(&self) -> &LeaseName {
        &self.lease
    }

    /// Publishes term `token`, valid until `valid_until` on the boot clock, and until the same
    /// instant on the wall clock under `lead`, the wall clock's lead when the call that won or
    /// renewed the term was sent (not now: time the boot clock missed since then, a freeze in
    /// the call's round trip, passes the wall deadline too).
    pub fn publish(
        &self,
        token: FencingToken,
        valid_until: BootInstant,
        lead: WallLead,
    ) -> std::io::Result<()> {
        self.write(&GuardRecord::Term {
            lease: self.lease.clone(),
            token,
            valid_until,
            wall_until: lead.wall_at(valid_until),
        })
    }

    /// Zeroes the record: from now on every check refuses.
    pub fn revoke(&self) -> std::io::Result<()> {
        self.write(&GuardRecord::NoTerm {
            lease: self.lease.clone(),
        })
    }

    fn write(&self, record: &GuardRecord) -> std::io::Result<()> {
        if locked(&self.writing).is_some() {
            return Err(std::io::Error::other("the guard file ended at exit"));
        }
        replace(&self.path, record.encode().as_bytes())
    }

    /// Removes the guard file (also done on drop): whether it is gone. Once it ended at exit,
    /// the path is left alone (it may be another leasehold's by then).
    pub fn remove(&self) -> bool {
        locked(&self.writing).unwrap_or_else(|| gone(&self.path))
    }

    /// Zeroes and removes the file and its lock file, for a process about to exit (at once, on
    /// a second signal, without drops: the claim is let go by the exit alone); nothing touches
    /// the path after it. Whether the file is gone.
    pub fn end_at_exit(&self) -> bool {
        let mut ended = locked(&self.writing);
        if let Some(gone) = *ended {
            return gone;
        }
        let zeroed = GuardRecord::NoTerm {
            lease: self.lease.clone(),
        };
        let _ = replace(&self.path, zeroed.encode().as_bytes());
        let gone = *ended.insert(gone(&self.path));
        self._claim.unlink();
        gone
    }
}

impl Drop for GuardFile {
    fn drop(&mut self) {
        let _ = self.remove();
    }
}

/// Removes `path`: whether it is gone (removed, or not there).
fn gone(path: &Path) -> bool {
    std::fs::remove_file(path).map_or_else(|e| e.kind() == std::io::ErrorKind::NotFound, |()| true)
}

/// The most of the lease name a default guard file's name carries: a file name is at most
/// 255 bytes, and a lease name may be 317.
const LEASE_IN_NAME: usize = 160;

/// `leasehold-guard-<lease>-<pid>`, the lease's characters outside `[A-Za-z0-9._-]` as `_`; a
/// lease name longer than [`LEASE_IN_NAME`] is cut, and a hash of the whole name after the cut
/// keeps two leases cut alike apart.
fn file_name(lease: &str, pid: u32) -> String {
    let mut part: String = lease
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if part.len() > LEASE_IN_NAME {
        let mut hash = std::hash::DefaultHasher::new();
        std::hash::Hash::hash(lease, &mut hash);
        part.truncate(LEASE_IN_NAME - 17);
        part = format!("{part}-{:016x}", std::hash::Hasher::finish(&hash));
    }
    format!("leasehold-guard-{part}-{pid}")
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    use super::*;
    use crate::guard::{
        CallerTerm, GuardError, Refusal, check_guard_file_for_term, read_guard_file,
    };

    fn lease() -> LeaseName {
        LeaseName::new("shop/web").unwrap()
    }

    fn check(path: &Path) -> Result<FencingToken, GuardError> {
        check_guard_file_for_term(path, &CallerTerm::default(), Duration::ZERO)
    }

    #[test]
    fn a_new_guard_file_holds_no_term_and_a_published_one_is_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("guard");
        let guard = GuardFile::create(&path, &lease()).unwrap();
        assert_eq!(
            read_guard_file(&path).unwrap(),
            GuardRecord::NoTerm { lease: lease() }
        );
        assert!(matches!(
            check(&path),
            Err(GuardError::Refused {
                refusal: Refusal::NoTerm,
                ..
            })
        ));
        let until = BootInstant::now().saturating_add(Duration::from_secs(10));
        guard
            .publish(FencingToken(7), until, WallLead::now())
            .unwrap();
        let GuardRecord::Term {
            lease: written,
            token,
            valid_until,
            wall_until,
        } = read_guard_file(&path).unwrap()
        else {
            panic!("a term");
        };
        assert_eq!(
            (written, token, valid_until),
            (lease(), FencingToken(7), until)
        );
        // The wall deadline is as far ahead on the wall clock as the boot deadline on the boot
        // clock.
        let wall_now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        let ahead = Duration::from_nanos(wall_until).saturating_sub(wall_now);
        assert!(
            ahead > Duration::from_millis(9_900) && ahead <= Duration::from_secs(10),
            "{ahead:?}"
        );
        assert_eq!(check(&path).unwrap(), FencingToken(7));
        guard.revoke().unwrap();
        assert!(matches!(
            check(&path),
            Err(GuardError::Refused {
                refusal: Refusal::NoTerm,
                ..
            })
        ));
        drop(guard);
        assert!(!path.exists(), "removed on drop");
        assert!(matches!(check(&path), Err(GuardError::Missing { .. })));
    }

    #[test]
    fn a_second_writer_of_one_guard_file_is_refused_and_the_first_keeps_its_record() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("guard");
        let first = GuardFile::create(&path, &lease()).unwrap();
        let until = BootInstant::now().saturating_add(Duration::from_secs(10));
        first
            .publish(FencingToken(7), until, WallLead::now())
            .unwrap();
        let other = LeaseName::new("shop/api").unwrap();
        let err = GuardFile::create(&path, &other).unwrap_err();
        assert!(
            matches!(err, GuardError::Unclaimable { .. }) && err.is_bad_input(),
            "{err}"
        );
        let said = err.to_string();
        let pid = std::process::id();
        assert!(
            said.contains(&format!("pid {pid} (this process, lease shop/web)")),
            "{said}"
        );
        assert_eq!(check(&path).unwrap(), FencingToken(7), "untouched");
        drop(first);
        let second = GuardFile::create(&path, &other).unwrap();
        assert_eq!(read_guard_file(second.path()).unwrap().lease(), &other);
    }

    #[test]
    fn a_concurrent_reader_never_sees_a_torn_record() {
        let dir = tempfile::tempdir_in(shm_or_tmp()).unwrap();
        let path = dir.path().join("guard");
        let guard = std::sync::Arc::new(GuardFile::create(&path, &lease()).unwrap());
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        // Two records that differ in every digit, so that any mix of them shows.
        let a = (
            FencingToken(1_111_111_111_111_111),
            BootInstant::from_since_boot(Duration::from_nanos(1_111_111_111_111_111)),
        );
        let b = (
            FencingToken(9_999_999_999_999_999),
            BootInstant::from_since_boot(Duration::from_nanos(9_999_999_999_999_999)),
        );
        let writer = {
            let (guard, stop) = (guard.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut i = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let (t, u) = if i.is_multiple_of(2) { a } else { b };
                    guard.publish(t, u, WallLead::now()).unwrap();
                    i += 1;
                }
                i
            })
        };
        let started = std::time::Instant::now();
        let mut reads = 0u64;
        let mut torn = Vec::new();
        while started.elapsed() < Duration::from_secs(2) {
            match read_guard_file(&path) {
                Ok(GuardRecord::Term {
                    token, valid_until, ..
                }) if (token, valid_until) == a || (token, valid_until) == b => {}
                Ok(GuardRecord::NoTerm { .. }) => {}
                other => torn.push(format!("{other:?}")),
            }
            reads += 1;
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let writes = writer.join().unwrap();
        println!("{reads} reads during {writes} writes, none torn");
        assert!(
            torn.is_empty(),
            "{} of {reads} reads during {writes} writes were torn: {:?}",
            torn.len(),
            &torn[..torn.len().min(3)]
        );
        assert!(
            writes > 1000 && reads > 1000,
            "{writes} writes, {reads} reads"
        );
    }

    fn shm_or_tmp() -> PathBuf {
        let shm = PathBuf::from("/dev/shm");
        if shm.is_dir() {
            shm
        } else {
            std::env::temp_dir()
        }
    }

    #[test]
    fn the_default_file_is_named_after_the_lease_and_the_pid_in_the_first_writable_dir() {
        let dir = tempfile::tempdir().unwrap();
        let dirs = [dir.path().join("missing"), dir.path().to_owned()];
        let guard = GuardFile::in_first_of(&dirs, &lease()).unwrap();
        assert_eq!(
            guard.path(),
            dir.path()
                .join(format!("leasehold-guard-shop_web-{}", std::process::id()))
        );
        let err = GuardFile::in_first_of(&dirs[..1], &lease()).unwrap_err();
        assert!(err.is_bad_input(), "{err}");
        assert!(err.to_string().contains("No such file"), "{err}");
    }

    #[test]
    fn a_lease_name_too_long_for_a_file_name_is_cut_and_told_apart_by_a_hash() {
        let longest = |last: char| format!("{}/{}{last}", "n".repeat(63), "x".repeat(252));
        let (a, b) = (
            file_name(&longest('a'), u32::MAX),
            file_name(&longest('b'), u32::MAX),
        );
        // The lock and the next file add a dot and a suffix.
        assert!(format!(".{a}.next").len() <= 255, "{} bytes: {a}", a.len());
        assert_ne!(a, b, "two leases cut alike");
        assert_eq!(file_name("shop/web", 7), "leasehold-guard-shop_web-7");
    }
}
