//! The `leasehold` binary: parse the command line, start the logs, run the command.

use std::process::ExitCode;

use leasehold::cli::{self, CliError};
use leasehold::{cmd, telemetry};

fn main() -> ExitCode {
    let invocation = match cli::from_process() {
        Ok(invocation) => invocation,
        Err(e) => return e.report(),
    };
    if let Some(log) = invocation.log()
        && let Err(e) = telemetry::start(log)
    {
        return CliError::from(e).report();
    }
    cmd::execute(invocation).unwrap_or_else(|e| e.report())
}
