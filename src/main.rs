//! The `leasehold` binary: all of it is [`leasehold::main`] (the `cli` feature).

fn main() -> std::process::ExitCode {
    leasehold::main()
}
