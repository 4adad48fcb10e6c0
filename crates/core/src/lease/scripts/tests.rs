use super::*;

/// The 1-based line of `op`'s full source that holds `needle`.
fn line_of(op: &str, needle: &str) -> usize {
    source(op)
        .unwrap()
        .split('\n')
        .position(|l| l.contains(needle))
        .unwrap()
        + 1
}

#[test]
fn a_refused_line_names_its_command() {
    let at = |op, needle| {
        let msg = format!(
            "The user executing the script can't run this command or subcommand script: c9d4, on @user_script:{}.",
            line_of(op, needle)
        );
        command_at(op, &msg)
    };
    assert_eq!(at("release", "'PUBLISH'").as_deref(), Some("publish"));
    assert_eq!(at("renew", "'PEXPIRE'").as_deref(), Some("pexpire"));
    assert_eq!(at("acquire", "'TIME'").as_deref(), Some("time"));
    assert_eq!(
        at("renew", "'PUBSUB', 'NUMSUB'").as_deref(),
        Some("pubsub|numsub")
    );
    assert_eq!(
        at("observe", "'INFO', 'server'").as_deref(),
        Some("info|server")
    );
    assert_eq!(
        at("acquire", "'INFO', 'replication'").as_deref(),
        Some("info|replication")
    );
    assert_eq!(command_at("release", "no line here"), None);
    assert_eq!(command_at("nope", "on @user_script:2."), None);
}

#[test]
fn every_script_starts_with_the_record_prelude() {
    for op in [
        "acquire", "renew", "release", "observe", "handover", "remove",
    ] {
        let full = source(op).unwrap();
        assert!(full.starts_with(&format!("\n{RECORD}\n")), "{op}");
        assert!(full.ends_with(body(op).unwrap()), "{op}");
    }
}
