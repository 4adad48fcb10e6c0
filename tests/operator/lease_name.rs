//! The lease name and the cluster it may come from, refused at start through the real binary:
//! no name given and no Kubernetes API to find one, `--kubernetes on` without a cluster, names
//! a Kubernetes object or namespace cannot have, and a name the Lease mirror cannot take while
//! it is on.

use crate::refusal::{refused, run_refused};

#[test]
fn a_missing_lease_name_is_refused() {
    refused(
        &["run", "--kubernetes", "off"],
        &[],
        "no lease name: pass --lease-name",
    );
    // In a pod, but without a Kubernetes API to find its Deployment.
    refused(
        &["run", "--kubernetes", "off"],
        &[("POD_NAME", "web-7d4f-x2x9"), ("POD_NAMESPACE", "shop")],
        "no lease name: pass --lease-name (there is no Kubernetes API",
    );
}

#[test]
fn kubernetes_on_without_a_cluster_is_refused() {
    refused(
        &["run", "--lease-name", "web", "--kubernetes", "on"],
        &[
            ("KUBECONFIG", "/nonexistent/kubeconfig"),
            ("HOME", "/nonexistent"),
        ],
        "--kubernetes on: no cluster configuration found",
    );
}

#[test]
fn lease_names_that_kubernetes_cannot_hold_are_refused() {
    let long_name = format!("shop/{}", "x".repeat(254));
    let long_namespace = format!("{}/web", "x".repeat(64));
    let cases: &[(&str, &str)] = &[
        ("", "--lease-name ``: must not be empty"),
        (
            "shop/",
            "--lease-name `shop/`: the name after the `/` must not be empty",
        ),
        (
            "/web",
            "--lease-name `/web`: the namespace before the `/` must not be empty",
        ),
        (
            &long_name,
            "is 254 bytes long; a Kubernetes object name is at most 253",
        ),
        (
            &long_namespace,
            "is 64 bytes long; a Kubernetes namespace is at most 63",
        ),
    ];
    for (name, want) in cases {
        run_refused(&["--lease-name", name], want);
    }
}

#[test]
fn a_lease_name_the_lease_mirror_cannot_take_is_refused_while_it_is_on() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user:\n    token: t\n",
    )
    .unwrap();
    refused(
        &[
            "run",
            "--kubernetes",
            "on",
            "--redis-url",
            "redis://127.0.0.1:1",
            "--lease-name",
            "shop/Web_1",
        ],
        &[("KUBECONFIG", kubeconfig.to_str().unwrap())],
        "--lease-name `shop/Web_1`: the Lease mirror is named after it, and `Web_1` must be a DNS subdomain",
    );
}
