//! The `leasehold` binary: parse the configuration, start the logs, run the subcommand.

use std::process::ExitCode;

use leasehold::config::{self, Command, ConfigError, Environment, LogArgs};
use leasehold::run::InputError;
use leasehold::{k8s, run, status, telemetry};

fn main() -> ExitCode {
    let cli = match config::parse() {
        Ok(cli) => cli,
        Err(ConfigError::Cli(e)) => e.exit(),
        Err(e) => return refuse(&e),
    };
    let env = Environment::from_process();
    let url_on_command_line = config::redis_url_on_command_line(std::env::args_os());
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = match cli.command {
        Command::Run(args) => {
            let settings = match args.resolve(&env, url_on_command_line) {
                Ok(s) => s,
                Err(e) => return refuse(&e),
            };
            if let Err(e) = start_logs(&args.log, &env) {
                return refuse(&e);
            }
            runtime.block_on(run::run(settings))
        }
        Command::Status(args) => {
            let settings = match args.resolve(&env, url_on_command_line) {
                Ok(s) => s,
                Err(e) => return refuse(&e),
            };
            if let Err(e) = start_logs(&args.log, &env) {
                return refuse(&e);
            }
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

/// Bad input: one clear message and exit code 2.
fn refuse(e: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("error: {e}");
    ExitCode::from(2)
}

fn start_logs(args: &LogArgs, env: &Environment) -> Result<(), telemetry::TelemetryError> {
    let filter = telemetry::parse_filter(&config::log_filter(args, env))?;
    telemetry::init(args.log_format, filter);
    Ok(())
}
