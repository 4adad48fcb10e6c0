//! A singleton command that asks `leasehold guard` before each write to a resource (a log
//! file), and the judge of that log: which writes of a term came after its validity deadline,
//! on the boot clock.
//!
//! The command is a bash loop. Each line it appends carries two instants read in the shell
//! itself (`$EPOCHREALTIME`, no fork): `t0` just before the check, and `at` just before the
//! append. They are wall-clock instants; [`WallToBoot`] turns them into boot-clock instants with
//! an offset measured by the test (the two clocks run at the same rate; the offset only moves
//! when someone steps the wall clock, which [`WallToBoot::assert_unchanged`] catches).

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use leasehold::clock::BootInstant;
use leasehold::lease::FencingToken;

/// The command: note its start, then every 20 ms check the guard and write, or note the
/// refusal. Needs `OUT` (the resource), `LH` (the leasehold binary) and `MARGIN` (the check's
/// `--valid-for`) in its environment, and `LC_ALL=C` (a decimal point in `$EPOCHREALTIME`).
/// With `trap_term`, SIGTERM is noted (`term` line) and the loop runs on, as a command that
/// takes its grace period to finish would.
pub fn script(trap_term: bool) -> String {
    let trap = if trap_term {
        r#"trap 'echo "term $LEASEHOLD_FENCING_TOKEN $EPOCHREALTIME $EPOCHREALTIME" >> "$OUT"' TERM"#
    } else {
        ""
    };
    format!(
        r#"{trap}
echo "start $LEASEHOLD_FENCING_TOKEN $$ $EPOCHREALTIME" >> "$OUT"
while :; do
  t0=$EPOCHREALTIME
  if "$LH" guard --valid-for "$MARGIN"; then
    echo "write $LEASEHOLD_FENCING_TOKEN $t0 $EPOCHREALTIME" >> "$OUT"
  else
    echo "refused $LEASEHOLD_FENCING_TOKEN $t0 $EPOCHREALTIME" >> "$OUT"
  fi
  sleep 0.02
done"#
    )
}

/// The environment the command needs, for `Replica::spawn_with_env`.
pub fn env<'a>(out: &'a Path, bin: &'a str, margin: &'a str) -> Vec<(&'static str, String)> {
    vec![
        ("OUT", out.display().to_string()),
        ("LH", bin.to_owned()),
        ("MARGIN", margin.to_owned()),
        ("LC_ALL", "C".to_owned()),
    ]
}

/// Wall-clock instants to boot-clock instants.
#[derive(Debug, Clone, Copy)]
pub struct WallToBoot {
    /// Wall clock minus boot clock.
    offset: Duration,
}

impl WallToBoot {
    /// Measures the offset: the tightest of a few adjacent readings of both clocks.
    pub fn measure() -> Self {
        let mut best: Option<(Duration, Duration)> = None;
        for _ in 0..50 {
            let b0 = BootInstant::now();
            let wall = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .expect("after 1970");
            let b1 = BootInstant::now();
            let spread = b1.saturating_duration_since(b0);
            let offset = wall.saturating_sub(b0.since_boot() + spread / 2);
            if best.is_none_or(|(s, _)| spread < s) {
                best = Some((spread, offset));
            }
        }
        Self {
            offset: best.expect("measured").1,
        }
    }

    /// Panics when the wall clock was stepped since `self` was measured (by more than 5 ms):
    /// the conversion would be wrong.
    pub fn assert_unchanged(&self) {
        let now = Self::measure();
        let diff = now.offset.abs_diff(self.offset);
        assert!(
            diff < Duration::from_millis(5),
            "the wall clock moved by {diff:?} against the boot clock during the test"
        );
    }

    /// `seconds.micros` since the epoch (bash's `$EPOCHREALTIME`) on the boot clock.
    pub fn parse(&self, epoch: &str) -> Option<BootInstant> {
        let (secs, micros) = epoch.split_once('.')?;
        let wall =
            Duration::from_secs(secs.parse().ok()?) + Duration::from_micros(micros.parse().ok()?);
        Some(BootInstant::from_since_boot(wall.checked_sub(self.offset)?))
    }
}

/// What a line of the resource says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A command started (`t0` = `at` = its start; `pid` is its process group).
    Start { pid: i32 },
    /// A check passed and the write followed.
    Write,
    /// A check refused.
    Refused,
    /// The command got SIGTERM.
    Term,
}

/// One line of the resource.
#[derive(Debug, Clone, Copy)]
pub struct Entry {
    pub kind: Kind,
    pub token: FencingToken,
    /// Just before the check.
    pub t0: BootInstant,
    /// Just before the append.
    pub at: BootInstant,
}

/// The resource: a file the commands append to.
pub struct Resource {
    pub path: PathBuf,
    _dir: tempfile::TempDir,
    clocks: WallToBoot,
}

impl Resource {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("resource.log");
        Self {
            path,
            _dir: dir,
            clocks: WallToBoot::measure(),
        }
    }

    pub fn clocks(&self) -> WallToBoot {
        self.clocks
    }

    /// Every complete line so far.
    pub fn entries(&self) -> Vec<Entry> {
        let text = std::fs::read_to_string(&self.path).unwrap_or_default();
        let complete = match text.rfind('\n') {
            Some(end) => &text[..end],
            None => "",
        };
        complete
            .lines()
            .map(|line| {
                self.parse(line).unwrap_or_else(|| {
                    panic!("the command wrote a line the test cannot read: {line:?}")
                })
            })
            .collect()
    }

    fn parse(&self, line: &str) -> Option<Entry> {
        let fields: Vec<&str> = line.split(' ').collect();
        let token = FencingToken(fields.get(1)?.parse().ok()?);
        let (kind, t0, at) = match fields[..] {
            ["start", _, pid, at] => (
                Kind::Start {
                    pid: pid.parse().ok()?,
                },
                at,
                at,
            ),
            ["write", _, t0, at] => (Kind::Write, t0, at),
            ["refused", _, t0, at] => (Kind::Refused, t0, at),
            ["term", _, t0, at] => (Kind::Term, t0, at),
            _ => return None,
        };
        Some(Entry {
            kind,
            token,
            t0: self.clocks.parse(t0)?,
            at: self.clocks.parse(at)?,
        })
    }

    /// The commands started so far: token and process group, in order.
    pub fn starts(&self) -> Vec<(FencingToken, i32)> {
        self.entries()
            .into_iter()
            .filter_map(|e| match e.kind {
                Kind::Start { pid } => Some((e.token, pid)),
                _ => None,
            })
            .collect()
    }

    /// How many lines of `kind` for `token` there are.
    pub fn count(&self, token: FencingToken, kind: Kind) -> usize {
        self.entries()
            .iter()
            .filter(|e| e.token == token && e.kind == kind)
            .count()
    }
}

impl Default for Resource {
    fn default() -> Self {
        Self::new()
    }
}

/// A term's writes against its validity deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Writes appended before the deadline.
    pub before: usize,
    /// Writes appended at or after the deadline: what the guard must prevent.
    pub after: usize,
    /// Checks that began at or after the deadline and refused.
    pub refused_after: usize,
}

/// Counts the writes of term `token`, whose validity deadline was `deadline`.
pub fn judge(entries: &[Entry], token: FencingToken, deadline: BootInstant) -> Counts {
    let of_term = || entries.iter().filter(move |e| e.token == token);
    Counts {
        before: of_term()
            .filter(|e| e.kind == Kind::Write && e.at < deadline)
            .count(),
        after: of_term()
            .filter(|e| e.kind == Kind::Write && e.at >= deadline)
            .count(),
        refused_after: of_term()
            .filter(|e| e.kind == Kind::Refused && e.t0 >= deadline)
            .count(),
    }
}
