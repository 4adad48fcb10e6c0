//! The commands of the binary: what each subcommand does with validated settings.
//! They start the runtime, name the lease and call the library; every error they return says
//! its exit code ([`CliError`]).

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

use anyhow::Context;

use crate::cli::{CliError, Invocation, OutputFormat};
use crate::printable;
use crate::shutdown::Shutdown;

/// Runs a validated command line; returns the exit code.
pub fn execute(invocation: Invocation) -> Result<ExitCode, CliError> {
    match invocation {
        // The guard answers at once: no runtime, no logs, no connection.
        Invocation::Guard(check) => Ok(ExitCode::from(crate::guard::check::run(&check))),
        Invocation::Run(settings, _) => until_signalled(|shutdown| run::run(settings, shutdown)),
        Invocation::Status(settings, _) => to_end(status::status(settings)),
        Invocation::StepDown(settings, _) => to_end(step_down::step_down(settings)),
        Invocation::RemoveKeys(settings, _) => to_end(remove_keys::remove_keys(settings)),
        Invocation::Lock(settings, _) => until_signalled(|shutdown| lock::lock(settings, shutdown)),
        Invocation::Completions(shell) => {
            std::io::stdout()
                .write_all(&crate::cli::completions(shell))
                .context("cannot write the completion script")?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Runs `command` on the runtime with the signals that drain as its shutdown (shutdown.rs).
fn until_signalled<F, Fut>(command: F) -> Result<ExitCode, CliError>
where
    F: FnOnce(Shutdown) -> Fut,
    Fut: Future<Output = Result<i32, CliError>>,
{
    to_end(async {
        let shutdown = Shutdown::on_signals().context("cannot install the signal handlers")?;
        let code = command(shutdown.clone()).await;
        shutdown.unless_exiting_at_once().await;
        code
    })
}

/// Runs `command` to its end on a runtime of its own; its code is the process's exit code (out
/// of range is a failure).
fn to_end(command: impl Future<Output = Result<i32, CliError>>) -> Result<ExitCode, CliError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let code = runtime.block_on(command);
    // Without waiting for a blocking call left behind (a write to a file on a filesystem that
    // stopped answering): the command ended, and the process exits.
    runtime.shutdown_background();
    Ok(ExitCode::from(u8::try_from(code?).unwrap_or(1)))
}

/// Prints an operator command's answer as `--output` asks: `view` as pretty JSON, or `text`.
fn print<V: serde::Serialize>(
    output: OutputFormat,
    view: &V,
    text: fn(&V) -> String,
) -> anyhow::Result<()> {
    let answer = match output {
        OutputFormat::Json => format!("{}\n", serde_json::to_string_pretty(view)?),
        OutputFormat::Text => text(view),
    };
    match std::io::stdout().lock().write_all(answer.as_bytes()) {
        // The reader stopped reading (`| head`): the command's work is done all the same.
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(anyhow::Error::new(e).context("cannot write the answer"))
        }
        _ => Ok(()),
    }
}
