//! Builds the Dockerfile's static binary as the image tests do first
//! ([`testbed::image::static_binary`], into the same target directory), so that a test run can
//! start that build ahead of them, at a low priority, while other tests run; the image tests then
//! find it built. Run from the repository's root: `static-binary`. Prints the binary's path and
//! how long the build took.

use std::path::Path;
use std::process::ExitCode;

use testbed::image::{static_binary, target_dir};

fn main() -> ExitCode {
    let repo = Path::new(".");
    match static_binary(repo, &target_dir(repo)) {
        Ok(built) => {
            println!("{} built in {:?}", built.path.display(), built.took);
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("static-binary: {err}");
            ExitCode::FAILURE
        }
    }
}
