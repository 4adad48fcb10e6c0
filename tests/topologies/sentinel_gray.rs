//! Sentinel with one part slow rather than down: a link to the master slower than the client
//! library's own defaults but within the lease's bounds elects as a link to one Redis does.

use std::time::Duration;

use harness::contenders::{ActionLog, Contender, acting_work, lease, unique_lease, until_leading};
use harness::timings::TEN_SECOND_TERM_SLOW_RETRY;
use testbed::proxy::Fault;
use testbed::sentinel::SentinelSet;

/// Every request to the master waits 600 ms, past the 500 ms that the Redis client gives a
/// reply by default; the lease's bounds (3 s a call) hold the dial, as on one Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_to_the_master_slower_than_half_a_second_still_elects() {
    let set = SentinelSet::start_with_a_proxied_master();
    let proxy = set.master_proxy();
    // The Sentinels' own links pass: slowed, they might fail the master over.
    for port in proxy.upstream_ports() {
        proxy.set_one(port, Fault::Pass);
    }
    proxy.set(Fault::DelayRequests(Duration::from_millis(600)));
    let log = ActionLog::default();
    let a = Contender::spawn(
        lease(&set.url(), &unique_lease("slow-master"), "pod-a", false),
        TEN_SECOND_TERM_SLOW_RETRY,
        acting_work(log, Duration::from_millis(100), None),
    );
    until_leading(
        "a leader over a 600 ms link to the master",
        &mut a.status.clone(),
        Duration::from_secs(30),
    )
    .await;
}
