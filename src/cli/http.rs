//! The flags of the HTTP endpoints and the status file (`leasehold run`), and their validation:
//! the address, the readiness mode, the status file's directory, and the limits on what clients
//! may hold (connections, event streams).

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;

use super::resolve::folder;
use super::{CliError, parse_socket_addr};
use crate::http::{
    DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_EVENT_STREAMS, Limits, PROBE_RESERVE, ReadinessMode,
};
use crate::open_files::{self, KEPT};

const CONNECTIONS_RULE: &str = "must be from 1 to 4096: each connection holds a file and up to 64 KiB of buffers, and the chart's memory limit is 128 MiB";
const EVENT_STREAMS_RULE: &str = "must be lower than --http-max-connections, so that event streams never take every connection from /leader and /metrics";

/// Where the election's state is shown: the HTTP endpoints and the status file.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Status: HTTP (/healthz /readyz /leader /metrics) and file")]
pub struct HttpArgs {
    /// Address of the HTTP endpoints: `ip:port`, or `host:port` with a host name resolved at start
    /// (its first address).
    #[arg(long, env = "LEASEHOLD_HTTP_ADDR", default_value = "0.0.0.0:8080", value_parser = parse_socket_addr)]
    pub http_addr: SocketAddr,
    /// What `/readyz` reports. `member` is the default because with `leader` only one pod of a
    /// Deployment is ever ready, which stalls rolling updates (route to the leader with a
    /// Service that selects the leader label instead).
    #[arg(long, env = "LEASEHOLD_READINESS", value_enum, default_value_t = ReadinessMode::Member)]
    pub readiness: ReadinessMode,
    /// Connections the HTTP endpoints serve at once (at most 4096). Beyond it a few more are
    /// kept for `/healthz` and `/readyz` alone, and the rest are closed at once.
    #[arg(long, env = "LEASEHOLD_HTTP_MAX_CONNECTIONS", value_name = "N", default_value_t = DEFAULT_MAX_CONNECTIONS, allow_negative_numbers = true)]
    pub http_max_connections: usize,
    /// Clients of `/leader`'s event stream served at once, lower than --http-max-connections;
    /// beyond it `503` with `Retry-After`.
    #[arg(long, env = "LEASEHOLD_HTTP_MAX_EVENT_STREAMS", value_name = "N", default_value_t = DEFAULT_MAX_EVENT_STREAMS, allow_negative_numbers = true)]
    pub http_max_event_streams: usize,
    /// Keep the election's state in this file (format `leasehold-status 2`: until when this
    /// replica leads, on the boot clock, with the reader's rule), rewritten atomically (a
    /// temporary file renamed over it) at every change and every renewal; for apps that share a
    /// volume with leasehold.
    #[arg(long, env = "LEASEHOLD_STATUS_FILE", value_name = "PATH")]
    pub status_file: Option<PathBuf>,
}

impl HttpArgs {
    /// The status file, refused when its directory does not exist or it is a directory.
    pub(super) fn status_file(&self) -> Result<Option<PathBuf>, CliError> {
        let Some(path) = &self.status_file else {
            return Ok(None);
        };
        // A trailing slash names a directory (`Path` reads `d/` as the name `d`).
        let slash = path.as_os_str().as_encoded_bytes().ends_with(b"/");
        if path.file_name().is_some() && folder(path).is_dir() && !path.is_dir() && !slash {
            return Ok(Some(path.clone()));
        }
        Err(CliError::value(
            "status-file",
            path.display(),
            "must name a file in an existing directory",
        ))
    }

    /// The limits on what clients may hold, refused when out of their bounds or of the files
    /// this process may open.
    pub(super) fn limits(&self) -> Result<Limits, CliError> {
        let (connections, streams) = (self.http_max_connections, self.http_max_event_streams);
        limits(connections, streams, open_files::hard())
    }
}

fn limits(connections: usize, event_streams: usize, files: u64) -> Result<Limits, CliError> {
    if !(1..=4096).contains(&connections) {
        return Err(CliError::value(
            "http-max-connections",
            connections,
            CONNECTIONS_RULE,
        ));
    }
    if event_streams >= connections {
        return Err(CliError::value(
            "http-max-event-streams",
            event_streams,
            EVENT_STREAMS_RULE,
        ));
    }
    let limits = Limits {
        max_connections: connections,
        max_event_streams: event_streams,
        ..Limits::default()
    };
    if limits.files() > files {
        let rule = format!(
            "needs {} open files with the {PROBE_RESERVE} connections kept for probes and {KEPT} files for Redis and the rest, and this process may open {files} (its hard RLIMIT_NOFILE): lower it, or raise the limit",
            limits.files()
        );
        return Err(CliError::value("http-max-connections", connections, rule));
    }
    Ok(limits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_limits_out_of_their_bounds_are_refused_naming_the_flag() {
        let cases = [
            (256, 64, u64::MAX, None),
            (1, 0, u64::MAX, None),
            (4096, 4095, u64::MAX, None),
            (256, 64, 336, None),
            (0, 0, u64::MAX, Some("--http-max-connections `0`")),
            (4097, 64, u64::MAX, Some("--http-max-connections `4097`")),
            (64, 64, u64::MAX, Some("--http-max-event-streams `64`")),
            (64, 65, u64::MAX, Some("--http-max-event-streams `65`")),
            (256, 64, 335, Some("needs 336 open files")),
        ];
        for (connections, streams, files, refused) in cases {
            let got = limits(connections, streams, files);
            match (refused, got) {
                (None, Ok(l)) => assert_eq!(
                    (l.max_connections, l.max_event_streams),
                    (connections, streams)
                ),
                (Some(want), Err(e)) => {
                    let text = e.to_string();
                    assert!(text.contains(want), "{text} should name {want}");
                    assert_eq!(e.exit_code(), 2, "{text}");
                }
                (want, got) => panic!("{connections} {streams}: want {want:?}, got {got:?}"),
            }
        }
    }
}
