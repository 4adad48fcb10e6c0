//! A started replica: `leasehold run` as a guarded child process with its HTTP server on a
//! loopback address and its stdout and stderr collected; the tests' ways to start one (a replica
//! of a lease on a Redis, leader readiness and debug logs unless asked otherwise), and what
//! callers read of it: its endpoints, its metrics, its JSON log lines, its exit.

use std::ffi::OsStr;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use nix::sys::signal::Signal;
use nix::unistd::Pid;
use testbed::Guarded;
use testbed::http::http_get;
use testbed::wait::wait_for;

use crate::command::{RunCommand, leasehold_command};
use crate::startup::{NotStarted, wait_healthy};
use crate::target::leasehold_bin;

/// Fast timings for process tests: TTL 1.5 s, renew deadline 900 ms, retry 250 ms, the flags
/// of [`STEADY`](super::timings::STEADY) (`tests/processes/binary.rs` checks that they stay so).
pub const FAST: [&str; 6] = [
    "--lease-duration",
    "1500ms",
    "--renew-deadline",
    "900ms",
    "--retry-period",
    "250ms",
];

/// Timings under which only a release explains a fast handover: TTL 10 s, renew deadline 6 s,
/// retry 2 s, and no data-loss cooldown (a fresh Redis elects at once).
pub const RELEASE_ONLY: [&str; 7] = [
    "--lease-duration",
    "10s",
    "--renew-deadline",
    "6s",
    "--retry-period",
    "2s",
    "--no-data-loss-cooldown",
];

/// The timing of the gray-failure and clock reports: TTL 2 s, renew deadline 1.4 s, retry
/// 400 ms (an acquire bounded by 467 ms), and no data-loss cooldown (a fresh Redis elects at
/// once).
pub const TWO_SECOND_TERM: [&str; 7] = [
    "--lease-duration",
    "2s",
    "--renew-deadline",
    "1400ms",
    "--retry-period",
    "400ms",
    "--no-data-loss-cooldown",
];

/// One `leasehold run` process.
pub struct Replica {
    /// Its `--identity`.
    pub identity: String,
    /// Its `--http-addr`; for a replica given port 0, the port it is bound to once it is up
    /// ([`wait_healthy`](Self::wait_healthy)).
    pub http: SocketAddr,
    /// The process; dropping it kills it and, when the caller panics, prints its output.
    pub process: Guarded,
}

impl Replica {
    /// Starts `run` as `identity` with its HTTP server on `http` (port 0: one the kernel picks),
    /// once `configure` has had the command (for its environment); does not wait for it.
    pub fn launch(
        run: RunCommand,
        identity: &str,
        http: SocketAddr,
        configure: impl FnOnce(&mut Command),
    ) -> io::Result<Self> {
        let mut cmd = run.identity(identity).http_addr(http).build();
        configure(&mut cmd);
        let process = Guarded::spawn(cmd, &format!("leasehold {identity}"))?;
        Ok(Self {
            identity: identity.to_owned(),
            http,
            process,
        })
    }

    /// `leasehold run` for `lease` on `redis_url` as `name`, with `args` added (timings etc.)
    /// and `command` after `--` when not empty.
    pub fn spawn(
        redis_url: &str,
        lease: &str,
        name: &str,
        args: &[&str],
        command: &[&str],
    ) -> Self {
        Self::spawn_with_env(redis_url, lease, name, args, command, &[])
    }

    /// [`spawn`](Self::spawn) with `env` added to its environment. An empty `redis_url` or
    /// `lease` is left out (as for a replica configured by a file in `args`).
    pub fn spawn_with_env(
        redis_url: &str,
        lease: &str,
        name: &str,
        args: &[&str],
        command: &[&str],
        env: &[(&str, &str)],
    ) -> Self {
        let mut run = RunCommand::new(leasehold_bin());
        if !redis_url.is_empty() {
            run = run.redis_url(redis_url);
        }
        if !lease.is_empty() {
            run = run.lease(lease);
        }
        Self::start(run.args(args).command(command), name, env).healthy()
    }

    /// Starts `run` as `name` the way the tests start a replica: its HTTP server on a port the
    /// kernel picks (no other test's process can take it first, or answer for it), debug logs and `env` added to its environment; does not wait for it to answer
    /// (see [`healthy`](Self::healthy)), so it also serves a replica that must be refused at
    /// start. `run` may wrap the binary in another command (as
    /// [`testbed::hosts::Hosts::command`] does).
    pub fn start(mut run: RunCommand, name: &str, env: &[(&str, &str)]) -> Self {
        // The tests find the leader by its readiness unless they ask for member mode (or test
        // a config file, whose readiness a flag would override).
        if !run.names("--config") {
            run = run.default_arg("--readiness", "leader");
        }
        let any_port = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        Self::launch(run, name, any_port, |cmd| {
            cmd.env("RUST_LOG", "leasehold=debug")
                .envs(env.iter().copied());
        })
        .expect("spawn leasehold")
    }

    /// Itself once it answers `/healthz`; panics with its log when it does not within 10 s.
    pub fn healthy(mut self) -> Self {
        if let Err(why) = self.wait_healthy(Duration::from_secs(10)) {
            panic!("{} {why}:\n{}", self.identity, self.log_text());
        }
        self
    }

    /// Waits up to `within` until it answers `/healthz`, or has exited.
    pub fn wait_healthy(&mut self, within: Duration) -> Result<(), NotStarted> {
        wait_healthy(&mut self.process, &mut self.http, within)
    }

    /// Its process id.
    pub fn pid(&self) -> Pid {
        self.process.pid()
    }

    /// Sends it `signal`.
    pub fn signal(&self, signal: Signal) {
        self.process.signal(signal).expect("signal leasehold");
    }

    /// GET `path` on the replica's HTTP port: status code and body, or `None` when it does not
    /// answer.
    pub fn get(&self, path: &str) -> Option<(u16, String)> {
        http_get(self.http, path)
    }

    /// Whether `/readyz` answers 200.
    pub fn is_ready(&self) -> bool {
        self.get("/readyz").is_some_and(|(code, _)| code == 200)
    }

    /// The `/readyz` body once it says why the replica is not ready (a 503 past `starting`),
    /// for a replica that cannot take part (`--readiness member` says it in either role).
    /// Panics after `within`.
    pub fn wait_not_ready_reason(&self, within: Duration) -> String {
        wait_for("readiness to give the reason", within, || {
            // Before its first call has failed, the replica is only "starting".
            self.get("/readyz")
                .filter(|(code, body)| *code == 503 && !body.starts_with("not ready: starting"))
                .map(|(_, body)| body)
        })
    }

    /// `/leader` as JSON, when it answers 200 with JSON.
    pub fn leader_view(&self) -> Option<serde_json::Value> {
        let (code, body) = self.get("/leader")?;
        (code == 200).then(|| serde_json::from_str(&body).ok())?
    }

    /// The `/leader` JSON; panics when it does not answer.
    pub fn leader(&self) -> serde_json::Value {
        let (_, body) = self.get("/leader").expect("/leader answers");
        serde_json::from_str(&body).expect("/leader is JSON")
    }

    /// One metric's value from `/metrics` (the first line that starts with `name`).
    pub fn metric(&self, name: &str) -> Option<f64> {
        let (_, body) = self.get("/metrics")?;
        body.lines()
            .find(|l| l.starts_with(name) && l[name.len()..].starts_with([' ', '{']))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
    }

    /// The log lines (JSON) so far.
    pub fn logs(&self) -> Vec<serde_json::Value> {
        self.process
            .stderr
            .snapshot()
            .iter()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// How many log lines it wrote so far.
    pub fn log_len(&self) -> usize {
        self.process.stderr.len()
    }

    /// Its log so far, as text.
    pub fn log_text(&self) -> String {
        self.process.stderr.text()
    }

    pub fn stdout(&self) -> Vec<String> {
        self.process.stdout.snapshot()
    }

    /// Log events whose message is `message`.
    pub fn events(&self, message: &str) -> Vec<serde_json::Value> {
        self.logs()
            .into_iter()
            .filter(|l| l["message"] == message)
            .collect()
    }

    /// When a log event was written, by the replica's own clock (its `timestamp`).
    pub fn logged_at(event: &serde_json::Value) -> Option<SystemTime> {
        humantime::parse_rfc3339(event["timestamp"].as_str()?).ok()
    }

    /// Log events whose message is `message`, once there are at least `count` of them: a line
    /// reaches the collector a moment after it was written, maybe after what the test saw over
    /// HTTP or in another process. Panics after `within` (the log is printed with the panic).
    pub fn wait_events(
        &self,
        message: &str,
        count: usize,
        within: Duration,
    ) -> Vec<serde_json::Value> {
        let what = format!("{} to log {count} `{message}`", self.identity);
        wait_for(&what, within, || {
            let events = self.events(message);
            (events.len() >= count).then_some(events)
        })
    }

    /// For a replica started with [`start`](Self::start) given a file (`flag PATH`) that the live
    /// leasehold `owner` writes: it must be refused at start, with exit code 2 and a message
    /// naming the flag, the file and the owner's pid.
    pub fn assert_refused_for_a_file_of(mut self, flag: &str, path: &Path, owner: Pid) {
        let code = self.wait_exit(Duration::from_secs(10));
        let said = self.log_text();
        assert_eq!(code, 2, "{said}");
        assert!(
            said.contains(&format!("{flag} {}", path.display())),
            "{said}"
        );
        assert!(
            said.contains(&format!("pid {owner}")),
            "names the owner: {said}"
        );
    }

    /// Waits for the process to exit; its exit code.
    pub fn wait_exit(&mut self, timeout: Duration) -> i32 {
        match self
            .process
            .wait_exit(timeout)
            .expect("poll leasehold's exit")
        {
            Some(code) => code,
            None => panic!(
                "{} did not exit within {timeout:?}:\n{}",
                self.identity,
                self.log_text()
            ),
        }
    }
}

/// `leasehold run` without Kubernetes, against a Redis that is not there (unless `args` name
/// another), with `args`: for a run that must be refused, or stopped by [`exit_within`].
pub fn run_without_redis(args: &[&str]) -> Command {
    let mut cmd = Command::new(leasehold_bin());
    cmd.args(["run", "--kubernetes", "off"]);
    if !args.contains(&"--redis-url") {
        cmd.args(["--redis-url", "redis://127.0.0.1:1"]);
    }
    cmd.args(args);
    cmd
}

/// Runs `cmd` (`leasehold run` with the arguments under test) until it exits, for at most
/// `bound`: its exit code and stderr, or `None` for the code when it still ran after `bound` (it
/// accepted the input), and then it is killed. Its environment names the lease (`web`), so that
/// only the rule under test can stop it.
pub fn exit_within(mut cmd: Command, bound: Duration) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let stderr_path = dir.path().join("stderr");
    cmd.env_remove("POD_NAME")
        .env_remove("POD_NAMESPACE")
        .env_remove("LEASEHOLD_REDIS_URL")
        .env("LEASEHOLD_LEASE_NAME", "web")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr_path).expect("stderr file"));
    let mut child = cmd.spawn().expect("run leasehold");
    let started = Instant::now();
    let code = loop {
        if let Some(status) = child.try_wait().expect("poll leasehold") {
            break Some(status.code().unwrap_or(-1));
        }
        if started.elapsed() > bound {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stderr = std::fs::read_to_string(&stderr_path).expect("read stderr");
    (code, stderr)
}

/// Words that belong to leasehold's or its libraries' insides and never to a message for its
/// user: type and variant names of the Redis client, TLS and YAML libraries
/// (`AuthenticationFailed`, `Server(ResponseError)`, `UnknownIssuer`, `Sequence [Number(1)]`),
/// a duration parser's position (`expected number at 0`), a zero duration as `0ns`, and the
/// lease's primitives by their code names (`` `observe` ``).
pub const INTERNAL_WORDS: &[&str] = &[
    "AuthenticationFailed",
    "ResponseError",
    "UnknownIssuer",
    "Sequence",
    "Mapping(",
    "Number(",
    "String(",
    "expected number at",
    "invalid character at",
    "0ns",
    "`acquire`",
    "`renew`",
    "`release`",
    "`observe`",
    "`handover`",
    "`remove`",
    "`subscribe`",
    "`ping`",
    "`info`",
];

/// `leasehold status` of `lease` on `redis_url`, as text; panics unless it exits 0.
pub fn lease_status(redis_url: &str, lease: &str) -> String {
    let (code, out, err) = run_to_end(
        &["status", "--redis-url", redis_url, "--lease-name", lease],
        &[],
    );
    assert_eq!(code, 0, "leasehold status: {err}");
    out
}

/// `leasehold status --output json` of `lease` on `redis_url`: the document, or why there is
/// none (the exit code and stderr, or the output that is not JSON).
pub fn lease_status_json(redis_url: &str, lease: &str) -> Result<serde_json::Value, String> {
    let (code, out, err) = run_to_end(
        &[
            "status",
            "--redis-url",
            redis_url,
            "--lease-name",
            lease,
            "--output",
            "json",
        ],
        &[],
    );
    if code != 0 {
        return Err(format!("leasehold status exited {code}: {err}"));
    }
    serde_json::from_str(&out).map_err(|e| format!("leasehold status printed no JSON ({e}): {out}"))
}

/// Panics when `message` (what leasehold said to its user) holds one of the
/// [`INTERNAL_WORDS`].
pub fn assert_in_plain_words(message: &str) {
    for word in INTERNAL_WORDS {
        assert!(
            !message.contains(word),
            "`{word}` is no word for the user, in:\n{message}"
        );
    }
}

/// Runs `leasehold step-down` for `lease` on `url` with `extra` to the end: exit code, the JSON
/// it printed (`Null` when none), stderr.
pub fn step_down(url: &str, lease: &str, extra: &[&str]) -> (i32, serde_json::Value, String) {
    let mut argv = vec!["step-down", "--redis-url", url, "--lease-name", lease];
    argv.extend_from_slice(&["--output", "json"]);
    argv.extend_from_slice(extra);
    let (code, stdout, stderr) = run_to_end(&argv, &[]);
    let json = serde_json::from_str(&stdout).unwrap_or(serde_json::Value::Null);
    (code, json, stderr)
}

/// Runs the binary with `args` to completion: exit code, stdout, stderr.
pub fn run_to_end(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let env: Vec<(&str, &OsStr)> = env.iter().map(|(k, v)| (*k, OsStr::new(v))).collect();
    run_to_end_with(args, &env)
}

/// [`run_to_end`] with variables that need not be UTF-8.
pub fn run_to_end_with(args: &[&str], env: &[(&str, &OsStr)]) -> (i32, String, String) {
    let out = leasehold_command(leasehold_bin())
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("run leasehold");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
