//! leasehold as real processes and what it runs: the binary end to end, leaders SIGKILLed and
//! SIGSTOPped, the singleton command's supervisor, the one-shot `lock`, the guard file and
//! `leasehold guard`, and the status file against a writer that died or froze.

mod binary;
mod client_view;
mod command;
mod configuration;
mod exec;
mod exec_suspend;
mod full_disk;
mod guard;
mod guard_check;
mod killed_and_paused;
mod lock;
mod lock_cooldown;
mod lock_not_acquired;
mod planted_files;
mod shutdown;
mod stalled_files;
mod stalled_stderr;
mod status_file;
