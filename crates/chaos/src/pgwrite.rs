//! The PostgreSQL side of the leader's work and of the checker: the command writes each
//! record in one transaction whose first statement is leasehold's fencing advance
//! (`leasehold::fence::postgres`, the statements of `src/fence/postgres.sql`); a stale token
//! commits nothing, and the refusal is noted in a table of its own. At the end the harness
//! reads both tables back. With fencing off (the negative control) the advance is skipped.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use leasehold::fence::FenceError;
use leasehold::fence::postgres;
use leasehold::lease::FencingToken;
use tokio::runtime::Runtime;
use tokio_postgres::{Client, NoTls};

use crate::pg::PgWrite;

/// The fenced resource's name in `leasehold_fence`.
pub const RESOURCE: &str = "chaos";

const TABLES: &str = "
CREATE TABLE IF NOT EXISTS chaos_writes (
    id bigserial PRIMARY KEY,
    token bigint NOT NULL,
    identity text NOT NULL,
    pid bigint NOT NULL,
    seq bigint NOT NULL,
    role text NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TABLE IF NOT EXISTS chaos_refused (
    id bigserial PRIMARY KEY,
    token bigint NOT NULL,
    identity text NOT NULL,
    pid bigint NOT NULL,
    seq bigint NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp()
);
";

const CALL: Duration = Duration::from_secs(2);

fn config(addr: SocketAddr) -> tokio_postgres::Config {
    let mut c = tokio_postgres::Config::new();
    c.host(addr.ip().to_string())
        .port(addr.port())
        .user("postgres")
        .dbname("postgres")
        .connect_timeout(Duration::from_secs(1))
        .options("-c lock_timeout=1500 -c statement_timeout=3000");
    c
}

async fn connect(addr: SocketAddr) -> anyhow::Result<Client> {
    let (client, connection) = config(addr)
        .connect(NoTls)
        .await
        .with_context(|| format!("cannot connect to postgres at {addr}"))?;
    tokio::spawn(connection);
    Ok(client)
}

/// Creates the fence table and the harness's two tables.
pub async fn prepare(addr: SocketAddr) -> anyhow::Result<()> {
    let client = connect(addr).await?;
    postgres::create_table(&client)
        .await
        .context("cannot create leasehold_fence")?;
    client
        .batch_execute(TABLES)
        .await
        .context("cannot create the chaos tables")
}

/// Every committed write in commit order, and every refusal.
pub async fn read_back(addr: SocketAddr) -> anyhow::Result<(Vec<PgWrite>, Vec<PgWrite>)> {
    let client = connect(addr).await?;
    let mut out = Vec::new();
    for (table, role) in [("chaos_writes", "role"), ("chaos_refused", "''")] {
        let rows = client
            .query(
                &format!(
                    "SELECT id, (extract(epoch FROM at) * 1000000)::bigint, token, identity, pid, seq, {role} FROM {table} ORDER BY id"
                ),
                &[],
            )
            .await
            .with_context(|| format!("cannot read {table}"))?;
        out.push(
            rows.iter()
                .map(|r| PgWrite {
                    id: r.get(0),
                    at: r.get(1),
                    token: u64::try_from(r.get::<_, i64>(2)).unwrap_or(0),
                    identity: r.get(3),
                    pid: u32::try_from(r.get::<_, i64>(4)).unwrap_or(0),
                    seq: u64::try_from(r.get::<_, i64>(5)).unwrap_or(0),
                    role: r.get(6),
                })
                .collect::<Vec<_>>(),
        );
    }
    let refused = out.pop().unwrap_or_default();
    let writes = out.pop().unwrap_or_default();
    Ok((writes, refused))
}

/// The command's PostgreSQL connection, made again after any failure.
pub struct PgWriter {
    addr: SocketAddr,
    fencing: bool,
    runtime: Option<Runtime>,
    client: Option<Client>,
}

impl PgWriter {
    /// A writer for the server at `addr`.
    pub fn new(addr: SocketAddr, fencing: bool) -> Self {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .ok();
        Self {
            addr,
            fencing,
            runtime,
            client: None,
        }
    }

    /// One fenced write; failures (a stale token included) leave nothing committed.
    pub fn write(&mut self, token: u64, identity: &str, pid: u32, seq: u64, role: char) {
        let Some(runtime) = self.runtime.as_ref() else {
            return;
        };
        let (addr, fencing) = (self.addr, self.fencing);
        let mut client = self.client.take();
        let kept = runtime.block_on(async move {
            if client.is_none() {
                client = tokio::time::timeout(CALL, connect(addr)).await.ok()?.ok();
            }
            let mut c = client?;
            let done = tokio::time::timeout(
                CALL,
                transaction(&mut c, fencing, token, identity, pid, seq, role),
            )
            .await;
            matches!(done, Ok(Ok(()))).then_some(c)
        });
        self.client = kept;
    }
}

async fn transaction(
    client: &mut Client,
    fencing: bool,
    token: u64,
    identity: &str,
    pid: u32,
    seq: u64,
    role: char,
) -> anyhow::Result<()> {
    let t = i64::try_from(token).context("token out of range")?;
    let (p, s) = (i64::from(pid), i64::try_from(seq).unwrap_or(i64::MAX));
    let tx = client.transaction().await?;
    if fencing {
        match postgres::advance(&tx, RESOURCE, FencingToken(token)).await {
            Ok(()) => {}
            Err(FenceError::Stale { .. }) => {
                drop(tx);
                client
                    .execute(
                        "INSERT INTO chaos_refused (token, identity, pid, seq) VALUES ($1, $2, $3, $4)",
                        &[&t, &identity, &p, &s],
                    )
                    .await?;
                return Ok(());
            }
            Err(e) => return Err(e.into()),
        }
    }
    tx.execute(
        "INSERT INTO chaos_writes (token, identity, pid, seq, role) VALUES ($1, $2, $3, $4, $5)",
        &[&t, &identity, &p, &s, &role.to_string()],
    )
    .await?;
    tx.commit().await?;
    Ok(())
}
