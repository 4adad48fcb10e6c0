//! What `status`, `step-down` and `remove-keys` print with `--output json`, against
//! docs/REFERENCE.md's table ("What the operator commands print"), both ways.

use std::collections::{BTreeMap, BTreeSet};

use harness::markdown::{spans, table};
use harness::replica::run_to_end;
use leasehold::cmd::step_down::HandoverView;

use crate::docs::{assert_same, reference};

/// The top-level fields of one JSON object.
fn fields(json: &str) -> BTreeSet<String> {
    let value: serde_json::Value =
        serde_json::from_str(json).unwrap_or_else(|e| panic!("not JSON ({e}): {json}"));
    let object = value
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {json}"));
    object.keys().cloned().collect()
}

#[test]
fn the_reference_lists_every_field_the_operator_commands_print() {
    let mut documented: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for row in table(&reference(), "### What the operator commands print") {
        let command = spans(&row[0]).concat();
        documented
            .entry(command)
            .or_default()
            .extend(spans(&row[1]));
    }
    let redis = testbed::RedisServer::start();
    let url = redis.url();
    let json = |command: &str| {
        let args = [
            command,
            "--lease-name",
            "web",
            "--redis-url",
            &url,
            "-o",
            "json",
        ];
        let (code, stdout, stderr) = run_to_end(&args, &[]);
        assert_eq!(code, 0, "{args:?}: {stderr}");
        fields(&stdout)
    };
    // A handover prints its view only once a leader stepped down: the same type, serialized.
    let handover = HandoverView {
        lease: "default/web".into(),
        handed_over: true,
        previous: "web-a".into(),
        previous_token: Some(1),
        leader: Some("web-b".into()),
        token: Some(2),
        waited_ms: 3,
    };
    let printed = [
        ("status", json("status")),
        ("remove-keys", json("remove-keys")),
        (
            "step-down",
            fields(&serde_json::to_string(&handover).expect("JSON")),
        ),
    ];
    for (command, code) in printed {
        let doc = documented.remove(command).unwrap_or_default();
        assert_same(&format!("the fields of `{command} -o json`"), &code, &doc);
    }
    assert!(documented.is_empty(), "no such command: {documented:?}");
}
