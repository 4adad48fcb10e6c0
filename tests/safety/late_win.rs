//! A win whose answer is read after its term's validity (a CPU starved by its quota read it
//! late, or a link slower than a term): no term begins on it. It was a term that began with
//! `valid_for_ms=0`, set the leader label and recorded an Event, and ended at its first look;
//! it is taken for an answer that never came (docs/DESIGN.md, "Gray failures"): given back, and
//! the replica tries again once a read fits its link.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use harness::clock::ShiftedClock;
use harness::contenders::{lease_with, unique_lease};
use harness::timings::THIRTY_SECOND_TERM;
use leasehold::clock::{BootInstant, Clock, WallLead};
use leasehold::elector::{Elector, Leadership, Role, TermHooks};
use leasehold::lease::{FencingToken, LeaseOptions};
use testbed::proxy::{Fault, FaultProxy};
use testbed::redis_server::RedisServer;
use testbed::wait::first_instant;
use tokio_util::sync::CancellationToken;

/// Each term's beginning: the time left on its validity then (`None`: none).
struct Began {
    clock: ShiftedClock,
    left: Mutex<Vec<Option<Duration>>>,
}

impl TermHooks for Began {
    fn began(&self, _token: FencingToken, valid_until: BootInstant, _lead: WallLead) {
        let now = self.clock.now();
        let left = (now < valid_until).then(|| now.until(valid_until));
        self.left.lock().unwrap().push(left);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_win_read_after_its_validity_begins_no_term() {
    let redis = RedisServer::start();
    let proxy = Arc::new(FaultProxy::start(redis.addr()));
    let clock = ShiftedClock::new();
    let options = LeaseOptions {
        cooldown_on_data_loss: false,
        clock: Arc::new(clock.clone()),
        ..LeaseOptions::default()
    };
    let lease = lease_with(&proxy.url(), &unique_lease("late-win"), "a", options);
    let source = leasehold::lease::script_source("acquire").expect("the acquire script");
    let sha: String = redis.cmd(&["SCRIPT", "LOAD", &source]);
    let sha: [u8; 40] = sha.as_bytes().try_into().expect("a SHA1 in hex");
    let delay = Duration::from_secs(2);
    proxy.set(Fault::DelayScript { sha, delay });
    let began = Arc::new(Began {
        clock: clock.clone(),
        left: Mutex::new(Vec::new()),
    });
    let elector = Elector::new(lease, THIRTY_SECOND_TERM)
        .unwrap()
        .with_hooks(began.clone());
    let mut status = elector.status();
    let shutdown = CancellationToken::new();
    let work = |leadership: Leadership| async move {
        leadership.lost().await;
        Ok::<_, std::convert::Infallible>(())
    };
    let elector = tokio::spawn(elector.run(shutdown.clone(), work));

    // The first acquire is held on its way to Redis: its term's validity passes meanwhile (a
    // jump of the boot clock, as a starved process sees it), and then its answer comes.
    let held = tokio::task::spawn_blocking({
        let proxy = proxy.clone();
        move || first_instant(Duration::from_secs(10), || proxy.scripts_held() >= 1).is_some()
    });
    assert!(held.await.unwrap(), "the first acquire reached the proxy");
    clock.advance(THIRTY_SECOND_TERM.lease_duration + Duration::from_secs(1));

    // The next acquire's answer comes in time: that term begins.
    tokio::time::timeout(
        Duration::from_secs(15),
        status.wait_for(|s| matches!(s.role, Role::Leader { .. })),
    )
    .await
    .expect("a term within 15 s")
    .expect("the elector runs");
    let left = began.left.lock().unwrap().clone();
    assert!(
        left.iter().all(Option::is_some),
        "a term began with its validity passed: {left:?}"
    );
    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(15), elector)
        .await
        .expect("the elector stops")
        .unwrap();
}
