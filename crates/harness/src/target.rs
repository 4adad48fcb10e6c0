//! Where things are for a test: the repository, and what cargo built for the test that runs now
//! (the `leasehold` binary and the examples), found beside the test's own executable.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The repository: the workspace's root, two levels above this crate.
pub fn repo() -> PathBuf {
    let harness = Path::new(env!("CARGO_MANIFEST_DIR"));
    harness
        .ancestors()
        .nth(2)
        .expect("crates/harness lies two levels below the repository")
        .to_path_buf()
}

/// `target/<profile>`: cargo puts a test's executable in its `deps/`, the package's binaries in
/// it, and the examples in its `examples/`.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("this test's own path");
    exe.parent()
        .and_then(Path::parent)
        .unwrap_or_else(|| panic!("{} is not in target/<profile>/deps", exe.display()))
        .to_path_buf()
}

/// The `leasehold` binary that cargo built with this test: the one `CARGO_BIN_EXE_leasehold`
/// names in the leasehold crate's integration tests, which cargo builds before it runs them.
pub fn leasehold_bin() -> &'static str {
    static BIN: OnceLock<String> = OnceLock::new();
    BIN.get_or_init(|| {
        let path = profile_dir().join("leasehold");
        assert!(
            path.exists(),
            "{} is missing: cargo builds it with the leasehold crate's tests",
            path.display()
        );
        path.into_os_string()
            .into_string()
            .expect("the target directory's path is UTF-8")
    })
}

/// The example `name`, built now when this run did not build it (a run filtered to some tests
/// builds no examples). The crate's dev-dependency on itself turns on every feature the tests
/// use, so this build shares the tests' library.
pub fn example(name: &str) -> PathBuf {
    let path = profile_dir().join("examples").join(name);
    if !path.exists() {
        let status = testbed::cargo::command(Path::new(env!("CARGO")))
            .args(["build", "--example", name])
            .current_dir(repo())
            .status()
            .expect("run cargo");
        assert!(status.success(), "cargo build --example {name} failed");
    }
    assert!(path.exists(), "{} is missing", path.display());
    path
}
