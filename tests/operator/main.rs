//! What an operator types and reads: bad input to every command answered with the flag, the
//! value and the rule, `leasehold remove-keys`, docs/REFERENCE.md's tables against the code, the
//! benchmark harness's quick run, the demo on a machine with nothing but a redis-server, and the
//! code's shape (the core's line ceiling, no file over 500 lines).

mod bench_smoke;
mod border;
mod cli;
mod completions;
mod config_file;
mod demo;
mod docs;
mod durations;
mod environment;
mod files;
mod help;
mod lease_name;
mod operator_cli;
mod printed;
mod readme;
mod refusal;
mod shown;
mod uninstall;
