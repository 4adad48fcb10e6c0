//! Cargo run from inside a test. Cargo gives a test the variables of the package under test
//! (`CARGO_MANIFEST_DIR`, `CARGO_PKG_NAME`, `OUT_DIR` and the rest). Some build scripts record
//! those they read (ring's do), so a cargo that inherits them finds those crates out of date and
//! builds them again in place, and the next build from a shell builds them back: everything
//! above them twice, with the disk and the minutes that takes. A command from here runs without
//! them.

use std::path::Path;
use std::process::Command;

/// `cargo` (the path cargo gives a test as `env!("CARGO")`), without the package's variables.
pub fn command(cargo: &Path) -> Command {
    let mut cmd = Command::new(cargo);
    without_package_variables(&mut cmd);
    cmd
}

/// Removes from `cmd`'s environment the variables cargo sets for a test or a build script, for
/// a command (a shell, say) that runs cargo in turn.
pub fn without_package_variables(cmd: &mut Command) -> &mut Command {
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy();
        if is_set_by_cargo_for_a_test(&key) {
            cmd.env_remove(&*key);
        }
    }
    cmd
}

fn is_set_by_cargo_for_a_test(key: &str) -> bool {
    matches!(
        key,
        "CARGO_MANIFEST_DIR"
            | "CARGO_MANIFEST_PATH"
            | "CARGO_CRATE_NAME"
            | "CARGO_PRIMARY_PACKAGE"
            | "CARGO_TARGET_TMPDIR"
            | "CARGO_BIN_NAME"
            | "CARGO_RUSTC_CURRENT_DIR"
            | "OUT_DIR"
    ) || key.starts_with("CARGO_PKG_")
        || key.starts_with("CARGO_BIN_EXE_")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_packages_variables_are_removed_and_cargos_own_kept() {
        // Cargo gave this test CARGO_MANIFEST_DIR and CARGO_PKG_NAME.
        assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
        let mut cmd = Command::new("env");
        cmd.env("CARGO_HOME", "/h");
        without_package_variables(&mut cmd);
        let out = cmd.output().expect("env");
        let seen = String::from_utf8_lossy(&out.stdout);
        for gone in ["CARGO_MANIFEST_DIR=", "CARGO_PKG_NAME="] {
            assert!(
                !seen.lines().any(|l| l.starts_with(gone)),
                "{gone} in {seen}"
            );
        }
        assert!(seen.lines().any(|l| l == "CARGO_HOME=/h"), "{seen}");
        assert!(seen.lines().any(|l| l.starts_with("PATH=")), "{seen}");
    }
}
