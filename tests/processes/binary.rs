//! The `leasehold` binary as this target's end-to-end tests run it: `FAST` timings without the
//! cooldown (and the check that `FAST` is the steady timing as flags), the one ready leader
//! among the replicas and its token, and what a singleton command left behind: the lines it
//! recorded, and whether a process of it is still alive.

use harness::replica::{FAST, Replica};

/// `FAST` timings, and no cooldown on the test's fresh redis (tests about the cooldown say so).
pub fn fast() -> Vec<&'static str> {
    let mut args = FAST.to_vec();
    args.push("--no-data-loss-cooldown");
    args
}

/// `FAST` spells out a timing preset as flags; the flags are the ones every harness gives a
/// replica for that timing.
#[test]
fn fast_is_the_steady_timing_as_flags() {
    assert_eq!(harness::timing_flags(&harness::timings::STEADY), FAST);
}

/// The only ready replica in leader mode, once there is exactly one.
pub fn the_leader(replicas: &[Replica]) -> Option<usize> {
    let ready: Vec<usize> = (0..replicas.len())
        .filter(|&i| replicas[i].is_ready())
        .collect();
    (ready.len() == 1).then(|| ready[0])
}

pub fn token_of(replica: &Replica) -> u64 {
    replica.leader()["token"].as_u64().expect("a token")
}

pub fn lines(path: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

pub fn process_alive(pid: i32) -> bool {
    // Signal 0 checks existence; a zombie of a dead parent is reaped by init quickly.
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|s| s.split_whitespace().nth(2) == Some("Z"))
}
