//! `/healthz`, `/readyz`, `/leader` and `/metrics`. Handlers read the elector's status at the
//! moment of the request (never a cached verdict, never Redis), so readiness flips in the same
//! instant as the step-down, and after a pause it is false as soon as the deadline has passed.
//! What clients may hold (connections, event streams) is bounded: see `http/serve.rs` and
//! [`Limits`].

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio_util::sync::CancellationToken;

use crate::board::{Shown, Watchers};
use crate::clock::SharedClock;
use crate::clock_watch::ClockWatch;
use crate::elector::Role;
use crate::heartbeat::Heartbeat;
pub use crate::leader_view::{CandidacyView, EvictionView, LeaderView, RedisView, StepDownView};
use crate::metrics::{Exposition, Metrics};

mod readiness;
mod serve;
pub use readiness::readiness;
pub use serve::{
    DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_EVENT_STREAMS, DRAIN, HEADER_READ_TIMEOUT, Limits,
    PROBE_RESERVE, RECEIVE_BUFFER, RETRY_AFTER_SECONDS,
};

/// What `/readyz` means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum ReadinessMode {
    /// `/readyz` is 200 only on the leader: a Service routes to it alone.
    Leader,
    /// `/readyz` is 200 on every replica that reaches Redis and takes part in the election.
    Member,
}

/// The flag's spelling, `leader` or `member`, as the logs show it (a unit test holds it to
/// clap's).
impl std::fmt::Display for ReadinessMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Leader => "leader",
            Self::Member => "member",
        })
    }
}

/// What the handlers read.
#[derive(Clone)]
pub struct Endpoints {
    status: watch::Receiver<Shown>,
    metrics: Arc<Metrics>,
    readiness: ReadinessMode,
    lease_key: String,
    clock: SharedClock,
    watchers: Option<Watchers>,
    heartbeat: Option<Heartbeat>,
    clocks: Option<Arc<ClockWatch>>,
    limits: Limits,
    /// A permit per event-stream client, held as long as its stream lives.
    event_streams: Arc<Semaphore>,
}

impl Endpoints {
    /// Endpoints over what a replica shows ([`Board::subscribe`](crate::board::Board::subscribe)).
    pub fn new(
        status: watch::Receiver<Shown>,
        metrics: Arc<Metrics>,
        readiness: ReadinessMode,
        lease_key: String,
        clock: SharedClock,
    ) -> Self {
        Self {
            status,
            metrics,
            readiness,
            lease_key,
            clock,
            watchers: None,
            heartbeat: None,
            clocks: None,
            limits: Limits::default(),
            event_streams: Arc::new(Semaphore::new(Limits::default().max_event_streams)),
        }
    }

    /// Serves within `limits` instead of the defaults.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.event_streams = Arc::new(Semaphore::new(limits.max_event_streams));
        self.limits = limits;
        self
    }

    /// Fails `/healthz` while the elector's loop is overdue (wedged).
    pub fn with_heartbeat(mut self, heartbeat: Heartbeat) -> Self {
        self.heartbeat = Some(heartbeat);
        self
    }

    /// Shows what `clocks` saw: the rate of Redis's clock in `/leader`, this host's slew in
    /// `/metrics`.
    pub fn with_clocks(mut self, clocks: Arc<ClockWatch>) -> Self {
        self.clocks = Some(clocks);
        self
    }

    /// `/leader`'s view of `status` now, with the rate of Redis's clock last measured, if a
    /// watch is kept.
    fn view(&self, status: &Shown) -> LeaderView {
        let (now, lead) = (self.clock.now(), self.clock.wall_lead());
        let redis_clock = self.clocks.as_ref().and_then(|c| c.redis_clock());
        LeaderView::of(status, &self.lease_key, now, lead, redis_clock)
    }

    /// Serves `/leader` as server-sent events to requests that accept `text/event-stream`.
    pub fn with_watchers(mut self, watchers: Watchers) -> Self {
        self.watchers = Some(watchers);
        self
    }

    /// The router.
    pub fn router(self) -> Router {
        Router::new()
            .route("/healthz", get(healthz))
            .route("/readyz", get(readyz))
            .route("/leader", get(leader))
            .route("/metrics", get(metrics))
            .with_state(self)
    }

    /// The router of the connections beyond the cap: the probes, and `503` for the rest.
    fn probe_router(self) -> Router {
        Router::new()
            .route("/healthz", get(healthz))
            .route("/readyz", get(readyz))
            .fallback(refused_connection)
            .with_state(self)
    }
}

/// Binds `addr` (so that a taken port fails at start-up) and returns the bound address and a
/// future serving, within the endpoints' [`Limits`], until `shutdown` is cancelled.
pub async fn bind(
    addr: SocketAddr,
    endpoints: Endpoints,
    shutdown: CancellationToken,
) -> std::io::Result<(SocketAddr, impl Future<Output = std::io::Result<()>>)> {
    let listener = TcpListener::bind(addr).await?;
    // Every connection it accepts inherits it.
    socket2::SockRef::from(&listener).set_recv_buffer_size(RECEIVE_BUFFER)?;
    let bound = listener.local_addr()?;
    let (limits, metrics) = (endpoints.limits, endpoints.metrics.clone());
    let routers = serve::Routers {
        probes: endpoints.clone().probe_router(),
        full: endpoints.router(),
    };
    Ok((
        bound,
        serve::serve(listener, routers, limits, metrics, shutdown),
    ))
}

/// `503` with `Retry-After`, saying what is busy; the connection closes after it.
fn busy(words: &'static str) -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [
            (header::RETRY_AFTER, RETRY_AFTER_SECONDS),
            (header::CONNECTION, "close"),
        ],
        words,
    )
        .into_response()
}

/// Anything but a probe on a connection beyond the cap.
async fn refused_connection(State(e): State<Endpoints>) -> Response {
    e.metrics.http_connection_refused();
    busy("busy: every connection is taken; only /healthz and /readyz are answered\n")
}

async fn healthz(State(e): State<Endpoints>) -> Response {
    // Liveness says the elector's loop runs and makes progress; a Redis outage must not get
    // replicas restarted (every Redis call has a timeout, so the loop goes on through one).
    if matches!(e.status.borrow().role, Role::Stopped) {
        return (StatusCode::SERVICE_UNAVAILABLE, "stopped\n").into_response();
    }
    match e.heartbeat.as_ref().and_then(Heartbeat::wedged) {
        Some(late) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "wedged: the elector's loop is {} ms overdue\n",
                late.as_millis()
            ),
        )
            .into_response(),
        None => (StatusCode::OK, "ok\n").into_response(),
    }
}

async fn readyz(State(e): State<Endpoints>) -> Response {
    let status = e.status.borrow().clone();
    let leading = status.is_leading_at(e.clock.now(), e.clock.wall_lead());
    let (ready, words) = readiness(&status, e.readiness, leading);
    let code = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (code, format!("{words}\n")).into_response()
}

async fn leader(State(e): State<Endpoints>, headers: HeaderMap) -> Response {
    let accept = crate::accept::header(&headers);
    if let Some(watchers) = e
        .watchers
        .as_ref()
        .filter(|_| crate::sse::wants_events(accept.as_deref()))
    {
        let Ok(slot) = e.event_streams.clone().try_acquire_owned() else {
            e.metrics.http_event_stream_refused();
            return busy("busy: every event stream is taken\n");
        };
        // UTF-8, as identities may be (a `pöd`'s ids are no ASCII).
        let last_event_id =
            (headers.get("last-event-id")).and_then(|v| std::str::from_utf8(v.as_bytes()).ok());
        let endpoints = e.clone();
        return crate::sse::events(watchers, last_event_id, slot, move |status| {
            // A struct of strings, numbers and options always serializes.
            serde_json::to_string(&endpoints.view(status)).unwrap_or_default()
        })
        .into_response();
    }
    let status = e.status.borrow().clone();
    axum::Json(e.view(&status)).into_response()
}

async fn metrics(State(e): State<Endpoints>, headers: HeaderMap) -> Response {
    let format = Exposition::negotiate(crate::accept::header(&headers).as_deref());
    let status = e.status.borrow().clone();
    let (now, lead) = (e.clock.now(), e.clock.wall_lead());
    let (ready, _) = readiness(&status, e.readiness, status.is_leading_at(now, lead));
    if let Some(clocks) = &e.clocks {
        e.metrics.local_clock_slew(clocks.local_slew());
    }
    let body = e.metrics.render(&status, now, lead, ready, format);
    (
        [
            (header::CONTENT_TYPE, format.content_type()),
            (header::VARY, "accept"),
        ],
        body,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use super::*;
    use crate::candidacy::Candidacy;
    use crate::elector::{LeaderInfo, RedisHealth, StepDown, StepDownReason};
    use crate::eviction::{Eviction, EvictionRefusal};
    use crate::lease::FencingToken;

    #[cfg(feature = "cli")]
    #[test]
    fn the_logs_spell_the_readiness_mode_as_its_flag_does() {
        use clap::ValueEnum;
        for mode in ReadinessMode::value_variants() {
            let flag = mode.to_possible_value().expect("a flag value");
            assert_eq!(mode.to_string(), flag.get_name());
        }
    }

    fn status(role: Role, reachable: bool) -> Shown {
        let mut s = crate::board::shown::tests::shown(role);
        s.transitions = 2;
        s.last_step_down = Some(StepDown {
            reason: StepDownReason::Lost,
            detail: None,
            token: FencingToken(3),
            at: SystemTime::now(),
        });
        s.redis = RedisHealth {
            reachable,
            last_error: (!reachable).then(|| "connection refused".into()),
            subscribed: reachable,
        };
        s
    }

    fn leader_role() -> Role {
        Role::Leader {
            token: FencingToken(4),
            acquired_at: SystemTime::now(),
            valid_until: crate::clock::BootInstant::now(),
            lead: crate::clock::WallLead::now(),
        }
    }

    /// `/leader`'s JSON of `s`, read now, with no clock rate measured.
    fn leader_json(s: &Shown, lease_key: &str) -> serde_json::Value {
        let view = LeaderView::of(
            s,
            lease_key,
            crate::clock::BootInstant::now(),
            crate::clock::WallLead::now(),
            None,
        );
        serde_json::to_value(&view).unwrap()
    }

    fn follower_role() -> Role {
        Role::Follower {
            leader: Some(LeaderInfo {
                owner: "web-b-x".into(),
                identity: "web-b".into(),
                token: Some(FencingToken(4)),
            }),
            cooldown: None,
        }
    }

    #[test]
    fn readiness_table() {
        use ReadinessMode::*;
        let cases = [
            (Leader, leader_role(), true, true, true, "leader (token 4)"),
            (
                Leader,
                leader_role(),
                true,
                false,
                false,
                "not the leader: validity deadline passed, stepping down",
            ),
            (
                Leader,
                follower_role(),
                true,
                false,
                false,
                "not the leader: following web-b; last step-down: lease lost",
            ),
            (
                Leader,
                Role::Starting,
                true,
                false,
                false,
                "not the leader: no leader known; last step-down: lease lost",
            ),
            (
                Member,
                follower_role(),
                true,
                false,
                true,
                "member: following web-b",
            ),
            (Member, leader_role(), true, true, true, "member: leader"),
            // A failed renewal (here: no answer) does not take a valid term's readiness.
            (Member, leader_role(), false, true, true, "member: leader"),
            // Past its deadline, it takes part still, and says it steps down.
            (
                Member,
                leader_role(),
                true,
                false,
                true,
                "member: validity deadline passed, stepping down",
            ),
            (
                Member,
                follower_role(),
                false,
                false,
                false,
                "not ready: redis unreachable: connection refused",
            ),
            (
                Member,
                Role::Starting,
                true,
                false,
                false,
                "not ready: starting",
            ),
            (Member, Role::Stopped, true, false, false, "stopped"),
        ];
        for (mode, role, reachable, leading, want_ready, want_words) in cases {
            let s = status(role.clone(), reachable);
            let (ready, words) = readiness(&s, mode, leading);
            assert_eq!(
                (ready, words.as_str()),
                (want_ready, want_words),
                "{mode:?} {role:?}"
            );
        }
    }

    /// A follower showing `s` is not ready in either readiness mode, and both say `why`.
    fn assert_not_ready_in_either_mode(s: &Shown, why: &str) {
        assert_eq!(
            readiness(s, ReadinessMode::Member, false),
            (false, format!("not ready: {why}"))
        );
        assert_eq!(
            readiness(s, ReadinessMode::Leader, false),
            (false, format!("not the leader: {why}"))
        );
    }

    #[test]
    fn an_unhealthy_candidate_is_not_ready_and_leader_says_why() {
        let mut s = status(follower_role(), true);
        s.candidacy = Candidacy::Unhealthy {
            reason: "GET http://127.0.0.1:9/healthz: status 500".into(),
        };
        let why = "candidate check unhealthy: GET http://127.0.0.1:9/healthz: status 500; out of the election until it passes";
        assert_not_ready_in_either_mode(&s, why);
        let json = leader_json(&s, "k");
        assert_eq!(json["candidacy"]["state"], "unhealthy");
        assert_eq!(json["candidacy"]["stands"], false);
        assert_eq!(
            json["candidacy"]["reason"],
            "GET http://127.0.0.1:9/healthz: status 500"
        );
    }

    #[test]
    fn leader_view_serializes_the_election() {
        let s = status(follower_role(), true);
        let json = leader_json(&s, "leasehold:{shop/web}");
        assert_eq!(json["identity"], "web-a");
        assert_eq!(json["role"], "follower");
        assert_eq!(json["is_leader"], false);
        assert_eq!(json["leader"], "web-b");
        assert_eq!(json["token"], 4);
        assert_eq!(json["lease_key"], "leasehold:{shop/web}");
        assert_eq!(json["last_step_down"]["reason"], "lost");
        assert_eq!(json["redis"]["reachable"], true);
        assert_eq!(json["redis"]["eviction"], serde_json::Value::Null);
        assert_eq!(
            json["redis_clock"],
            serde_json::Value::Null,
            "never measured"
        );
    }

    #[test]
    fn redis_that_may_evict_shows_in_leader_and_in_member_readiness_when_refused() {
        let policy = crate::eviction_policy::EvictionPolicy {
            maxmemory: 3_145_728,
            policy: "allkeys-lru".into(),
        };
        let mut s = status(follower_role(), true);
        s.eviction = Eviction::Read(policy);
        // --redis-eviction warn: shown, still ready.
        assert!(readiness(&s, ReadinessMode::Member, false).0);
        let json = leader_json(&s, "k");
        assert_eq!(json["redis"]["eviction"]["policy"], "allkeys-lru");
        assert_eq!(json["redis"]["eviction"]["maxmemory"], 3_145_728);
        assert_eq!(json["redis"]["eviction"]["may_evict"], true);
        assert_eq!(json["redis"]["eviction"]["refused"], false);
        // --redis-eviction refuse: out of the election, and readiness says why.
        s.eviction_refusal = Some(EvictionRefusal::Asked);
        let why = "redis may evict the lease (maxmemory 3145728 bytes, maxmemory-policy allkeys-lru); --redis-eviction refuse keeps this replica out of the election";
        assert_not_ready_in_either_mode(&s, why);
    }
}
