//! The physical limit on this machine: the loopback round trip (a bare TCP echo, and a Redis
//! `PING` through the same client library leasehold uses) and `redis-benchmark` for the two
//! commands leasehold's primitives boil down to: `SET … NX PX` and an `EVALSHA` of a small
//! script.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::stats::Summary;

/// One `redis-benchmark` run.
#[derive(Debug, Clone)]
pub struct BenchRow {
    pub what: &'static str,
    pub clients: usize,
    pub requests: usize,
    pub rps: f64,
    pub min: Duration,
    pub p50: Duration,
    pub p99: Duration,
    pub max: Duration,
}

/// What this module measured.
#[derive(Debug, Clone)]
pub struct Physical {
    pub tcp_echo: Option<Summary>,
    pub redis_ping: Option<Summary>,
    pub benchmark: Vec<BenchRow>,
}

/// The renew-like script for `EVALSHA`: compare the value, then `PEXPIRE`.
pub const SMALL_SCRIPT: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0";

/// Round trips of one byte over a loopback TCP connection to an echo thread.
pub fn tcp_echo(rounds: usize) -> Result<Summary> {
    let listener = TcpListener::bind("127.0.0.1:0").context("bind the echo listener")?;
    let addr = listener.local_addr().context("echo listener address")?;
    let echo = std::thread::spawn(move || -> std::io::Result<()> {
        let (mut conn, _) = listener.accept()?;
        conn.set_nodelay(true)?;
        let mut byte = [0u8; 1];
        loop {
            match conn.read(&mut byte)? {
                0 => return Ok(()),
                _ => conn.write_all(&byte)?,
            }
        }
    });
    let mut conn = TcpStream::connect(addr).context("connect to the echo thread")?;
    conn.set_nodelay(true).context("TCP_NODELAY")?;
    let mut samples = Vec::with_capacity(rounds);
    let mut byte = [7u8; 1];
    for i in 0..rounds + rounds / 10 {
        let started = Instant::now();
        conn.write_all(&byte).context("echo write")?;
        conn.read_exact(&mut byte).context("echo read")?;
        if i >= rounds / 10 {
            samples.push(started.elapsed());
        }
    }
    drop(conn);
    let _ = echo.join();
    Summary::of(&samples).context("no echo samples")
}

/// `PING` round trips through redis-rs's multiplexed connection, one at a time.
pub async fn redis_ping(url: &str, rounds: usize) -> Result<Summary> {
    let client = redis::Client::open(url).context("redis URL")?;
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .context("connect for PING")?;
    let mut samples = Vec::with_capacity(rounds);
    for i in 0..rounds + rounds / 10 {
        let started = Instant::now();
        let _: String = redis::cmd("PING")
            .query_async(&mut conn)
            .await
            .context("PING")?;
        if i >= rounds / 10 {
            samples.push(started.elapsed());
        }
    }
    Summary::of(&samples).context("no PING samples")
}

/// Runs `redis-benchmark` for `SET … NX PX` (random keys, so most succeed) and for
/// `EVALSHA` of [`SMALL_SCRIPT`] on a held key, with each client count.
pub async fn redis_benchmark(
    port: u16,
    url: &str,
    clients: &[usize],
    requests: &[usize],
) -> Result<Vec<BenchRow>> {
    let client = redis::Client::open(url).context("redis URL")?;
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .context("connect to load the script")?;
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(SMALL_SCRIPT)
        .query_async(&mut conn)
        .await
        .context("SCRIPT LOAD")?;
    let _: () = redis::cmd("SET")
        .arg("bench:held")
        .arg("owner")
        .query_async(&mut conn)
        .await
        .context("SET bench:held")?;
    let mut rows = Vec::new();
    for (&c, &n) in clients.iter().zip(requests) {
        let set_nx = [
            "SET",
            "bench:lease:__rand_int__",
            "owner",
            "NX",
            "PX",
            "10000",
        ];
        rows.push(run_benchmark("SET key value NX PX", port, c, n, &set_nx, true).await?);
        let evalsha = ["EVALSHA", &sha, "1", "bench:held", "owner", "600000"];
        rows.push(run_benchmark("EVALSHA (compare + PEXPIRE)", port, c, n, &evalsha, false).await?);
    }
    Ok(rows)
}

async fn run_benchmark(
    what: &'static str,
    port: u16,
    clients: usize,
    requests: usize,
    command: &[&str],
    random_keys: bool,
) -> Result<BenchRow> {
    let mut cmd = Command::new("redis-benchmark");
    cmd.args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(["-c", &clients.to_string(), "-n", &requests.to_string()])
        .arg("--csv");
    if random_keys {
        cmd.args(["-r", "100000000"]);
    }
    cmd.args(command);
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .context("redis-benchmark task")?
        .context("run redis-benchmark (apt-get install redis-tools)")?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!(
            "redis-benchmark failed ({}): {}{}",
            out.status,
            stdout,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    parse_csv(what, clients, requests, &stdout)
        .with_context(|| format!("read redis-benchmark's CSV for {what}:\n{stdout}"))
}

/// Reads the data line of `redis-benchmark --csv`:
/// `"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"`.
fn parse_csv(what: &'static str, clients: usize, requests: usize, csv: &str) -> Result<BenchRow> {
    let line = csv
        .lines()
        .rev()
        .find(|l| !l.starts_with("\"test\"") && l.starts_with('"'))
        .context("no data line")?;
    // The test name may contain commas; the numbers are the last seven fields.
    let fields: Vec<&str> = line.rsplitn(8, ',').collect();
    if fields.len() != 8 {
        bail!("expected 8 fields in {line}");
    }
    let num = |i: usize| -> Result<f64> {
        fields[i]
            .trim_matches('"')
            .parse::<f64>()
            .with_context(|| format!("field {} of {line}", 8 - i))
    };
    let ms = |i: usize| -> Result<Duration> { Ok(Duration::from_secs_f64(num(i)? / 1e3)) };
    // rsplitn yields from the end: max, p99, p95, p50, min, avg, rps, test.
    Ok(BenchRow {
        what,
        clients,
        requests,
        rps: num(6)?,
        min: ms(4)?,
        p50: ms(3)?,
        p99: ms(1)?,
        max: ms(0)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_csv_line_of_redis_benchmark() {
        let csv = "\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\"p50_latency_ms\",\"p95_latency_ms\",\"p99_latency_ms\",\"max_latency_ms\"\n\"EVALSHA e5 1 bench:k owner 10000\",\"37523.45\",\"0.908\",\"0.224\",\"0.863\",\"1.351\",\"2.127\",\"8.247\"\n";
        let row = parse_csv("x", 50, 100, csv).expect("parses");
        assert_eq!(row.rps, 37523.45);
        assert_eq!(row.p50, Duration::from_micros(863));
        assert_eq!(row.p99, Duration::from_micros(2127));
        assert_eq!(row.max, Duration::from_micros(8247));
    }
}
