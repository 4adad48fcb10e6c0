//! What an operator types and reads: bad input to every command answered with the flag, the
//! value and the rule, `leasehold remove-keys`, docs/REFERENCE.md's tables against the code, and
//! the benchmark harness's quick run.

mod bench_smoke;
mod cli;
mod docs;
mod operator_cli;
mod uninstall;
