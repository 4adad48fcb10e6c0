//! How much of everything one run measures: the full run and the quick one.

use std::time::Duration;

use leasehold::elector::Timing;

use crate::pause::Wave;

/// How much of everything to measure.
pub struct Plan {
    pub quick: bool,
    /// Timing of the handoff, failover and pause benchmarks (both strategies).
    pub timing: Timing,
    /// Timing of the load and footprint benchmarks.
    pub load_timing: Timing,
    pub echo_rounds: usize,
    pub ping_rounds: usize,
    pub bench_clients: [usize; 2],
    pub bench_requests: [usize; 2],
    pub prim_cycles_one: usize,
    pub prim_clients_many: usize,
    pub prim_time_many: Duration,
    /// Rounds the primitive comparison is split into, alternating which goes first.
    pub prim_rounds: usize,
    pub handoff_rounds: usize,
    pub handoff_followers: usize,
    pub polling_groups: usize,
    pub polling_rounds: usize,
    pub e2e_rounds: usize,
    pub crash_waves: usize,
    pub crash_per_strategy: usize,
    pub pause_waves: usize,
    pub pause_per_wave: usize,
    pub pause_extra: Duration,
    pub pause_stagger: Duration,
    pub load_sizes: Vec<usize>,
    pub load_window: Duration,
    pub transition_settle: Duration,
    pub scrape_every: Duration,
    /// Whether the peers (other lock libraries) are measured: they need their packages,
    /// installed from PyPI and npm.
    pub peers: bool,
    /// The TTL of every peer's lock, leasehold's included.
    pub peer_ttl: Duration,
    pub peer_handoffs: usize,
    pub peer_crashes: usize,
    pub peer_pauses: usize,
    pub peer_idle_window: Duration,
    /// Connections of the HTTP flood, and how long it holds them.
    pub flood_connections: usize,
    pub flood_hold: Duration,
}

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

impl Plan {
    pub fn full() -> Self {
        Self {
            quick: false,
            // The defaults (15 s / 10 s / 2 s) scaled down five times, so that every failover
            // and pause sample costs seconds, not a quarter of a minute.
            timing: Timing {
                lease_duration: ms(3000),
                renew_deadline: ms(2000),
                retry_period: ms(400),
                ..Timing::default()
            },
            load_timing: Timing::default(),
            echo_rounds: 20_000,
            ping_rounds: 5_000,
            bench_clients: [1, 50],
            bench_requests: [20_000, 100_000],
            prim_cycles_one: 2_000,
            prim_clients_many: 50,
            prim_time_many: Duration::from_secs(4),
            prim_rounds: 4,
            handoff_rounds: 500,
            handoff_followers: 2,
            polling_groups: 10,
            polling_rounds: 20,
            e2e_rounds: 100,
            crash_waves: 7,
            crash_per_strategy: 15,
            pause_waves: 3,
            pause_per_wave: 10,
            pause_extra: ms(500),
            pause_stagger: ms(50),
            load_sizes: vec![1, 10, 100, 500],
            load_window: Duration::from_secs(45),
            transition_settle: ms(300),
            scrape_every: Duration::from_secs(10),
            peers: true,
            peer_ttl: ms(2000),
            peer_handoffs: 40,
            peer_crashes: 8,
            peer_pauses: 5,
            peer_idle_window: Duration::from_secs(20),
            flood_connections: 10_000,
            flood_hold: Duration::from_secs(10),
        }
    }

    /// Wave `number` of the pause benchmarks (in-process followers and exec mode alike).
    pub fn pause_wave(&self, number: usize) -> Wave {
        Wave {
            number,
            count: self.pause_per_wave,
            extra: self.pause_extra,
            stagger: self.pause_stagger,
        }
    }

    pub fn quick() -> Self {
        Self {
            quick: true,
            timing: Timing {
                lease_duration: ms(600),
                renew_deadline: ms(400),
                retry_period: ms(100),
                ..Timing::default()
            },
            load_timing: Timing {
                lease_duration: ms(1000),
                renew_deadline: ms(600),
                retry_period: ms(200),
                ..Timing::default()
            },
            echo_rounds: 500,
            ping_rounds: 200,
            bench_clients: [1, 4],
            bench_requests: [500, 1_000],
            prim_cycles_one: 100,
            prim_clients_many: 4,
            prim_time_many: ms(300),
            prim_rounds: 2,
            handoff_rounds: 10,
            handoff_followers: 2,
            polling_groups: 2,
            polling_rounds: 3,
            e2e_rounds: 3,
            crash_waves: 1,
            crash_per_strategy: 2,
            pause_waves: 1,
            pause_per_wave: 2,
            pause_extra: ms(200),
            pause_stagger: ms(20),
            load_sizes: vec![1, 4],
            load_window: ms(2000),
            transition_settle: ms(100),
            scrape_every: ms(500),
            // Off: the quick run must not need the network. Its timings, when asked for.
            peers: false,
            peer_ttl: ms(1000),
            peer_handoffs: 2,
            peer_crashes: 1,
            peer_pauses: 1,
            peer_idle_window: ms(2000),
            flood_connections: 1_000,
            flood_hold: ms(2000),
        }
    }
}
