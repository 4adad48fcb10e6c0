//! The release herd alone: graceful in-process handoffs in groups of the given sizes, each on a
//! redis-server of its own, to compare how a release wakes its followers before and after a
//! change. Prints a Markdown table on stdout and writes no report.
//!
//! ```text
//! target/release/examples/bench herd --contenders 3,200 --rounds 40
//! ```

use anyhow::Result;
use leasehold::elector::Timing;
use leasehold::elector::decide::FollowerStrategy;

use crate::stats::{Summary, cells};
use crate::{handoff, start_redis};

/// Runs `rounds` handoffs for every group size in `contenders` (the leader included).
pub async fn run(contenders: &[usize], rounds: usize, timing: Timing) -> Result<()> {
    println!(
        "| contenders | handoffs | release → `Leadership`: min | p50 | p99 | max | shutdown → `Leadership`: p50 | p99 |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for &n in contenders {
        let redis = start_redis().await?;
        let samples = handoff::in_process(
            &redis.url(),
            &format!("bench/herd-{n}"),
            timing,
            FollowerStrategy::Notified,
            n.saturating_sub(1).max(1),
            rounds,
            false,
        )
        .await?;
        let from_release: Vec<_> = samples.iter().map(|s| s.from_release).collect();
        let from_shutdown: Vec<_> = samples.iter().map(|s| s.from_shutdown).collect();
        let shutdown = Summary::of(&from_shutdown)
            .map(|s| format!("{} | {}", crate::stats::ms(s.p50), crate::stats::ms(s.p99)))
            .unwrap_or_else(|| "– | –".to_owned());
        println!(
            "| {n} | {} | {shutdown} |",
            cells(Summary::of(&from_release))
        );
    }
    Ok(())
}
