//! The commands of the binary: what each subcommand does with validated settings.
//! They start the runtime, name the lease and call the library; every error they return says
//! its exit code ([`CliError`]).
//!
//! - [`run`]: one replica, until shutdown.
//! - [`status`]: who holds the lease now.
//! - [`step_down`]: ask the leader to hand over, and wait for the next one.
//! - [`remove_keys`]: remove the lease's keys from Redis, after uninstalling.
//! - [`lock`]: run a command once under the lease, for Jobs and CronJobs.
//! - `completions`: the shell's completion script, from `cli::completions`.
//! - [`contender`]: a contender for the lease, wired once for `run` and `lock`.
//! - [`lease`]: naming the lease, by flag or after the workload that owns the pod.

pub mod contender;
pub mod lease;
pub mod lock;
pub mod remove_keys;
pub mod run;
pub mod status;
pub mod step_down;

use std::future::Future;
use std::io::Write;
use std::process::ExitCode;

use crate::cli::{CliError, Invocation, OutputFormat};
use crate::shutdown::Shutdown;

/// Runs a validated command line; returns the exit code.
pub fn execute(invocation: Invocation) -> Result<ExitCode, CliError> {
    match invocation {
        // The guard answers at once: no runtime, no logs, no connection.
        Invocation::Guard(check) => Ok(ExitCode::from(crate::guard::check::run(&check))),
        Invocation::Run(settings, _) => until_signalled(|shutdown| run::run(settings, shutdown)),
        Invocation::Status(settings, _) => {
            let code = runtime()?.block_on(status::status(settings))?;
            Ok(exit_code(code))
        }
        Invocation::StepDown(settings, _) => {
            let code = runtime()?.block_on(step_down::step_down(settings))?;
            Ok(exit_code(code))
        }
        Invocation::RemoveKeys(settings, _) => {
            let code = runtime()?.block_on(remove_keys::remove_keys(settings))?;
            Ok(exit_code(code))
        }
        Invocation::Lock(settings, _) => until_signalled(|shutdown| lock::lock(settings, shutdown)),
        Invocation::Completions(shell) => {
            std::io::stdout()
                .write_all(&crate::cli::completions(shell))
                .map_err(|e| anyhow::Error::new(e).context("cannot write the completion script"))?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Runs `command` on the runtime with SIGTERM, SIGINT and SIGHUP as its shutdown.
fn until_signalled<F, Fut>(command: F) -> Result<ExitCode, CliError>
where
    F: FnOnce(Shutdown) -> Fut,
    Fut: Future<Output = Result<i32, CliError>>,
{
    let code = runtime()?.block_on(async {
        let shutdown = Shutdown::on_signals()
            .map_err(|e| anyhow::Error::new(e).context("cannot install the signal handlers"))?;
        command(shutdown).await
    })?;
    Ok(exit_code(code))
}

/// A process exit code from a command's code (out of range is a failure).
fn exit_code(code: i32) -> ExitCode {
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

/// The async runtime of `run` and `status`.
fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            anyhow::Error::new(e)
                .context("cannot start the async runtime")
                .into()
        })
}

/// Prints an operator command's answer as `--output` asks: `view` as pretty JSON, or `text`.
fn print<V: serde::Serialize>(
    output: OutputFormat,
    view: &V,
    text: fn(&V) -> String,
) -> anyhow::Result<()> {
    match output {
        OutputFormat::Json => println!("{}", serde_json::to_string_pretty(view)?),
        OutputFormat::Text => print!("{}", text(view)),
    }
    Ok(())
}
