//! The chart's rollout strategy against the Deployment controller's arithmetic (rollouts finish
//! for the controller, `helm --wait` and `kubectl rollout status`, or are refused with the
//! reason), and the disruption budget.

use k8s_openapi::api::apps::v1::{Deployment, DeploymentStrategy, RollingUpdateDeployment};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use harness::helm::{self, LEADER_MODE, Rendered, deployment, refused, render};
use harness::rollout::{self, Mode};

// ---------------------------------------------------------------------------------------------
// The rollout strategy, against the Deployment controller's arithmetic

fn strategy(values: &str) -> (DeploymentStrategy, i32) {
    let (d, _) = deployment(&render(values));
    let spec = d.spec;
    (
        spec.strategy.expect("a strategy"),
        spec.replicas.expect("replicas"),
    )
}

#[test]
fn member_mode_rollouts_finish_for_the_controller_helm_wait_and_rollout_status() {
    for replicas in [1, 2, 3, 5] {
        let (s, n) = strategy(&format!("replicaCount: {replicas}\n"));
        let rolling = s.rolling_update.clone().expect("RollingUpdate");
        assert_eq!(rolling.max_unavailable, Some(IntOrString::Int(0)));
        assert_eq!(rolling.max_surge, Some(IntOrString::Int(1)));
        let out = rollout::roll_out(&s, n, Mode::Member);
        assert!(out.controller_finished(), "{replicas} replicas: {out:?}");
        assert!(
            out.kstatus_current(),
            "helm --wait (kstatus) finishes: {out:?}"
        );
        assert!(
            out.rollout_status_done(),
            "kubectl rollout status finishes: {out:?}"
        );
        assert!(
            out.helm_legacy_done(),
            "helm --wait=legacy finishes: {out:?}"
        );
        assert!(
            out.handoffs <= u32::try_from(replicas).expect("small"),
            "at most one handoff per old replica: {out:?}"
        );
    }
}

#[test]
fn leader_mode_rollouts_finish_for_the_controller_but_never_for_helm_wait() {
    for replicas in [2, 3, 5] {
        let (s, n) = strategy(&format!("{LEADER_MODE}replicaCount: {replicas}\n"));
        let out = rollout::roll_out(&s, n, Mode::Leader);
        assert!(out.controller_finished(), "{replicas} replicas: {out:?}");
        assert_eq!(out.ready, 1, "only the leader is ready");
        assert!(
            !out.kstatus_current() && !out.rollout_status_done(),
            "helm --wait and kubectl rollout status want every replica ready; the chart says \
             so (NOTES.txt, docs/DEPLOY.md): {out:?}"
        );
        assert!(
            out.helm_legacy_done(),
            "helm --wait=legacy finishes: {out:?}"
        );
    }
    // One replica is the leader, so every judge is satisfied.
    let (s, n) = strategy(&format!("{LEADER_MODE}replicaCount: 1\n"));
    let out = rollout::roll_out(&s, n, Mode::Leader);
    assert!(
        out.kstatus_current() && out.rollout_status_done(),
        "{out:?}"
    );
}

fn rolling(surge: IntOrString, unavailable: IntOrString) -> DeploymentStrategy {
    DeploymentStrategy {
        type_: Some("RollingUpdate".into()),
        rolling_update: Some(RollingUpdateDeployment {
            max_surge: Some(surge),
            max_unavailable: Some(unavailable),
        }),
    }
}

fn yaml_of(v: &IntOrString) -> String {
    match v {
        IntOrString::Int(n) => n.to_string(),
        IntOrString::String(s) => format!("{s:?}"),
    }
}

#[test]
fn the_chart_refuses_exactly_the_leader_mode_strategies_that_would_stall() {
    use IntOrString::{Int, String as Percent};
    let candidates = [
        (Percent("25%".into()), Percent("25%".into())), // Kubernetes' default
        (Int(1), Int(0)),
        (Int(1), Int(1)),
        (Int(1), Int(2)),
        (Int(3), Int(2)),
        (Int(1), Int(3)),
        (Int(0), Int(3)),
        (Int(1), Percent("100%".into())),
        (Percent("100%".into()), Percent("100%".into())),
    ];
    for (surge, unavailable) in candidates {
        let strategy = rolling(surge, unavailable);
        let values = format!(
            "{LEADER_MODE}replicaCount: 3\nstrategy:\n  type: RollingUpdate\n  rollingUpdate:\n    maxSurge: {}\n    maxUnavailable: {}\n",
            yaml_of(
                &strategy
                    .rolling_update
                    .as_ref()
                    .and_then(|r| r.max_surge.clone())
                    .expect("surge")
            ),
            yaml_of(
                &strategy
                    .rolling_update
                    .as_ref()
                    .and_then(|r| r.max_unavailable.clone())
                    .expect("unavailable")
            ),
        );
        // Without `type`, the API server takes the strategy for RollingUpdate all the same.
        let untyped =
            helm::template_as("lh", "shop", &values.replace("  type: RollingUpdate\n", ""));
        let out = helm::template_as("lh", "shop", &values);
        assert_eq!(
            untyped.ok(),
            out.ok(),
            "{strategy:?} without its type: {}",
            untyped.stderr
        );
        let model = rollout::roll_out(&strategy, 3, Mode::Leader);
        if model.controller_finished() {
            assert!(
                out.ok(),
                "{strategy:?} finishes but was refused: {}",
                out.stderr
            );
            let d: Deployment = Rendered::parse(&out.stdout).one();
            assert_eq!(
                d.spec.strategy.as_ref(),
                Some(&strategy),
                "rendered as given"
            );
        } else {
            assert!(
                !out.ok()
                    && out.stderr.contains(
                        "the Deployment controller counts only ready pods (the leader) as available"
                    ),
                "{strategy:?} stalls the rollout ({model:?}) but was not refused with the reason: {}",
                out.stderr
            );
            assert!(model.old_replicas >= 1, "the old leader is left: {model:?}");
        }
    }
    // Recreate needs no availability, so the chart accepts it.
    assert!(
        helm::template_as(
            "lh",
            "shop",
            &format!("{LEADER_MODE}strategy:\n  type: Recreate\n")
        )
        .ok()
    );
}

#[test]
fn leader_mode_with_a_disruption_budget_is_refused_with_the_reason() {
    let err = refused("readiness: leader\n");
    for words in [
        "readiness=leader: only the leader pod is ever ready",
        "a PodDisruptionBudget would block every eviction of the leader",
        "`helm --wait` and `kubectl rollout status` never see the Deployment rolled out",
        "Set podDisruptionBudget.enabled=false",
    ] {
        assert!(err.contains(words), "missing {words:?} in:\n{err}");
    }
}

#[test]
fn the_disruption_budget_lets_drains_evict_replicas_that_cannot_reach_redis() {
    let pdb: PodDisruptionBudget = render("").one();
    let spec = pdb.spec.expect("spec");
    assert_eq!(spec.max_unavailable, Some(IntOrString::Int(1)));
    assert_eq!(
        spec.unhealthy_pod_eviction_policy.as_deref(),
        Some("AlwaysAllow")
    );
    assert!(render(LEADER_MODE).all::<PodDisruptionBudget>().is_empty());
}

#[test]
fn the_disruption_budget_takes_min_available_instead_of_max_unavailable() {
    let cases = [
        ("  enabled: true\n", None, Some(IntOrString::Int(1))),
        ("  maxUnavailable: 2\n", None, Some(IntOrString::Int(2))),
        (
            "  maxUnavailable: \"50%\"\n",
            None,
            Some(IntOrString::String("50%".into())),
        ),
        ("  minAvailable: 2\n", Some(IntOrString::Int(2)), None),
        ("  minAvailable: 0\n", Some(IntOrString::Int(0)), None),
        (
            "  minAvailable: \"60%\"\n",
            Some(IntOrString::String("60%".into())),
            None,
        ),
    ];
    for (values, min, max) in cases {
        let pdb: PodDisruptionBudget = render(&format!("podDisruptionBudget:\n{values}")).one();
        let spec = pdb.spec.expect("spec");
        assert_eq!(
            (spec.min_available, spec.max_unavailable),
            (min, max),
            "{values}"
        );
    }
    let err = refused("podDisruptionBudget:\n  minAvailable: 2\n  maxUnavailable: 1\n");
    assert!(
        err.contains("podDisruptionBudget: set minAvailable (2) or maxUnavailable (1), not both"),
        "{err}"
    );
}

harness::schema_rule! {
    schema_refuses_a_min_available_percentage_over_100:
        "podDisruptionBudget:\n  minAvailable: \"150%\"\n" => ["at '/podDisruptionBudget/minAvailable':"];
    schema_refuses_a_negative_min_available:
        "podDisruptionBudget:\n  minAvailable: -1\n" => ["at '/podDisruptionBudget/minAvailable':"];
    schema_refuses_a_max_unavailable_of_zero:
        "podDisruptionBudget:\n  maxUnavailable: 0\n" => ["at '/podDisruptionBudget/maxUnavailable':"];
}
