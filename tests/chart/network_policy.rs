//! The NetworkPolicy, rendered by the real helm: ingress to the HTTP port from the peers given and
//! the `helm test` Pod, egress to Redis, the API server and DNS only, each rule with the peers
//! and ports given, and the extra rules after them.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use harness::helm::{self, labels, leasehold_container, render};

use crate::extras::extra_value_sets;

fn port_numbers(ports: &[k8s_openapi::api::networking::v1::NetworkPolicyPort]) -> Vec<String> {
    ports
        .iter()
        .map(|p| {
            let port = match p.port.as_ref().expect("a port") {
                IntOrString::Int(n) => n.to_string(),
                IntOrString::String(s) => s.clone(),
            };
            format!("{port}/{}", p.protocol.as_deref().unwrap_or("TCP"))
        })
        .collect()
}

#[test]
fn the_network_policy_admits_the_http_port_and_reaches_only_redis_the_api_and_dns() {
    let r = render(&extra_value_sets()[0].1);
    let np: NetworkPolicy = r.one();
    let spec = np.spec.expect("spec");
    let d: Deployment = r.one();
    assert_eq!(
        spec.pod_selector.clone().expect("podSelector").match_labels,
        d.spec.selector.match_labels,
        "it selects the Deployment's pods"
    );
    assert_eq!(
        spec.policy_types.clone().expect("policyTypes"),
        ["Ingress", "Egress"]
    );
    let ingress = spec.ingress.clone().expect("ingress");
    assert_eq!(ingress.len(), 1);
    let container = leasehold_container(&d);
    let http = container
        .ports
        .expect("ports")
        .into_iter()
        .find(|p| p.name.as_deref() == Some("http"))
        .expect("a port named http");
    assert_eq!(
        port_numbers(ingress[0].ports.as_deref().expect("ports")),
        [format!("{}/TCP", http.name.expect("name"))]
    );
    let from = ingress[0].from.clone().expect("from");
    assert_eq!(
        from.len(),
        2,
        "the peer given and the helm test Pod: {from:?}"
    );
    assert_eq!(
        from[0]
            .namespace_selector
            .clone()
            .expect("namespaceSelector")
            .match_labels
            .expect("labels")["kubernetes.io/metadata.name"],
        "monitoring"
    );
    let test_pod: Pod = r.one();
    let test_labels = labels(&test_pod.metadata.labels);
    for (k, v) in from[1]
        .pod_selector
        .clone()
        .expect("podSelector")
        .match_labels
        .expect("labels")
    {
        assert_eq!(
            test_labels.get(&k),
            Some(&v),
            "the peer selects the helm test Pod"
        );
    }
    let egress: Vec<Vec<String>> = spec
        .egress
        .expect("egress")
        .iter()
        .map(|e| port_numbers(e.ports.as_deref().expect("ports")))
        .collect();
    assert_eq!(
        egress,
        [
            vec!["6379/TCP"],
            vec!["443/TCP", "6443/TCP"],
            vec!["53/UDP", "53/TCP"]
        ]
    );

    // Without peers: the HTTP port from anywhere; with every peer given, each rule names them.
    let np: NetworkPolicy = render(&extra_value_sets()[1].1).one();
    let spec = np.spec.expect("spec");
    assert!(spec.ingress.expect("ingress")[0].from.is_none());
    let np: NetworkPolicy = render(&extra_value_sets()[2].1).one();
    let spec = np.spec.expect("spec");
    let egress = spec.egress.expect("egress");
    assert_eq!(egress.len(), 4, "redis, api, dns and the extra rule");
    let cidrs: Vec<String> = egress[..3]
        .iter()
        .map(|e| {
            e.to.clone().expect("to")[0]
                .ip_block
                .clone()
                .expect("ipBlock")
                .cidr
        })
        .collect();
    assert_eq!(cidrs, ["10.20.0.0/16", "172.16.0.1/32", "169.254.20.10/32"]);
    assert_eq!(
        port_numbers(egress[0].ports.as_deref().expect("ports")),
        ["6379/TCP", "26379/TCP"]
    );
    assert_eq!(
        spec.ingress.expect("ingress").len(),
        2,
        "the HTTP port and the extra rule"
    );

    // The ports the leader Service adds for an app (a sidecar's, the command's) are admitted
    // as the HTTP port is: they used to be dropped, the Service routing to a closed port.
    let sidecar = helm::VALUE_SETS.iter().find(|(name, _)| *name == "sidecar");
    let values = format!(
        "{}{}",
        extra_value_sets()[1].1,
        sidecar.expect("a sidecar").1
    );
    let np: NetworkPolicy = render(&values).one();
    let ingress = np.spec.expect("spec").ingress.expect("ingress");
    assert_eq!(
        port_numbers(ingress[0].ports.as_deref().expect("ports")),
        ["http/TCP", "app/TCP"]
    );
}
