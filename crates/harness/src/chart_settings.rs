//! The chart's rendered container as the binary reads it: its arguments resolved by leasehold's
//! own parser and validation, and leasehold's own bound on a graceful shutdown.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::Container;
use leasehold::cli::{self, Command as Subcommand, Environment, RunSettings};
use testbed::pki::Pki;

use crate::helm::args;

/// The rendered container's arguments, resolved by the binary's own parser and validation, in
/// the environment the pod gives it: the mounted Secrets' files exist (passwords, and PEM files
/// from a throwaway CA), and the Redis URL is the rendered value, or a stand-in for one from a
/// Secret.
pub fn resolve(container: &Container) -> RunSettings {
    let dir = tempfile::tempdir().expect("temp dir");
    let pki = Pki::new();
    let mut argv = vec!["leasehold".to_owned()];
    let mut after_separator = false;
    let mut tls = false;
    for arg in args(container) {
        if arg == "--" {
            after_separator = true;
            argv.push(arg);
            continue;
        }
        if after_separator {
            // The command lives in the user's image; let an existing program stand in for it.
            argv.push(if argv.last().is_some_and(|a| a == "--") {
                "/bin/sh".to_owned()
            } else {
                arg
            });
            continue;
        }
        let file_flag = arg
            .split_once('=')
            .filter(|(flag, value)| flag.ends_with("-file") && value.starts_with('/'));
        match file_flag {
            Some((flag, path)) => {
                let local = dir
                    .path()
                    .join(Path::new(path).strip_prefix("/").expect("absolute"));
                std::fs::create_dir_all(local.parent().expect("parent")).expect("mkdir");
                let content = match flag {
                    "--redis-ca-file" => std::fs::read_to_string(&pki.ca).expect("CA"),
                    "--redis-client-cert-file" => {
                        std::fs::read_to_string(&pki.client_cert).expect("cert")
                    }
                    "--redis-client-key-file" => {
                        std::fs::read_to_string(&pki.client_key).expect("key")
                    }
                    _ => "s3cret\n".to_owned(),
                };
                tls |= flag.starts_with("--redis-c");
                std::fs::write(&local, content).expect("write a mounted file");
                argv.push(format!("{flag}={}", local.display()));
            }
            None => argv.push(arg),
        }
    }
    let url_var = container
        .env
        .clone()
        .unwrap_or_default()
        .into_iter()
        .find(|e| e.name == "LEASEHOLD_REDIS_URL")
        .expect("LEASEHOLD_REDIS_URL is set");
    let url = url_var.value.unwrap_or_else(|| {
        if tls {
            "rediss://redis:6380"
        } else {
            "redis://redis:6379"
        }
        .to_owned()
    });
    argv.insert(2, format!("--redis-url={url}"));
    let cli = cli::parse_from(&argv)
        .unwrap_or_else(|e| panic!("the binary refuses the chart's arguments {argv:?}: {e}"));
    let Subcommand::Run(run) = cli.command else {
        panic!("the chart runs `leasehold run`, not {argv:?}")
    };
    let env = Environment {
        pod_name: Some("lh-leasehold-7d4f9c-x2x9q".into()),
        pod_namespace: Some("shop".into()),
        rust_log: None,
        hostname: Some("lh-leasehold-7d4f9c-x2x9q".into()),
        // In the pod the URL comes from the environment, not the command line.
        redis_url_on_command_line: false,
        redis_url_from: Some("$LEASEHOLD_REDIS_URL".into()),
    };
    run.resolve(&env)
        .unwrap_or_else(|e| panic!("the binary refuses the chart's arguments {argv:?}: {e}"))
}

/// leasehold's own bound on a graceful shutdown, from the binary's code.
pub fn shutdown_bound(s: &RunSettings) -> Duration {
    leasehold::cmd::contender::shutdown_bound(&s.contender)
}
