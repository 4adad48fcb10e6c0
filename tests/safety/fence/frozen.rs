//! A frozen leader's command has its writes refused once the next leader has written: two real
//! `leasehold run` replicas whose command writes in a loop through the doc's shell recipe (psql,
//! or redis-cli with the Redis script) with `$LEASEHOLD_FENCING_TOKEN`. The leader's pod is
//! frozen (leasehold and its command, SIGSTOP) past the TTL; the follower takes over and writes;
//! then the old command resumes first, before its leasehold can stop it. The resource is the
//! judge: no write of the old term lands after the new term's first.

use std::path::Path;
use std::time::Duration;

use leasehold::fence::redis::LUA;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use super::docs::snippet;
use super::postgres_table::{self, prepare};
use super::redis_script;
use harness::contenders::unique_lease;
use harness::replica::{FAST, Replica};
use testbed::postgres::PostgresServer;
use testbed::redis_server::RedisServer;
use testbed::wait::wait_for;

/// The leader's command: the recipe in a loop, one line per attempt (`ok` or `refused`).
const LOOP: &str = r#"cd "$DIR" || exit 1
echo $$ > "pid.$LEASEHOLD_IDENTITY"
while :; do
  if sh ./write.sh 2>> "err.$LEASEHOLD_IDENTITY"; then r=ok; else r=refused; fi
  echo "$r" >> "log.$LEASEHOLD_IDENTITY"
  sleep 0.05
done"#;

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// A command's process group, resumed and killed when the test ends however it ends.
struct Group(Pid);

impl Group {
    fn signal(&self, signal: Signal) {
        killpg(self.0, signal).expect("signal the command's process group");
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        let _ = killpg(self.0, Signal::SIGCONT);
        let _ = killpg(self.0, Signal::SIGKILL);
    }
}

fn group_alive(pgid: Pid) -> bool {
    killpg(pgid, None).is_ok()
}

/// Runs the scenario with `recipe` as write.sh (and `files` beside it); `runs` reads the
/// resource's accepted writes as (leader, token) in the order they were accepted; `stale` is
/// what the recipe prints when the resource refuses its token.
fn frozen_leader_is_refused(
    lease_redis: &RedisServer,
    recipe: &str,
    files: &[(&str, &str)],
    env: &[(&str, &str)],
    runs: &dyn Fn() -> Vec<(String, u64)>,
    stale: &str,
) {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("write.sh"), recipe).expect("write.sh");
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).expect("write a recipe file");
    }
    let dir_env = dir.path().to_str().expect("utf-8 temp path").to_owned();
    let mut env = env.to_vec();
    env.push(("DIR", &dir_env));
    let mut args = FAST.to_vec();
    args.push("--no-data-loss-cooldown");
    let lease = unique_lease("fenced-freeze");
    let command = ["sh", "-c", LOOP];
    let a = Replica::spawn_with_env(&lease_redis.url(), &lease, "a", &args, &command, &env);
    wait_for("a to lead", Duration::from_secs(10), || {
        a.is_ready().then_some(())
    });
    let b = Replica::spawn_with_env(&lease_redis.url(), &lease, "b", &args, &command, &env);
    wait_for("b to follow a", Duration::from_secs(10), || {
        (b.leader()["leader"] == "a").then_some(())
    });
    wait_for("a's command to write", Duration::from_secs(10), || {
        (runs().iter().filter(|r| r.0 == "a").count() >= 2).then_some(())
    });
    let pid: i32 = wait_for("a's command pid", Duration::from_secs(5), || {
        std::fs::read_to_string(dir.path().join("pid.a"))
            .ok()?
            .trim()
            .parse()
            .ok()
    });
    let command_a = Group(Pid::from_raw(pid));

    // The pod freezes: its command and its leasehold.
    command_a.signal(Signal::SIGSTOP);
    a.signal(Signal::SIGSTOP);
    wait_for("b to write", Duration::from_secs(20), || {
        runs().iter().any(|r| r.0 == "b").then_some(())
    });

    // The old command resumes first, with its old token, before its leasehold can stop it.
    let log_a = dir.path().join("log.a");
    let before = lines(&log_a).len();
    command_a.signal(Signal::SIGCONT);
    let after = wait_for("a's command to try again", Duration::from_secs(10), || {
        let l = lines(&log_a);
        (l.len() >= before + 2).then(|| l[before..].to_vec())
    });
    // The first line may be an attempt that was under way at the freeze (accepted before the new
    // leader's write, as the resource shows below); every attempt after it is refused.
    assert!(
        after[1..].iter().all(|r| r == "refused"),
        "the old command's writes after the new leader's were accepted: {after:?}"
    );
    let errors = std::fs::read_to_string(dir.path().join("err.a")).unwrap_or_default();
    assert!(
        errors.contains(stale),
        "refused as stale ({stale}): {errors}"
    );

    // Its leasehold resumes, sees the term over and stops the command.
    a.signal(Signal::SIGCONT);
    wait_for("a's command to be stopped", Duration::from_secs(10), || {
        (!group_alive(command_a.0)).then_some(())
    });
    let runs = runs();
    let first_b = runs.iter().position(|r| r.0 == "b").expect("b wrote");
    assert!(
        runs[first_b..].iter().all(|r| r.0 == "b"),
        "a wrote after b: {runs:?}"
    );
    assert!(
        runs.windows(2).all(|w| w[0].1 <= w[1].1),
        "an older token wrote after a newer one: {runs:?}"
    );
    eprintln!(
        "accepted: {} from a, {} from b; a's attempts refused after resume: {}",
        first_b,
        runs.len() - first_b,
        after.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_leaders_psql_writes_are_refused_once_the_next_leader_has_written() {
    let postgres = PostgresServer::start();
    prepare(&postgres).await;
    let redis = RedisServer::start();
    let url = postgres.url();
    tokio::task::spawn_blocking(move || {
        frozen_leader_is_refused(
            &redis,
            &snippet("psql-write"),
            &[],
            &[("DATABASE_URL", &url)],
            &|| postgres_table::runs(&postgres),
            "stale fencing token",
        )
    })
    .await
    .expect("the scenario");
}

#[test]
fn a_frozen_leaders_redis_cli_writes_are_refused_once_the_next_leader_has_written() {
    // The fenced resource lives in the lease's own Redis.
    let redis = RedisServer::start();
    frozen_leader_is_refused(
        &redis,
        &snippet("redis-cli-write"),
        &[("fence.lua", LUA)],
        &[("REDIS_URL", &redis.url())],
        &|| redis_script::runs(&redis),
        "STALE seen=",
    );
}
