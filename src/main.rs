//! The `leasehold` binary: parse the configuration, start the logs, run the subcommand.

use std::process::ExitCode;

use leasehold::config::{self, Command, ConfigError, Environment, LogArgs};
use leasehold::run::InputError;
use leasehold::{guard, k8s, lock, run, status, step_down, telemetry};

fn main() -> ExitCode {
    let cli = match config::parse() {
        Ok(cli) => cli,
        Err(ConfigError::Cli(e)) => e.exit(),
        Err(e) => return refuse(&e),
    };
    let env = Environment::from_process();
    let url_on_command_line = config::redis_url_on_command_line(std::env::args_os());
    let outcome = match cli.command {
        // The guard answers at once: no runtime, no logs, no connection.
        Command::Guard(args) => return ExitCode::from(guard::check::run(&args.check())),
        Command::Run(args) => {
            match prepare(args.resolve(&env, url_on_command_line), &args.log, &env) {
                Ok(settings) => match runtime() {
                    Ok(runtime) => runtime.block_on(run::run(settings)),
                    Err(code) => return code,
                },
                Err(code) => return code,
            }
        }
        Command::Status(args) => {
            let settings = match prepare(args.resolve(&env, url_on_command_line), &args.log, &env) {
                Ok(settings) => settings,
                Err(code) => return code,
            };
            let runtime = match runtime() {
                Ok(runtime) => runtime,
                Err(code) => return code,
            };
            runtime.block_on(async {
                let name = match &settings.lease {
                    config::LeaseSource::Named(name) => name.clone(),
                    source => {
                        let client = k8s::connect(config::KubernetesMode::Auto).await?;
                        run::resolve_lease(source, client.as_ref(), "", None)
                            .await?
                            .0
                    }
                };
                status::status(settings, name).await
            })
        }
        Command::StepDown(args) => {
            let log = &args.status.log;
            let settings = match prepare(args.resolve(&env, url_on_command_line), log, &env) {
                Ok(settings) => settings,
                Err(code) => return code,
            };
            match runtime() {
                Ok(runtime) => runtime.block_on(async {
                    let name = step_down::lease_name(&settings.status.lease).await?;
                    step_down::step_down(settings, name).await
                }),
                Err(code) => return code,
            }
        }
        Command::Lock(args) => {
            match prepare(args.resolve(&env, url_on_command_line), &args.log, &env) {
                Ok(settings) => match runtime() {
                    Ok(runtime) => runtime.block_on(lock::lock(settings)),
                    Err(code) => return code,
                },
                Err(code) => return code,
            }
        }
    };
    match outcome {
        Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Err(e) if e.downcast_ref::<InputError>().is_some() => refuse(&e),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The async runtime of `run` and `status`.
fn runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            eprintln!("error: cannot start the async runtime: {e}");
            ExitCode::FAILURE
        })
}

/// Bad input: one clear message and exit code 2.
fn refuse(e: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("error: {e}");
    ExitCode::from(2)
}

/// The validated settings with the logs started, or the exit code of a refusal.
fn prepare<S>(
    resolved: Result<S, ConfigError>,
    log: &LogArgs,
    env: &Environment,
) -> Result<S, ExitCode> {
    let settings = resolved.map_err(|e| refuse(&e))?;
    start_logs(log, env).map_err(|e| refuse(&e))?;
    Ok(settings)
}

fn start_logs(args: &LogArgs, env: &Environment) -> Result<(), telemetry::TelemetryError> {
    let filter = telemetry::parse_filter(&config::log_filter(args, env))?;
    telemetry::init(args.log_format, filter);
    Ok(())
}
