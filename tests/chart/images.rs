//! The chart's image references, rendered by the real helm: a digest pins each image (leasehold's,
//! the singleton command's, the `helm test` Pod's) instead of its tag, each image takes its own
//! registry, and `global.imageRegistry` takes every image's registry's place.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;

use harness::helm::{Rendered, leasehold_container, render};

use crate::extras::DIGEST;

fn images(r: &Rendered) -> Vec<String> {
    let mut all: Vec<String> = r
        .all::<Deployment>()
        .iter()
        .map(|d| leasehold_container(d).image.expect("image"))
        .collect();
    for pod in r.all::<Pod>() {
        for c in pod.spec.expect("spec").containers {
            all.push(c.image.expect("image"));
        }
    }
    all
}

#[test]
fn a_digest_pins_each_image_instead_of_its_tag() {
    // The chart's default tag is its appVersion, which is the crate's version.
    let default_image = format!("leasehold:{}", env!("CARGO_PKG_VERSION"));
    let cases = [
        ("", vec![default_image.clone()]),
        (
            "image:\n  tag: \"0.3.0-rc.1\"\n",
            vec!["leasehold:0.3.0-rc.1".to_owned()],
        ),
        (
            &*format!(
                "image:\n  repository: registry.example.com/leasehold\n  tag: \"0.2.0\"\n  digest: {DIGEST}\n"
            ),
            vec![format!("registry.example.com/leasehold@{DIGEST}")],
        ),
        (
            &*format!(
                "exec:\n  enabled: true\n  image:\n    repository: registry.example.com/worker\n    tag: \"3\"\n    digest: {DIGEST}\n  command: [/app/worker]\n"
            ),
            vec![format!("registry.example.com/worker@{DIGEST}")],
        ),
        (
            "helmTest:\n  enabled: true\n",
            vec![default_image.clone(), "busybox:1.36".to_owned()],
        ),
        (
            &*format!("helmTest:\n  enabled: true\n  image:\n    digest: {DIGEST}\n"),
            vec![default_image.clone(), format!("busybox@{DIGEST}")],
        ),
    ];
    for (values, want) in cases {
        assert_eq!(images(&render(values)), want, "values:\n{values}");
    }
}

#[test]
fn each_image_takes_its_registry_and_global_image_registry_takes_every_images_place() {
    let cases = [
        (
            "image:\n  registry: registry.example.com:5000\nhelmTest:\n  enabled: true\n",
            vec![
                format!(
                    "registry.example.com:5000/leasehold:{}",
                    env!("CARGO_PKG_VERSION")
                ),
                "busybox:1.36".to_owned(),
            ],
        ),
        (
            &*format!(
                "image:\n  registry: registry.example.com/\n  digest: {DIGEST}\nhelmTest:\n  enabled: true\n  image:\n    registry: docker.io/library\n"
            ),
            vec![
                format!("registry.example.com/leasehold@{DIGEST}"),
                "docker.io/library/busybox:1.36".to_owned(),
            ],
        ),
        (
            "global:\n  imageRegistry: mirror.example.com\nimage:\n  registry: registry.example.com\nhelmTest:\n  enabled: true\n",
            vec![
                format!("mirror.example.com/leasehold:{}", env!("CARGO_PKG_VERSION")),
                "mirror.example.com/busybox:1.36".to_owned(),
            ],
        ),
        (
            "global:\n  imageRegistry: mirror.example.com\nexec:\n  enabled: true\n  image:\n    registry: registry.example.com\n    repository: team/worker\n    tag: \"3\"\n  command: [/app/worker]\n",
            vec!["mirror.example.com/team/worker:3".to_owned()],
        ),
        (
            "exec:\n  enabled: true\n  image:\n    registry: registry.example.com\n    repository: team/worker\n    tag: latest\n  command: [/app/worker]\n",
            vec!["registry.example.com/team/worker:latest".to_owned()],
        ),
    ];
    for (values, want) in cases {
        assert_eq!(images(&render(values)), want, "values:\n{values}");
    }
    // A parent chart's other globals pass the schema untouched.
    render("global:\n  storageClass: fast\n  postgresql:\n    auth:\n      database: app\n");
}
