//! The chaos harness's program: `chaos run`, `chaos replay`, `chaos check`, and `chaos child`
//! (the leaders' command). The harness itself is the `chaos` crate (crates/chaos); see
//! docs/CHAOS.md.
//!
//! ```text
//! cargo build --bin leasehold --example chaos
//! target/debug/examples/chaos run --seed 7 --faults 27               # short run, ~85 s
//! target/debug/examples/chaos run --seed 7 --resource-fencing off    # negative control
//! target/debug/examples/chaos run --seed 5 --faults 10 --gray only   # the gray faults alone
//! target/debug/examples/chaos run --seed 1 --long --out docs/chaos   # 1,512 faults
//! ```

use std::process::ExitCode;

use clap::Parser;

use chaos::config::{Cli, Command};
use chaos::{run, workload};

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Child(_) => match workload::Settings::from_env().and_then(|s| workload::run(&s)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("chaos child: {e:#}");
                ExitCode::from(2)
            }
        },
        Command::Run(args) => verdict(args.resolve().and_then(|config| run::run(&config))),
        Command::Replay(args) if args.kinds.is_empty() => {
            eprintln!(
                "chaos replay: --kinds is required (comma-separated kinds, e.g. --kinds eviction,vanish)"
            );
            ExitCode::from(2)
        }
        Command::Replay(args) => verdict(args.resolve().and_then(|config| run::run(&config))),
        Command::Check(args) => {
            let out = args.out.clone().unwrap_or_else(|| {
                let raw = if args.raw.is_dir() {
                    args.raw.clone()
                } else {
                    args.raw.parent().map(|p| p.to_owned()).unwrap_or_default()
                };
                raw.parent().map(|p| p.to_owned()).unwrap_or_default()
            });
            verdict(run::check(&args.raw, &out))
        }
    }
}

/// Exit code 0: pass; 1: the checker's verdict is a fail; 2: the harness could not do its job.
fn verdict(outcome: anyhow::Result<bool>) -> ExitCode {
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("chaos: error: {e:#}");
            ExitCode::from(2)
        }
    }
}
