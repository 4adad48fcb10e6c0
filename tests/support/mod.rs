//! Shared test support: real redis-server processes, a fault proxy, wait helpers, and helpers
//! to run electors in-process or as child processes. Each test binary uses a part of it.
#![allow(dead_code)]

pub mod cluster;
pub mod command_tree;
pub mod contenders;
pub mod fake_api;
pub mod guarded_command;
pub mod helm;
pub mod http_get;
pub mod pki;
pub mod postgres;
pub mod prometheus;
pub mod proxy;
pub mod redis_server;
pub mod replica;
pub mod rollout;
pub mod sentinel;
pub mod wait;
