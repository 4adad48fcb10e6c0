//! How many Sentinels a `redis+sentinel://` URL stands for, through the real binary against real
//! Sentinels. Fewer than three, or an even number, is refused at start (exit code 2, naming
//! --redis-url, the URL and the rule) unless --allow-unsafe-sentinel-count accepts it, which is
//! then said once as a warning. One Sentinel listed twice counts once. A name that resolves to
//! several addresses (a headless Service) stands for as many Sentinels, each asked and counted
//! in the majority, and it is resolved again when a Sentinel stops answering, so a Sentinel that
//! came back on another address (a pod restarted) is found.
//!
//! Names of the tests' own come from a hosts file that only the leasehold processes see
//! (`testbed::hosts`: a private mount namespace), with Sentinels on 127.0.0.2, 127.0.0.3 and
//! 127.0.0.4, all on one port.

use std::process::Command;
use std::time::Duration;

use harness::contenders::unique_lease;
use harness::replica::{FAST, Replica, exit_within};
use harness::{RunCommand, leasehold_bin};
use nix::sys::signal::Signal;
use testbed::hosts::Hosts;
use testbed::sentinel::SentinelSet;
use testbed::wait::wait_for;

const ALLOW: &str = "--allow-unsafe-sentinel-count";

/// The loopback addresses the Sentinels behind one name listen on.
const ADDRESSES: [&str; 3] = ["127.0.0.2", "127.0.0.3", "127.0.0.4"];

/// `leasehold run` on `url` from `cmd` (the binary, or the binary under a hosts file), with
/// `args` added.
fn run_on(mut cmd: Command, url: &str, args: &[&str]) -> Command {
    cmd.args(["run", "--kubernetes", "off", "--redis-url", url])
        .args(["--http-addr", "127.0.0.1:0"])
        .args(args);
    cmd
}

/// Runs `cmd` and expects it refused at start with `want` in its message.
fn refused(cmd: Command, want: &[&str]) {
    let (code, stderr) = exit_within(cmd, Duration::from_secs(20));
    let Some(code) = code else {
        panic!("accepted: still running after 20s; stderr:\n{stderr}");
    };
    assert_eq!(code, 2, "exited {code}; stderr:\n{stderr}");
    for want in want {
        assert!(stderr.contains(want), "\n got: {stderr}\nwant: {want}");
    }
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn one_sentinel_is_refused_at_start_with_the_flag_and_the_rule() {
    let set = SentinelSet::start();
    let url = set.url_in_order(&[0]);
    let one = &set.addresses()[0];
    refused(
        run_on(Command::new(leasehold_bin()), &url, &[]),
        &[
            &format!("--redis-url `{url}`: 1 Sentinel ({one})"),
            "one Sentinel's word alone names the master",
            "leasehold needs an odd number of Sentinels, three or more",
            ALLOW,
        ],
    );
}

#[test]
fn an_even_number_of_sentinels_is_refused_and_one_sentinel_listed_twice_counts_once() {
    let set = SentinelSet::start();
    let addresses = set.addresses();
    let url = set.url_in_order(&[0, 1]);
    refused(
        run_on(Command::new(leasehold_bin()), &url, &[]),
        &[
            &format!(
                "--redis-url `{url}`: 2 Sentinels ({}, {})",
                addresses[0], addresses[1]
            ),
            "a majority of an even number is no better than of one fewer",
        ],
    );
    // Three hosts, two Sentinels: `localhost` is 127.0.0.1, which the URL lists already.
    let port = set.port();
    let twice = url.replace(
        &format!("/{}", testbed::sentinel::MASTER_NAME),
        &format!(",localhost:{port}/{}", testbed::sentinel::MASTER_NAME),
    );
    refused(
        run_on(Command::new(leasehold_bin()), &twice, &[]),
        &[&format!("2 Sentinels ({}, {})", addresses[0], addresses[1])],
    );
}

#[test]
fn one_sentinel_accepted_by_the_flag_leads_and_says_once_what_it_gave_up() {
    let set = SentinelSet::start();
    let mut args = FAST.to_vec();
    args.push(ALLOW);
    let solo = Replica::spawn(
        &set.url_in_order(&[0]),
        &unique_lease("one-sentinel-allowed"),
        "solo",
        &args,
        &[],
    );
    wait_for("solo to lead", Duration::from_secs(10), || {
        solo.is_ready().then_some(())
    });
    // Renewals go on through the one Sentinel; the warning is not repeated with them.
    solo.wait_events("renewed", 4, Duration::from_secs(10));
    let warned = solo.events("an unsafe number of Sentinels is accepted");
    assert_eq!(warned.len(), 1, "said once:\n{}", solo.log_text());
    assert_eq!(warned[0]["level"], "WARN", "{}", warned[0]);
    assert_eq!(warned[0]["sentinels"], 1, "{}", warned[0]);
    let gave_up = warned[0]["detail"].as_str().unwrap_or_default();
    assert!(
        gave_up.contains("one Sentinel's word alone names the master"),
        "{gave_up}"
    );
}

#[test]
fn a_name_that_resolves_to_two_sentinels_is_refused_as_an_even_number() {
    let set = SentinelSet::start_on_addresses(&ADDRESSES[..2]);
    let hosts = Hosts::new(&[("sentinels.test", &ADDRESSES[..2])]);
    let port = set.port();
    refused(
        run_on(
            hosts.command(leasehold_bin()),
            &set.url_by_name("sentinels.test"),
            &[],
        ),
        &[&format!(
            "2 Sentinels ({}:{port}, {}:{port})",
            ADDRESSES[0], ADDRESSES[1]
        )],
    );
}

/// The address that `name` resolves to first under `hosts` (getaddrinfo's order, as a client
/// that dials the name would try them).
fn first_address(hosts: &Hosts, name: &str) -> String {
    let mut getent = hosts.command("getent");
    getent.args(["ahosts", name]);
    let out = getent.output().expect("getent");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.split_whitespace()
        .next()
        .unwrap_or_else(|| panic!("{name} does not resolve: {text}"))
        .to_owned()
}

/// Replica `a` of a lease unique to the test, named after `test`, finding the Sentinels by the
/// name `sentinels.test` of `hosts`; once it answers.
fn by_name(hosts: &Hosts, set: &SentinelSet, test: &str) -> Replica {
    let run = RunCommand::wrapping(hosts.command(leasehold_bin()))
        .redis_url(&set.url_by_name("sentinels.test"))
        .lease(&unique_lease(test))
        .args(FAST);
    Replica::start(run, "a", &[]).healthy()
}

#[test]
fn a_name_that_resolves_to_three_sentinels_counts_as_three() {
    let set = SentinelSet::start_on_addresses(&ADDRESSES);
    let hosts = Hosts::new(&[("sentinels.test", &ADDRESSES)]);
    // The Sentinel a client of the name alone would ask stops answering (it still accepts
    // connections); the other two are a majority of the three.
    let first = first_address(&hosts, "sentinels.test");
    let frozen = ADDRESSES
        .iter()
        .position(|a| *a == first)
        .expect("the name resolves to the Sentinels' addresses");
    set.signal_sentinel(frozen, Signal::SIGSTOP);
    let a = by_name(&hosts, &set, "sentinels-by-name");
    wait_for(
        "a to lead through the two Sentinels that answer",
        Duration::from_secs(10),
        || a.is_ready().then_some(()),
    );
    assert!(
        a.events("an unsafe number of Sentinels is accepted")
            .is_empty(),
        "three Sentinels are safe:\n{}",
        a.log_text()
    );
    set.signal_sentinel(frozen, Signal::SIGCONT);
}

#[test]
fn a_sentinel_back_on_another_address_is_found_by_resolving_the_name_again() {
    let set = SentinelSet::start_on_addresses(&ADDRESSES);
    // At start the name stands for two Sentinels and an address where none listens any more
    // (the third's pod is being replaced): three, of which two answer.
    let hosts = Hosts::new(&[("sentinels.test", &[ADDRESSES[0], ADDRESSES[1], "127.0.0.9"])]);
    let a = by_name(&hosts, &set, "sentinel-moved");
    wait_for("a to lead", Duration::from_secs(10), || {
        a.is_ready().then_some(())
    });
    // One of the two stops answering: one Sentinel of three is no majority.
    set.signal_sentinel(1, Signal::SIGSTOP);
    wait_for(
        "a to step down without a majority",
        Duration::from_secs(10),
        || (!a.is_ready()).then_some(()),
    );
    // The third Sentinel is back, on its new address.
    hosts.set(&[(
        "sentinels.test",
        &[ADDRESSES[0], ADDRESSES[1], ADDRESSES[2]],
    )]);
    wait_for(
        "a to lead again through the Sentinel found at its new address",
        Duration::from_secs(15),
        || a.is_ready().then_some(()),
    );
    set.signal_sentinel(1, Signal::SIGCONT);
}

/// A name that stood for three Sentinels and for a while stands for four (a pod surged in
/// beside them during a rollout) is no misconfiguration: the majority counts the four, and once
/// they answer again the replica leads. The count rule is for what the name stood for at first.
#[test]
fn a_fourth_sentinel_seen_for_a_while_does_not_refuse_the_lease_for_good() {
    let set = SentinelSet::start_on_addresses(&ADDRESSES);
    let hosts = Hosts::new(&[("sentinels.test", &ADDRESSES)]);
    let a = by_name(&hosts, &set, "sentinel-surge");
    wait_for("a to lead", Duration::from_secs(10), || {
        a.is_ready().then_some(())
    });
    // A fourth address, where nothing listens yet; an ask that fails has the names resolved
    // again, and the fourth is counted from then on.
    let surged = [ADDRESSES[0], ADDRESSES[1], ADDRESSES[2], "127.0.0.9"];
    hosts.set(&[("sentinels.test", &surged)]);
    set.signal_sentinel(1, Signal::SIGSTOP);
    wait_for(
        "a to step down without a majority of four",
        Duration::from_secs(10),
        || (!a.is_ready()).then_some(()),
    );
    set.signal_sentinel(1, Signal::SIGCONT);
    wait_for(
        "a to lead again with three answers of the four counted",
        Duration::from_secs(15),
        || a.is_ready().then_some(()),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_of_the_library_keeps_the_rule_while_it_runs() {
    use leasehold::lease::{LeaseError, LeaseName, LeaseOptions, OwnerId, RedisLease};
    let set = SentinelSet::start();
    let url = set.url_in_order(&[0]);
    let lease = |allow| {
        let options = LeaseOptions {
            allow_unsafe_sentinel_count: allow,
            ..LeaseOptions::default()
        };
        RedisLease::new(
            &url,
            LeaseName::new(unique_lease("library-count")).unwrap(),
            OwnerId::generate("pod-a").unwrap(),
            options,
        )
        .unwrap()
    };
    let err = lease(false)
        .observe(Duration::from_secs(5))
        .await
        .expect_err("one Sentinel is refused");
    assert!(matches!(err, LeaseError::BadUrl { .. }), "{err:?}");
    assert!(
        err.to_string().contains("1 Sentinel ("),
        "the refusal names the Sentinels: {err}"
    );
    lease(true)
        .observe(Duration::from_secs(5))
        .await
        .expect("accepted by the option");
}

/// One Sentinel reached at two listed addresses (a Service's address beside its pod's; here a
/// proxy in front of it) counts once: with the only other Sentinel listed frozen, its two answers
/// are no majority of three, and nobody takes the lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_sentinel_at_two_addresses_counts_once() {
    use harness::contenders::lease;
    use leasehold::lease::Acquired;
    use testbed::proxy::FaultProxy;
    let set = SentinelSet::start();
    let first = set.addresses()[0].parse().expect("a Sentinel's address");
    let again = FaultProxy::start(first);
    let [a, b] = [0, 1].map(|i| set.addresses()[i].clone());
    let url = format!("redis+sentinel://{a},{},{b}/mymaster", again.addr());
    let call = Duration::from_secs(5);
    let (ttl, name) = (Duration::from_secs(2), unique_lease("sentinel-twice"));
    let first = lease(&url, &name, "pod-a", false);
    let acquired = first
        .acquire(ttl, call)
        .await
        .expect("two Sentinels answer");
    assert!(matches!(acquired, Acquired::Leader(_)), "{acquired:?}");
    set.signal_sentinel(1, Signal::SIGSTOP);
    let other = lease(&url, &name, "pod-b", false);
    let refused = other.acquire(ttl, call).await;
    set.signal_sentinel(1, Signal::SIGCONT);
    let err = refused.expect_err("one Sentinel's two answers are a majority of three");
    let err = err.to_string();
    assert!(err.contains("no majority (2 of 3)"), "{err}");
    assert!(err.contains("counted once"), "{err}");
}

/// The replica says which two addresses answer as one Sentinel, as it dials the second.
#[test]
fn one_sentinel_at_two_addresses_is_said_as_it_is_dialled() {
    let set = SentinelSet::start();
    let first: std::net::SocketAddr = set.addresses()[0].parse().expect("an address");
    let again = testbed::proxy::FaultProxy::start(first);
    let url = format!(
        "redis+sentinel://{first},{},{}/mymaster",
        again.addr(),
        set.addresses()[1]
    );
    let solo = Replica::spawn(
        &url,
        &unique_lease("sentinel-twice-said"),
        "solo",
        &FAST,
        &[],
    );
    let message = "two of the Sentinels' addresses answer with one SENTINEL MYID; they count once in the majority";
    let said = solo.wait_events(message, 1, Duration::from_secs(10));
    let mut pair = [&said[0]["sentinel"], &said[0]["same_as"]]
        .map(|a| a.as_str().unwrap_or_default().to_owned());
    pair.sort();
    let mut want = [first.to_string(), again.addr().to_string()];
    want.sort();
    assert_eq!(pair, want, "{}", said[0]);
}

/// A Sentinel on a slow link still counts: its first ask (a new connection's handshake, its id
/// and the master's address) fits the ask's 2 s bound at 1.1 s a round trip.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_on_a_slow_link_counts_from_its_first_ask() {
    use harness::contenders::lease;
    use leasehold::lease::Acquired;
    use testbed::proxy::{Fault, FaultProxy};
    let set = SentinelSet::start();
    let slow: Vec<FaultProxy> = [1, 2]
        .map(|i| FaultProxy::start(set.addresses()[i].parse().expect("an address")))
        .into();
    for proxy in &slow {
        proxy.set(Fault::DelayReplies(Duration::from_millis(1100)));
    }
    // Sentinel 0 alone is no majority: one of the slow two must count.
    let url = format!(
        "redis+sentinel://{},{},{}/mymaster",
        set.addresses()[0],
        slow[0].addr(),
        slow[1].addr()
    );
    let call = Duration::from_secs(5);
    let leader = lease(&url, &unique_lease("sentinel-slow"), "pod-a", false);
    let acquired = leader.acquire(Duration::from_secs(5), call).await;
    assert!(matches!(acquired, Ok(Acquired::Leader(_))), "{acquired:?}");
}
