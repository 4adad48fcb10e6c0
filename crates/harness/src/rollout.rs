//! A model of a Deployment rollout, to check the chart's update strategy against the arithmetic
//! that decides it: the Deployment controller's rolling update (kubernetes
//! pkg/controller/deployment/rolling.go: reconcileNewReplicaSet, reconcileOldReplicaSets,
//! cleanupUnhealthyReplicas, scaleDownOldReplicaSetsForRollingUpdate; util.ResolveFenceposts and
//! NewRSNewReplicas), the ReplicaSet controller deleting not-ready pods first, and the three
//! judges of "rolled out": kstatus (Helm 4's `--wait`), `kubectl rollout status`, and Helm's
//! legacy waiter. Pods start at once and a pod is ready as leasehold's readiness mode says: in
//! member mode every pod (Redis is reachable), in leader mode the leader alone.

use k8s_openapi::api::apps::v1::DeploymentStrategy;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// leasehold's readiness mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Member,
    Leader,
}

/// maxSurge and maxUnavailable as the controller resolves them for `replicas`.
pub fn fenceposts(strategy: &DeploymentStrategy, replicas: i32) -> (i32, i32) {
    let rolling = strategy.rolling_update.clone().unwrap_or_default();
    let scaled = |v: Option<IntOrString>, round_up: bool| match v {
        None => 0,
        Some(IntOrString::Int(n)) => n,
        Some(IntOrString::String(s)) => {
            let percent: i64 = s
                .strip_suffix('%')
                .and_then(|p| p.parse().ok())
                .unwrap_or_else(|| panic!("not a percentage: {s}"));
            let scaled = percent * i64::from(replicas);
            let value = if round_up {
                (scaled + 99) / 100
            } else {
                scaled / 100
            };
            i32::try_from(value).expect("fits")
        }
    };
    let surge = scaled(rolling.max_surge, true);
    let mut unavailable = scaled(rolling.max_unavailable, false);
    if surge == 0 && unavailable == 0 {
        unavailable = 1;
    }
    (surge, unavailable.min(replicas))
}

/// A pod; whether it is old or new is which list holds it.
#[derive(Debug, Clone)]
struct Pod {
    id: u32,
}

/// Where a rollout came to rest.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Replicas of the old ReplicaSet(s) and of the new one at rest.
    pub old_replicas: i32,
    pub new_replicas: i32,
    /// The Deployment's status fields at rest.
    pub status_replicas: i32,
    pub updated: i32,
    pub ready: i32,
    pub available: i32,
    /// Controller syncs until rest.
    pub syncs: u32,
    /// Times the leader changed.
    pub handoffs: u32,
    /// The resolved maxUnavailable.
    pub max_unavailable: i32,
    pub replicas: i32,
    /// Ready pods of the new ReplicaSet.
    pub new_ready: i32,
}

impl Outcome {
    /// The controller replaced every old pod.
    pub fn controller_finished(&self) -> bool {
        self.old_replicas == 0 && self.new_replicas == self.replicas
    }

    /// kstatus's deploymentConditions says Current (Helm 4's `--wait`): every replica updated,
    /// available and ready, no extra pods, and the controller's Progressing condition at
    /// NewReplicaSetAvailable (util.DeploymentComplete), which needs the same.
    pub fn kstatus_current(&self) -> bool {
        self.updated >= self.replicas
            && self.status_replicas <= self.replicas
            && self.available >= self.updated
            && self.ready >= self.replicas
            && self.controller_complete()
    }

    /// util.DeploymentComplete.
    pub fn controller_complete(&self) -> bool {
        self.updated == self.replicas
            && self.status_replicas == self.replicas
            && self.available == self.replicas
    }

    /// `kubectl rollout status` prints "successfully rolled out".
    pub fn rollout_status_done(&self) -> bool {
        self.updated >= self.replicas
            && self.status_replicas <= self.updated
            && self.available >= self.updated
    }

    /// Helm's legacy waiter (`--wait=legacy`): the new ReplicaSet has replicas − maxUnavailable
    /// ready pods.
    pub fn helm_legacy_done(&self) -> bool {
        self.new_ready >= self.replicas - self.max_unavailable
    }
}

/// Runs a rollout of a Deployment with `replicas` and `strategy` (RollingUpdate), from an old
/// ReplicaSet whose pods all run, until nothing changes any more.
pub fn roll_out(strategy: &DeploymentStrategy, replicas: i32, mode: Mode) -> Outcome {
    assert_eq!(
        strategy.type_.as_deref(),
        Some("RollingUpdate"),
        "the model covers RollingUpdate only"
    );
    let (max_surge, max_unavailable) = fenceposts(strategy, replicas);
    let mut next_id = 0;
    let mut spawn = || {
        next_id += 1;
        Pod { id: next_id }
    };
    let mut old: Vec<Pod> = (0..replicas).map(|_| spawn()).collect();
    let mut new: Vec<Pod> = Vec::new();
    // The oldest pod leads at the start.
    let mut leader: Option<u32> = old.first().map(|p| p.id);
    let mut handoffs = 0;
    let mut syncs = 0;

    let is_ready = |p: &Pod, leader: Option<u32>| match mode {
        Mode::Member => true,
        Mode::Leader => Some(p.id) == leader,
    };

    loop {
        syncs += 1;
        assert!(syncs < 1000, "the model did not come to rest");
        // A pod that is gone no longer leads; the oldest remaining pod wins the next election
        // (an old pod, while any is left: the case that can stall a rollout).
        if leader.is_none_or(|id| !old.iter().chain(new.iter()).any(|p| p.id == id)) {
            let next = old.iter().chain(new.iter()).map(|p| p.id).min();
            if leader.is_some() && next.is_some() {
                handoffs += 1;
            }
            leader = next;
        }
        let old_len = old.len() as i32;
        let new_len = new.len() as i32;
        let all = old_len + new_len;
        let available_old = old.iter().filter(|p| is_ready(p, leader)).count() as i32;
        let available_new = new.iter().filter(|p| is_ready(p, leader)).count() as i32;

        // reconcileNewReplicaSet with NewRSNewReplicas.
        let max_total = replicas + max_surge;
        if new_len < replicas && all < max_total {
            let up = (max_total - all).min(replicas - new_len);
            for _ in 0..up {
                new.push(spawn());
            }
            continue; // scaled up: this sync ends
        }

        // reconcileOldReplicaSets.
        let mut scaled_down = 0;
        if old_len > 0 {
            let min_available = replicas - max_unavailable;
            let new_unavailable = new_len - available_new;
            let max_scaled_down = all - min_available - new_unavailable;
            if max_scaled_down > 0 {
                // cleanupUnhealthyReplicas: not-ready old pods first.
                let unhealthy = old_len - available_old;
                let cleanup = unhealthy.min(max_scaled_down);
                for _ in 0..cleanup {
                    let i = old
                        .iter()
                        .position(|p| !is_ready(p, leader))
                        .expect("an unready old pod");
                    old.remove(i);
                }
                scaled_down += cleanup;
                // scaleDownOldReplicaSetsForRollingUpdate.
                let available_all =
                    old.iter().filter(|p| is_ready(p, leader)).count() as i32 + available_new;
                if available_all > min_available {
                    let down = (available_all - min_available).min(old.len() as i32);
                    for _ in 0..down {
                        // The ReplicaSet deletes not-ready pods before ready ones.
                        let i = old.iter().position(|p| !is_ready(p, leader)).unwrap_or(0);
                        old.remove(i);
                    }
                    scaled_down += down;
                }
            }
        }
        if scaled_down > 0 {
            continue;
        }
        // Nothing changed in this sync. If the leader's pod went, an election comes first and may
        // change what is available; otherwise the rollout is at rest.
        let leader_gone = leader.is_none_or(|id| !old.iter().chain(new.iter()).any(|p| p.id == id));
        if leader_gone {
            continue;
        }
        let ready_new = new.iter().filter(|p| is_ready(p, leader)).count() as i32;
        let ready_all = old.iter().filter(|p| is_ready(p, leader)).count() as i32 + ready_new;
        return Outcome {
            old_replicas: old.len() as i32,
            new_replicas: new.len() as i32,
            status_replicas: (old.len() + new.len()) as i32,
            updated: new.len() as i32,
            ready: ready_all,
            available: ready_all,
            syncs,
            handoffs,
            max_unavailable,
            replicas,
            new_ready: ready_new,
        };
    }
}
