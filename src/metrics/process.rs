//! The `process_*` metrics every Prometheus exporter has (CPU seconds, resident and virtual
//! memory, open and allowed file descriptors, start time), read from `/proc/self` (the limit
//! from `getrlimit`) at each scrape like the Go and Python clients' process collectors. prometheus-client has no such collector,
//! and the crates that offer one are written for other metric libraries, so this is a
//! [`Collector`] of its own: a few reads of `/proc`, nothing kept between scrapes. A file it
//! cannot read leaves its metrics out of that scrape rather than failing it.

use std::fmt;

use nix::sys::resource::{RLIM_INFINITY, Resource, getrlimit};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// Clock ticks per second in `/proc`'s times: USER_HZ, which the kernel's ABI fixes at 100 on
/// every architecture (the value `sysconf(_SC_CLK_TCK)` returns; Prometheus's Go procfs uses the
/// same constant).
const USER_HZ: f64 = 100.0;

/// The fields of `/proc/self/stat` this reads.
#[derive(Debug, PartialEq)]
struct Stat {
    /// User plus system CPU time, in ticks.
    cpu_ticks: u64,
    /// Start time after boot, in ticks.
    start_ticks: u64,
    virtual_bytes: u64,
    resident_pages: u64,
}

/// Parses `/proc/<pid>/stat`: the command name, field 2, is in parentheses and may hold spaces
/// and parentheses itself, so the fields are counted from the last `)`.
fn parse_stat(text: &str) -> Option<Stat> {
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // fields[0] is field 3 (state): field N is fields[N - 3].
    let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
    Some(Stat {
        cpu_ticks: field(14)? + field(15)?,
        start_ticks: field(22)?,
        virtual_bytes: field(23)?,
        resident_pages: field(24)?,
    })
}

/// The boot time in seconds since the epoch, from `/proc/stat`'s `btime` line.
fn parse_boot_time(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|line| line.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// The page size: resident memory is counted in pages.
fn page_size() -> u64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
        .ok()
        .flatten()
        .and_then(|size| u64::try_from(size).ok())
        .unwrap_or(4096)
}

/// Reads the process's metrics at each scrape.
#[derive(Debug)]
pub(super) struct Process;

fn gauge(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: f64,
) -> Result<(), fmt::Error> {
    let gauge = ConstGauge::new(value);
    gauge.encode(encoder.encode_descriptor(name, help, None, gauge.metric_type())?)
}

impl Collector for Process {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let stat = std::fs::read_to_string("/proc/self/stat")
            .ok()
            .and_then(|t| parse_stat(&t));
        if let Some(stat) = &stat {
            let cpu = ConstCounter::new(stat.cpu_ticks as f64 / USER_HZ);
            cpu.encode(encoder.encode_descriptor(
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds",
                None,
                cpu.metric_type(),
            )?)?;
            gauge(
                &mut encoder,
                "process_resident_memory_bytes",
                "Resident memory size in bytes",
                (stat.resident_pages * page_size()) as f64,
            )?;
            gauge(
                &mut encoder,
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes",
                stat.virtual_bytes as f64,
            )?;
        }
        let boot = std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|t| parse_boot_time(&t));
        if let (Some(stat), Some(boot)) = (&stat, boot) {
            gauge(
                &mut encoder,
                "process_start_time_seconds",
                "Start time of the process since the Unix epoch in seconds",
                boot as f64 + stat.start_ticks as f64 / USER_HZ,
            )?;
        }
        if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
            // The directory's own descriptor, open while it is read, is one of the entries.
            let open = fds.count().saturating_sub(1);
            gauge(
                &mut encoder,
                "process_open_fds",
                "Number of open file descriptors",
                open as f64,
            )?;
        }
        // The soft limit, as `process_max_fds` means it; none shown when unlimited.
        if let Ok((max, _)) = getrlimit(Resource::RLIMIT_NOFILE)
            && max != RLIM_INFINITY
        {
            gauge(
                &mut encoder,
                "process_max_fds",
                "Maximum number of open file descriptors",
                max as f64,
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stat_fields_are_counted_from_the_last_parenthesis() {
        let line = "4242 (lease) (hold 1)) S 1 4242 4242 0 -1 4194560 520 0 0 0 \
                    150 50 0 0 20 0 9 0 123456 52428800 2560 18446744073709551615";
        assert_eq!(
            parse_stat(line),
            Some(Stat {
                cpu_ticks: 200,
                start_ticks: 123456,
                virtual_bytes: 52428800,
                resident_pages: 2560,
            })
        );
        assert_eq!(parse_stat("4242 (cut short) S 1 2"), None);
        assert_eq!(parse_stat("no parenthesis"), None);
    }

    #[test]
    fn boot_time_is_read_from_its_row() {
        assert_eq!(
            parse_boot_time("cpu  1 2 3\nbtime 1764720000\nprocesses 9\n"),
            Some(1764720000)
        );
        assert_eq!(parse_boot_time("cpu 1\n"), None);
    }
}
