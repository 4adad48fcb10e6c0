//! Prometheus for tests: `promtool`, and a real `prometheus` server on a free loopback port in
//! its own temporary directory, killed on drop, whose HTTP API a test reads. The binaries come
//! from Debian's `prometheus` package; a missing one fails the test, never skips it.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::child::Guarded;
use crate::port::free_addr;

fn on_path(env_var: &str, name: &str) -> PathBuf {
    if let Some(path) = std::env::var_os(env_var).filter(|v| !v.is_empty()) {
        return PathBuf::from(path);
    }
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join(name))
                .find(|p| p.is_file())
        })
        .unwrap_or_else(|| {
            panic!(
                "{name} not found on PATH (or ${env_var}): apt-get install prometheus (Debian's \
                 package carries prometheus and promtool)"
            )
        })
}

/// `promtool` (check rules, test rules, check metrics).
pub fn promtool() -> PathBuf {
    on_path("TESTBED_PROMTOOL", "promtool")
}

/// The `prometheus` server.
pub fn prometheus() -> PathBuf {
    on_path("TESTBED_PROMETHEUS", "prometheus")
}

/// Runs `promtool args…` in `dir`: exit code and everything it printed.
pub fn run_promtool(dir: &Path, args: &[&str], stdin: Option<&str>) -> (i32, String) {
    let mut child = Command::new(promtool())
        .args(args)
        .current_dir(dir)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run promtool");
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(text.as_bytes()).expect("feed promtool");
    }
    let out = child.wait_with_output().expect("promtool output");
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// A real prometheus server on a free loopback port, in its own temporary directory.
pub struct Prometheus {
    pub addr: SocketAddr,
    dir: tempfile::TempDir,
    child: Guarded,
}

impl Prometheus {
    /// Starts prometheus with `config` (its prometheus.yml; a `rule_files` entry `rules.yaml`
    /// names `rules`) and waits until it is ready.
    pub fn start(config: &str, rules: &str) -> Self {
        let mut dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("prometheus.yml"), config).expect("write config");
        std::fs::write(dir.path().join("rules.yaml"), rules).expect("write rules");
        let mut last_log = String::new();
        for _ in 0..5 {
            let addr = free_addr();
            let mut cmd = Command::new(prometheus());
            cmd.arg(format!(
                "--config.file={}",
                dir.path().join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"));
            let child = Guarded::spawn(cmd, &format!("prometheus on {addr}"))
                .unwrap_or_else(|e| panic!("{e}"));
            let mut server = Self { addr, dir, child };
            let deadline = Instant::now() + Duration::from_secs(30);
            while Instant::now() < deadline {
                if server.get("/-/ready").is_some_and(|(code, _)| code == 200) {
                    return server;
                }
                if !server.child.is_running() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            last_log = server.log();
            server.child.kill();
            // Keep the directory (config, rules) for the next try on another port.
            dir = std::mem::replace(&mut server.dir, tempfile::tempdir().expect("temp dir"));
        }
        panic!("prometheus did not become ready on any free port:\n{last_log}");
    }

    /// What prometheus logged (on its stderr).
    pub fn log(&self) -> String {
        self.child.stderr.text()
    }

    /// GET `path_and_query` over HTTP/1.0 (so the body is never chunked): code and body.
    fn get(&self, path_and_query: &str) -> Option<(u16, String)> {
        crate::http::get(
            self.addr,
            path_and_query,
            "HTTP/1.0",
            Duration::from_secs(5),
        )
    }

    /// The `data` of an API call that must succeed.
    fn api(&self, path_and_query: &str) -> serde_json::Value {
        let (code, body) = self
            .get(path_and_query)
            .unwrap_or_else(|| panic!("prometheus does not answer {path_and_query}"));
        let json: serde_json::Value = serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("{path_and_query}: not JSON ({e}): {body}"));
        assert!(
            code == 200 && json["status"] == "success",
            "{path_and_query}: {code} {body}"
        );
        json["data"].clone()
    }

    /// An instant query: the result vector.
    pub fn query(&self, promql: &str) -> Vec<serde_json::Value> {
        let data = self.api(&format!("/api/v1/query?query={}", encode(promql)));
        data["result"].as_array().cloned().unwrap_or_default()
    }

    /// A range query over the last `range` with `step`: the result matrix.
    pub fn query_range(
        &self,
        promql: &str,
        range: Duration,
        step: Duration,
    ) -> Vec<serde_json::Value> {
        let end = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_secs_f64();
        let data = self.api(&format!(
            "/api/v1/query_range?query={}&start={:.3}&end={end:.3}&step={}",
            encode(promql),
            end - range.as_secs_f64(),
            step.as_secs_f64()
        ));
        data["result"].as_array().cloned().unwrap_or_default()
    }

    /// The active alerts: (alert name, state), state being `pending` or `firing`.
    pub fn alerts(&self) -> Vec<(String, String)> {
        self.api("/api/v1/alerts")["alerts"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|a| {
                (
                    a["labels"]["alertname"].as_str().unwrap_or("").to_owned(),
                    a["state"].as_str().unwrap_or("").to_owned(),
                )
            })
            .collect()
    }

    /// The health of every loaded rule: (rule name, health, last error).
    pub fn rule_health(&self) -> Vec<(String, String, String)> {
        self.api("/api/v1/rules")["groups"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
            .map(|r| {
                let s = |k: &str| r[k].as_str().unwrap_or("").to_owned();
                (s("name"), s("health"), s("lastError"))
            })
            .collect()
    }
}

/// Percent-encodes a query parameter.
fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
