use super::*;

#[test]
fn a_bad_url_is_refused_without_showing_its_password() {
    let name = LeaseName::new("ns/app").unwrap();
    let owner = OwnerId::generate("pod").unwrap();
    let err = RedisLease::new("http://:hunter2@host", name, owner, LeaseOptions::default())
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("bad Redis URL `http://:***@host`"), "{err}");
    assert!(!err.contains("hunter2"), "{err}");
}

#[test]
fn secrets_do_not_print() {
    let s = Secret::new("hunter2");
    assert_eq!(format!("{s} {s:?}"), "*** ***");
}
