//! Everything under test, started together and stopped together: redis-server, the fenced
//! resource, one fault proxy and one leasehold process per replica. Dropping it kills every
//! process (a panic included).

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::runtime::Runtime;

use crate::config::{RunConfig, Topology};
use crate::pg::PgWrite;
use crate::redis_cli;
use crate::replica::{Incarnation, Replica, ReplicaSettings};
use crate::resource::{Resource, Write};
use crate::time::{self, Micros};
use crate::topology::{RedisCluster, SentinelSet, Topo};
use testbed::RedisServer;
use testbed::postgres::PostgresServer;
use testbed::proxy::{Fault, FaultProxy};

/// What a run leaves for the checker.
pub struct Collected {
    /// Every process of every replica, by replica.
    pub replicas: Vec<Vec<Incarnation>>,
    /// Every write the resource saw, in arrival order.
    pub writes: Vec<Write>,
    /// How many redis-server processes were started.
    pub redis_starts: u32,
    /// What PostgreSQL committed, in commit order, and what it refused.
    pub pg: Option<PgCollected>,
}

/// PostgreSQL's two tables, read at the end.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct PgCollected {
    /// `chaos_writes`, in commit order.
    pub writes: Vec<PgWrite>,
    /// `chaos_refused`.
    pub refused: Vec<PgWrite>,
    /// Why the tables could not be read, if they could not.
    pub error: Option<String>,
}

/// The system under test. Fields drop in order: replicas first, then Redis, the resource and
/// the runtime that drives the proxies and the resource.
pub struct System {
    /// The replicas.
    pub replicas: Vec<Replica>,
    /// Redis.
    pub redis: RedisServer,
    /// The fenced resource.
    pub resource: Resource,
    postgres: Option<PostgresServer>,
    runtime: Runtime,
    /// The lease's name.
    pub lease: String,
    /// The lease's key in Redis.
    pub lease_key: String,
    /// The leasehold binary (for the operator's commands the nemesis runs).
    pub leasehold: std::path::PathBuf,
    /// The Redis deployment, when it is not the single server.
    pub topo: Topo,
}

impl System {
    /// Starts Redis, the resource, the proxies and every replica.
    pub fn start(config: &RunConfig, work: &Path) -> anyhow::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("chaos-io")
            .enable_all()
            .build()
            .context("cannot start the harness's async runtime")?;
        let redis = redis_cli::server(&work.join("redis")).try_start()?;
        let resource = Resource::start(runtime.handle(), config.fencing)?;
        let postgres = if config.postgres {
            let server = PostgresServer::try_start().context("cannot start PostgreSQL")?;
            prepare_pg(&runtime, &server)?;
            Some(server)
        } else {
            None
        };
        let topo = match config.topology {
            Topology::Single => Topo::Single,
            Topology::Sentinel => Topo::Sentinel(SentinelSet::start(
                &work.join("sentinel"),
                runtime.handle(),
            )?),
            Topology::Cluster => Topo::Cluster(RedisCluster::start(&work.join("cluster"))?),
        };
        let log_dir = work.join("replicas");
        std::fs::create_dir_all(&log_dir)
            .with_context(|| format!("cannot create {}", log_dir.display()))?;
        let settings = ReplicaSettings {
            leasehold: config.leasehold.clone(),
            child_command: config.child_command.clone(),
            resource: resource.addr(),
            lease: format!("chaos/seed-{}", config.seed),
            timing: config.timing,
            write_interval: config.write_interval,
            log_dir,
            redis_url: topo.url(),
            extra_args: config.leasehold_args.clone(),
            postgres: postgres.as_ref().map(PostgresServer::addr),
            pg_fencing: config.fencing,
        };
        let mut replicas = Vec::with_capacity(config.replicas);
        for index in 0..config.replicas {
            let proxy = FaultProxy::start_on(runtime.handle(), redis.addr())?;
            replicas.push(Replica::new(index, proxy, settings.clone()));
        }
        let mut system = Self {
            replicas,
            redis,
            resource,
            postgres,
            runtime,
            lease_key: format!("leasehold:{{{}}}", settings.lease),
            lease: settings.lease.clone(),
            leasehold: config.leasehold.clone(),
            topo,
        };
        for replica in &mut system.replicas {
            replica.start()?;
        }
        Ok(system)
    }

    /// The replica that leads now (validity ahead, running, not paused), with its token. If
    /// the logs show more than one, the highest token.
    pub fn leader(&self) -> Option<(usize, u64)> {
        self.leader_proven_since(Micros::MIN)
    }

    /// The same, counting only a lease acquired or renewed at or after `since`: a leader that
    /// has not renewed since a fault ended may not know yet that it lost the lease.
    pub fn leader_proven_since(&self, since: Micros) -> Option<(usize, u64)> {
        let now = time::now();
        self.replicas
            .iter()
            .filter_map(|r| r.leading(now, since).map(|t| (r.index, t)))
            .max_by_key(|&(_, t)| t)
    }

    /// Waits until a replica leads with a lease proven at or after `since`; `None` after
    /// `timeout`. Restarts any replica whose process ended on its own meanwhile (its command
    /// exited), so the election goes on.
    pub fn wait_for_leader(&mut self, since: Micros, timeout: Duration) -> Option<(usize, u64)> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(l) = self.leader_proven_since(since) {
                return Some(l);
            }
            for r in &mut self.replicas {
                if r.reap_if_exited() {
                    eprintln!("chaos: {} exited on its own; starting it again", r.identity);
                    if let Err(e) = r.start() {
                        eprintln!("chaos: {e:#}");
                    }
                }
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Starts again every replica whose process ended on its own (its command exited).
    pub fn restart_exited(&mut self) {
        for r in &mut self.replicas {
            if r.reap_if_exited()
                && let Err(e) = r.start()
            {
                eprintln!("chaos: {e:#}");
            }
        }
    }

    /// Sets every link.
    pub fn set_all_links(&self, link: Fault) {
        for r in &self.replicas {
            r.proxy.set(link);
        }
    }

    /// Stops every replica gracefully (so that open terms end with `stepped down`), then
    /// Redis, and hands over what was collected.
    pub fn finish(self, grace: Duration) -> Collected {
        let Self {
            replicas,
            mut redis,
            resource,
            postgres,
            runtime,
            ..
        } = self;
        let _ = redis.try_signal(nix::sys::signal::Signal::SIGCONT);
        for r in &replicas {
            r.proxy.set(Fault::Pass);
        }
        let replicas: Vec<Vec<Incarnation>> =
            replicas.into_iter().map(|r| r.finish(grace)).collect();
        let redis_starts = redis.starts();
        redis.kill();
        let writes = resource.writes();
        kill_helpers(&resource.helper_pids());
        let pg = postgres.as_ref().map(|server| read_pg(&runtime, server));
        drop(postgres);
        drop(resource);
        runtime.shutdown_timeout(Duration::from_secs(2));
        Collected {
            replicas,
            writes,
            redis_starts,
            pg,
        }
    }
}

/// Kills what is left of the commands' helpers (a daemon nobody stopped writes for a while on
/// its own): pids that still run the leader's command program.
fn kill_helpers(pids: &[u32]) {
    for &pid in pids {
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        let marker = format!("{}=", crate::workload::ROLE_ENV);
        if environ
            .split(|b| *b == 0)
            .any(|kv| kv.starts_with(marker.as_bytes()))
        {
            let pid = nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap_or(i32::MAX));
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
        }
    }
}

fn prepare_pg(runtime: &Runtime, server: &PostgresServer) -> anyhow::Result<()> {
    runtime.block_on(crate::pgwrite::prepare(server.addr()))
}

fn read_pg(runtime: &Runtime, server: &PostgresServer) -> PgCollected {
    match runtime.block_on(crate::pgwrite::read_back(server.addr())) {
        Ok((writes, refused)) => PgCollected {
            writes,
            refused,
            error: None,
        },
        Err(e) => PgCollected {
            error: Some(format!("{e:#}")),
            ..PgCollected::default()
        },
    }
}
