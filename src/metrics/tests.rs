//! The exposition and the gauges read at scrape time.

use super::*;
use crate::board::GateHooks;
use crate::board::shown::tests::shown as status;
use crate::elector::{LeaderInfo, RateBound, StepDownReason, TermHooks};

#[test]
fn the_exposition_names_every_metric() {
    let m = Metrics::new("web-a", "shop/web");
    m.renewal(RenewalOutcome::Renewed, Duration::from_micros(300));
    m.began(FencingToken(7), BootInstant::default(), WallLead::default());
    m.ending(FencingToken(7), StepDownReason::ValidityDeadlinePassed);
    m.clock_rate(RateBound {
        low: 1.0625,
        high: 1.09375,
    });
    let now = BootInstant::now();
    let text = m.render(
        &leader_valid_until(now.saturating_add(Duration::from_secs(10))),
        now,
        WallLead::default(),
        true,
        Exposition::OpenMetrics,
    );
    for line in [
        "leader_election_master_status{name=\"shop/web\"} 1",
        "leasehold_is_leader 1",
        "leasehold_ready 1",
        "leasehold_leader{leader=\"web-a\"} 1",
        "leasehold_transitions_total{to=\"leader\"} 1",
        "leasehold_step_downs_total{reason=\"validity_deadline_passed\"} 1",
        "leasehold_step_downs_total{reason=\"shutdown\"} 0",
        "leasehold_renewals_total{result=\"renewed\"} 1",
        "leasehold_renewal_duration_seconds_count 1",
        "leasehold_validity_remaining_seconds 10.0",
        "leasehold_fencing_token 7.0",
        "leasehold_redis_up 1",
        "leasehold_redis_clock_rate 1.078125",
        "leasehold_redis_clock_rate_width 0.03125",
        "leasehold_info{identity=\"web-a\",lease=\"shop/web\",version=",
    ] {
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }
}

#[test]
fn a_leader_past_its_deadline_is_not_counted_as_leader() {
    let m = Metrics::new("web-a", "shop/web");
    let now = BootInstant::now();
    let text = m.render(
        &leader_valid_until(now),
        now,
        WallLead::default(),
        false,
        Exposition::OpenMetrics,
    );
    assert!(text.contains("leasehold_is_leader 0"), "{text}");
    assert!(
        text.contains("leader_election_master_status{name=\"shop/web\"} 0"),
        "{text}"
    );
    assert!(
        text.contains("leasehold_validity_remaining_seconds 0.0"),
        "{text}"
    );
    assert!(!text.contains("leasehold_leader{"), "{text}");
}

#[test]
fn a_leader_whose_deadline_passed_unseen_by_the_boot_clock_is_not_counted_as_leader() {
    let m = Metrics::new("web-a", "shop/web");
    let now = BootInstant::now();
    // 10 s left on the boot clock, but the wall clock gained 20 s on it since the deadline was set.
    let gained = WallLead::from_nanos(Duration::from_secs(20).as_nanos() as i64);
    let text = m.render(
        &leader_valid_until(now.saturating_add(Duration::from_secs(10))),
        now,
        gained,
        false,
        Exposition::OpenMetrics,
    );
    assert!(text.contains("leasehold_is_leader 0"), "{text}");
    assert!(
        text.contains("leasehold_validity_remaining_seconds 0.0"),
        "{text}"
    );
}

/// This replica leading term 7 until `valid_until`, as the lead of the wall clock stood at 0.
fn leader_valid_until(valid_until: BootInstant) -> Shown {
    status(Role::Leader {
        token: FencingToken(7),
        acquired_at: std::time::SystemTime::now(),
        valid_until,
        lead: WallLead::default(),
    })
}

fn following(identity: &str) -> Role {
    Role::Follower {
        leader: Some(LeaderInfo {
            owner: format!("{identity}-x"),
            identity: identity.into(),
            token: Some(FencingToken(3)),
        }),
        cooldown: None,
    }
}

/// The `leasehold_leader` lines of an exposition.
fn leader_lines(text: &str) -> Vec<&str> {
    text.lines()
        .filter(|l| l.starts_with("leasehold_leader{"))
        .collect()
}

#[test]
fn a_follower_names_only_the_leader_it_sees_now() {
    let m = Metrics::new("web-a", "shop/web");
    let now = BootInstant::now();
    let cases: [(Role, &[&str]); 4] = [
        (
            following("web-b"),
            &["leasehold_leader{leader=\"web-b\"} 1"],
        ),
        (
            following("web-c"),
            &["leasehold_leader{leader=\"web-c\"} 1"],
        ),
        (
            Role::Follower {
                leader: None,
                cooldown: None,
            },
            &[],
        ),
        (Role::Starting, &[]),
    ];
    for (role, want) in cases {
        let text = m.render(
            &status(role.clone()),
            now,
            WallLead::default(),
            true,
            Exposition::OpenMetrics,
        );
        assert_eq!(leader_lines(&text), want, "{role:?}");
        assert!(
            text.contains("leader_election_master_status{name=\"shop/web\"} 0"),
            "{role:?}: {text}"
        );
        assert!(text.contains("leasehold_is_leader 0"), "{role:?}: {text}");
    }
}

#[test]
fn readiness_is_exported_as_given() {
    let m = Metrics::new("web-a", "shop/web");
    let now = BootInstant::now();
    for (ready, shown) in [(false, "leasehold_ready 0"), (true, "leasehold_ready 1")] {
        let text = m.render(
            &status(following("web-b")),
            now,
            WallLead::default(),
            ready,
            Exposition::OpenMetrics,
        );
        assert!(text.contains(shown), "{text}");
    }
}

#[test]
fn the_eviction_gauge_is_absent_until_the_policy_is_read_then_follows_it() {
    let m = Metrics::new("web-a", "shop/web");
    let now = BootInstant::now();
    let lines = |m: &Metrics| -> Vec<String> {
        m.render(
            &status(following("web-b")),
            now,
            WallLead::default(),
            true,
            Exposition::OpenMetrics,
        )
        .lines()
        .filter(|l| l.starts_with("leasehold_redis_eviction_possible{"))
        .map(str::to_owned)
        .collect()
    };
    assert!(lines(&m).is_empty());
    let cases = [
        ("volatile-ttl", true),
        ("noeviction", false),
        ("allkeys-lru", true),
        ("volatile-lru", false),
    ];
    for (policy, may_evict) in cases {
        m.eviction_policy(policy, may_evict);
        let want = format!(
            "leasehold_redis_eviction_possible{{policy=\"{policy}\"}} {}",
            u8::from(may_evict)
        );
        assert_eq!(lines(&m), [want], "only the policy read last");
    }
    let text = m.render(
        &status(following("web-b")),
        now,
        WallLead::default(),
        true,
        Exposition::OpenMetrics,
    );
    assert!(
        text.contains("# TYPE leasehold_redis_eviction_possible gauge"),
        "{text}"
    );
}

#[test]
fn the_accept_header_chooses_the_exposition() {
    use Exposition::*;
    let cases = [
        (None, Text),
        (Some("*/*"), Text),
        (Some("text/plain"), Text),
        (Some("text/plain;version=0.0.4;q=0.9,*/*;q=0.1"), Text),
        (Some("application/openmetrics-text"), OpenMetrics),
        // What Prometheus 2 sends when it scrapes.
        (
            Some(
                "application/openmetrics-text;version=1.0.0,application/openmetrics-text;\
                 version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
            ),
            OpenMetrics,
        ),
        (
            Some("Application/OpenMetrics-Text; version=1.0.0"),
            OpenMetrics,
        ),
        (Some("application/openmetrics-text;q=0,text/plain"), Text),
    ];
    for (accept, want) in cases {
        assert_eq!(Exposition::negotiate(accept), want, "{accept:?}");
    }
}

#[test]
fn each_exposition_names_a_counter_as_its_format_wants() {
    let m = Metrics::new("web-a", "shop/web");
    m.began(FencingToken(7), BootInstant::default(), WallLead::default());
    let now = BootInstant::now();
    let status = status(following("web-b"));
    let text = m.render(&status, now, WallLead::default(), true, Exposition::Text);
    for line in [
        "# HELP leasehold_transitions_total ",
        "# TYPE leasehold_transitions_total counter",
        "leasehold_transitions_total{to=\"leader\"} 1",
    ] {
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }
    assert!(!text.contains("# EOF"), "{text}");
    let open = m.render(
        &status,
        now,
        WallLead::default(),
        true,
        Exposition::OpenMetrics,
    );
    for line in [
        "# TYPE leasehold_transitions counter",
        "leasehold_transitions_total{to=\"leader\"} 1",
        "# EOF",
    ] {
        assert!(open.contains(line), "missing {line:?} in:\n{open}");
    }
}
