//! The code's shape as docs/DESIGN.md ("Layout") states it, where the compiler cannot hold it:
//! the core's production lines stay within their ceiling, no Rust file of the workspace grows
//! past 500 lines, and no two modules of one folder import each other, directly or around a
//! circle (the compiler allows such cycles; the layout does not).
//!
//! Production lines are every line of a `.rs` file, comments and blank lines included, except
//! tests: files named `tests.rs`, files under a `tests/` folder, and a file's tail from its
//! `#[cfg(test)] mod tests` (which, when it names a file of its own, ends the file).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use harness::target::repo;

use crate::docs::sources;

/// The core's ceiling: its size when the ceiling was set. The goal is 6,000 lines; each cut
/// lowers the ceiling to the new size, and a feature that does not change when a term begins
/// or ends goes to the product instead of raising it. Defect fixes are the one exception: each
/// raise names its defects in the commit that made it (`git log -p tests/operator/border.rs`
/// has them all), and a later cut pays the lines back. Last raised from 7,886 for a call bound
/// said as `within 666.666666ms`, and `within 0ns` below a millisecond (7,887), and a one-shot
/// lock that gave up at a data-loss cooldown, no holder, so that every new CronJob's first run
/// exited 75 (7,892), less its give-up arithmetic written in two lines instead of four (7,890),
/// and a step-down that released the lease while the guard file, which could be neither zeroed
/// nor removed, still named the term: `ending` now says whether a hook withdrew it (7,900),
/// and, from the review of that fix, a handover then lost (no reservation) and the same replica
/// winning again at once: such a term is released at its deadline instead (7,911), less the
/// stop token that wait no longer watches (7,908), and `--wait 0s` locks that waited out one
/// cooldown and then ran one after another, each taking what the one before released, where
/// the try as it ends is their last (7,910), and a Redis URL the client library cannot parse
/// refused in its words (`did not parse - InvalidClientConfig`), with a database below 0 let
/// through to fail at run time, and an identity refused by the lease name's rule (7,915), and a
/// follower whose pair of tries a moment apart made it take every later pair on a Redis clock
/// over 10 % fast for a step, so that its terms began valid past Redis's expiry (7,916); then
/// cut to 7,862 by writing the same code shorter (one `set` for the status's compare-and-assign,
/// one closure for the script's command in Redis's refusal, borrowed strings in the calls' retry
/// closures, no `until_out` beside `wait_until`), with no change of behaviour; then raised for
/// a renewal queued behind a frozen Redis that put an expired lease back for a holder that had
/// stepped down, whose refusal now carries Redis's time so that a step still shows (7,878), and
/// one Sentinel at two listed addresses counted twice, its word alone a majority (7,897), and a
/// silent majority of the Sentinels said as a Redis timeout, a slow link (7,918), and, from the
/// review of these fixes, a lease lost with Redis's data no longer put back for its holder, a
/// refusal said to let the term go on, and one Sentinel at two addresses counted once unsaid
/// (7,930), and a Sentinel's first ask that took a round trip more for its id, so that a
/// Sentinel on a link of 1 to 2 s a round trip no longer counted (7,942); then cut to 7,936:
/// `Grant::ttl`, written and never read, and a count of the Sentinels yet to answer that the
/// round's set of asks already keeps; then raised for Sentinels whose ACL refused `SENTINEL
/// MYID`, said as Sentinels out of reach and tried at the usual pace for ever (7,962), and a
/// lock frozen past its wait that tried as it thawed, however late, and ran its command (7,967),
/// and Redis's error replies of no kind of leasehold's (`MISCONF`, `NOREPLICAS`, `BUSY`) said
/// as a Redis out of reach (7,973), and a `PING` on the release channel refused with one of
/// them taken for a silent link (7,974), and a missing password that Redis refused as
/// `Protocol error: unauthenticated multibulk length` said as an error reply (7,984), and a
/// `:handover` key of another type that the acquire did not read, so that terms were won only
/// to end at their first renewal (7,986). Lowered to 7,982 when `Leadership::settled` gave way
/// to `deadline_missed`; raised for a win read after its validity (a starved follower), which
/// began a term with `valid_for_ms=0`, labels and Events included (8,003), and with a retry
/// period's margin and no Redis error counted for it (8,007), its test moved into `decide/`
/// as a table-tested decision (8,018), and a lease released as soon as the leader's work was
/// aborted at the deadline, while a starved command's processes were not yet seen dead (8,022),
/// and a master that Sentinels watch taken by its own address beside replicas that asked the
/// Sentinels, two leaders after a failover, now refused with an error of its own (8,040), and
/// a dead leader's key kept by a foreign `EXPIRE` of hours, whose TTL the followers went on
/// honouring after the key was deleted: no leader for the whole foreign TTL (8,051), and a
/// follower woken by its own give-back, trying again five times a second with `WAIT` unmet,
/// own releases now filtered where they are heard and the hold-off's copy of the rule gone
/// (8,063), and a term ended at its renew deadline by refused renewals (`NOREPLICAS`,
/// `MISCONF`) that said nothing of why in its step-down (8,071), and a Cluster node named by its
/// own address with the cooldown off, the Sentinel refusal's error made one for both and kept
/// for the life of the process (8,086). Lowered by the same code written shorter (7,970): the
/// term hooks told through one `each` instead of a forwarding impl, a failed call counted where
/// it is logged, and field docs that said their names again. Raised for the `#[default]` of the
/// cooldown state that lets tests start from an empty Redis's observation (7,971), and for an
/// elector dropped in a term, whose work ran on with `lost()` never firing while nothing
/// renewed (8,060), lowered as that fix stopped writing the status from a drop (8,034) and
/// read the reason it ends with once (8,030), and a leader on a master Sentinels came to watch,
/// which renewed on for ever (8,041), and a password shown in a refused Redis URL (8,069), and
/// a TCP URL's `?db=3` dropped in silence and port 0 dialled (8,091, 8,082 read through the
/// client's own URL parser).
/// (A longer lease duration forgotten after twice its length was taken back: a review showed a
/// follower cut off meanwhile then covering less than a frozen holder's term.)
const CORE_CEILING: usize = 8_082;

/// The core and the product together, set the same way (the goal is 16,600), each raise's
/// defects named in its commit. Last raised from 21,101 for `step-down` over a reservation
/// without expiry (it asked the leader to go, leaving nobody able to lead, and a handover to a
/// named replica wrote over the key) and `step-down` against a Redis replica, which said
/// "nobody leads" (21,128), and a grace period longer than any step-down gives, cut short in
/// silence (21,137), and a candidate check never healthy since start, out without a word
/// (21,138), and `--redis-eviction refuse` taking part when an ACL hid `INFO memory` from
/// the start (21,142), and the review of these fixes: a reservation naming a live replica
/// called a dead end, `refuse` saying an unread policy may evict, a grace period of more than
/// a validity less 100 ms (and not a lease duration) cut short, and the core's raise (21,148),
/// and the core's raise for the lock that gave up at a cooldown (21,153), and an `Accept`
/// split over two lines read as its first, a `Last-Event-ID` beyond ASCII never resumed, and
/// a `--status-file` ending in `/` accepted and never written (21,168), less the core's two
/// lines (21,166), and a guard file on a filesystem that stopped answering, which froze the
/// whole process (its command ran on beside the next leader) and whose step-down released the
/// lease anyway, and a hung status file that held up the shutdown without a bound (21,361),
/// and the review of that fix: the elector's share of the shutdown cut by 4 s, the end of the
/// guard file overtaken by later writes and told done, the second signal's kill 1 s late, and
/// the core's raise (21,396), and from a second review, a guard file touched again after its
/// end at exit, less the core's three lines (21,397), less "ended at exit" kept once, in the
/// guard file itself, instead of also in its writer thread (21,391), and a lock whose tries Redis
/// refused while its reads answered (a missing permission), which exited 75 for "held
/// elsewhere" instead of 1, and the core's two lines for the locks after a cooldown (21,395),
/// and a lock against a frozen Redis, kept from trying by the eviction gate's first read, which
/// exited 75 or 1 by a race (21,398), and `status` read from a Redis replica saying a cooldown
/// was pending by the replica's own identity, which never names the record's writer (21,404),
/// and a foreign value's line breaks and escape sequences printed as they were by `status`,
/// `remove-keys` and `step-down`, drawing rows of their own on the operator's terminal (21,417),
/// and a `POD_NAMESPACE` or `POD_NAME` that is not UTF-8 taken as unset (another lease, another
/// identity), clap's refusal of a `LEASEHOLD_*` variable that is not UTF-8 naming none, and the
/// core's five lines (21,436), and SIGQUIT, SIGUSR1 and the other signals that would end the
/// process killing it without a release (the command's children ran on beside the next
/// leader's), SIGTTIN and SIGTTOU stopping it, one signal sent twice by GNU `timeout` taken for a
/// second, a relative guard file given to the command as typed, the command's exit said after
/// its term had ended, and the core's line (21,486), less the core's cut (21,432), and a second
/// signal whose drain, ended by its own hooks, exited 0 before it could exit 128 + its number
/// (21,445), and the core's raises for the late renewal's put-back and the Sentinel counted
/// twice (21,480), and for the silent Sentinels (21,501), and for their review (21,513), and
/// for the Sentinel's id asked beside its first ask (21,525), less the core's cut (21,519), and
/// one file given as both `--guard-file` and `--status-file`, refused as written by "another
/// live leasehold (this process)" instead of naming the two flags (21,544), and the core's
/// raise for the Sentinels that refused `SENTINEL MYID` (21,570) and for the lock frozen past
/// its wait (21,575), and `step-down --wait 1ns` accepted, which ended the term and then said
/// the handover failed (21,586), and the core's raises for the error replies (21,592) and the
/// refused `PING` (21,593), and the frozen lock's line that said no word of the pause
/// (`waited_ms`, 21,597), and the core's raise for the unauthenticated long call (21,607), and
/// `step-down`'s request whose lost answer ended the command before the handover it asked for,
/// its looks that overran `--wait`, `step-down` and `remove-keys` printing Redis's values
/// unescaped, `status` saying no key existed beside the state record, and a lock saying it
/// released when its release was refused (21,649), and the core's raise for the handover key
/// (21,651), and text logs that wrote Redis's values unescaped (21,669), and a lock's
/// not-acquired line that named neither the reservation nor the holder it saw (21,673), and
/// `step-down` asking a foreign value with an expiry to hand over, and saying it led (21,681),
/// and the text logs' escaping, which wrote the `log.` metadata of every dependency's record
/// (21,724), and step-down's last look bounded to 250 ms, which said a Redis slow for a moment
/// had failed (21,725), and a password in a URL from the `--config` file said to come from
/// `$LEASEHOLD_REDIS_URL`, where an operator rotating it would look first (21,739), and a
/// logged command line whose arguments ran together, so that nobody could tell what ran
/// (`sh -c echo "ran token=*** exit 7`; 21,771). Lowered to 21,754 with the core's. Raised
/// for a leader whose guard file could not be written (a full `/dev/shm`): it led on for ever
/// while its command's checks refused, now a gate of its own on the clock gate's back-off, which
/// both share (21,859), and a subcommand's `-V` that said `leasehold-status 0.2.0` (21,860),
/// and the core's raise for a win read after its validity (21,881), and the guard file's gate
/// kept to a file the user named, closed only for a term under way, and said once across a full
/// filesystem's alternating refusals (21,932), and a logged command line that showed a
/// password after a tab and a literal `*` unquoted (21,940), and the core's decision (21,949),
/// and aborted work's lease left to expire, with the processes still alive named (21,958),
/// and an out-of-memory kill said only as `code 137` (21,970), and the core's refusal of a
/// master that Sentinels watch named by its own address (21,988), and its cap on what a
/// follower keeps of a holder's TTL (21,999), and its filter of a replica's own releases
/// (22,011), and an eviction refusal under a leader with a command said as `shutdown` (22,016),
/// and the core's word on the last failed renewal (22,024), and the refusal of a Cluster node
/// without the cooldown (22,039), and `--namespace` dropped in silence beside a `--lease-name`
/// of another namespace (22,051), lowered with the core's (21,935), and the cooldown state's
/// `#[default]` (21,936), and the core's end of a term whose elector was dropped (22,025),
/// lowered with the core's (21,999, 21,995), then to 21,705 by the product written shorter
/// (commits 3b7cfa9 to 731c332); raised for a non-UTF-8 variable or a short flag's typed value
/// refused without the right source (21,731), the core's two raises, refusals that panicked
/// with stderr gone (`say!`), and a guard or status file path whose file or device node the
/// first write replaced, now refused unless empty or leasehold's (21,814), and the core's
/// refusal of a URL's unread query and port 0 (21,836, then 21,827).
const CORE_AND_PRODUCT_CEILING: usize = 21_827;

/// The longest a Rust file may be, tests included: one concept per file.
const MAX_FILE_LINES: usize = 500;

/// Every `.rs` file under `dir`, by its full path, with its text.
fn rust_files(dir: &Path) -> Vec<(PathBuf, String)> {
    sources(dir)
        .into_iter()
        .map(|(name, text)| (repo().join(name), text))
        .collect()
}

fn is_test_file(path: &Path) -> bool {
    path.file_name().is_some_and(|n| n == "tests.rs")
        || path.components().any(|c| c.as_os_str() == "tests")
}

/// The production lines of the Rust under `dir` (relative to the repository).
fn production_lines(dir: &str) -> usize {
    let files = rust_files(&repo().join(dir));
    assert!(!files.is_empty(), "no Rust file under {dir}");
    files
        .iter()
        .filter(|(path, _)| !is_test_file(path.strip_prefix(repo()).unwrap_or(path)))
        .map(|(path, text)| {
            let lines: Vec<&str> = text.split('\n').collect();
            let tests = lines.windows(2).position(|pair| {
                pair[0].trim() == "#[cfg(test)]"
                    && ["mod tests", "pub mod tests", "pub(crate) mod tests"]
                        .iter()
                        .filter_map(|m| pair[1].trim_start().strip_prefix(m))
                        .any(|rest| rest.is_empty() || rest.starts_with([' ', ';', '{']))
            });
            let Some(at) = tests else {
                return lines.len();
            };
            // The count stops here, so the tests must end the file: a `mod tests;` (a file of
            // its own) or a block up to its closing brace in the first column.
            let declared = lines[at + 1].split("//").next().unwrap_or_default();
            let end = if declared.trim_end().ends_with(';') {
                at + 1
            } else {
                let close = lines[at..].iter().position(|l| l.starts_with('}'));
                close.map_or(lines.len(), |i| at + i)
            };
            assert!(
                lines
                    .get(end + 1..)
                    .unwrap_or_default()
                    .iter()
                    .all(|l| l.trim().is_empty()),
                "{}: the count of production lines stops at `#[cfg(test)] mod tests`, which must \
                 end the file",
                path.display()
            );
            at
        })
        .sum()
}

#[test]
fn the_core_stays_within_its_line_ceiling() {
    let core = production_lines("crates/core/src");
    let product = production_lines("src");
    assert!(
        core <= CORE_CEILING,
        "the core has {core} production lines, over its ceiling of {CORE_CEILING}: a feature \
         that does not change when a term begins or ends belongs in the product (docs/DESIGN.md, \
         \"Layout\")"
    );
    assert!(
        core + product <= CORE_AND_PRODUCT_CEILING,
        "the core and the product have {} production lines, over their ceiling of \
         {CORE_AND_PRODUCT_CEILING}",
        core + product
    );
}

#[test]
fn no_rust_file_is_over_500_lines() {
    let long: Vec<String> = ["src", "crates", "examples", "tests"]
        .iter()
        .flat_map(|dir| rust_files(&repo().join(dir)))
        .filter_map(|(path, text)| {
            let lines = text.lines().count();
            (lines > MAX_FILE_LINES).then(|| format!("{} ({lines})", path.display()))
        })
        .collect();
    assert!(
        long.is_empty(),
        "over {MAX_FILE_LINES} lines, split by concept: {long:?}"
    );
}

/// A module path inside its crate: `["lease", "reply"]` for `lease/reply.rs`.
type ModulePath = Vec<String>;

/// The module path of the file at `rel` (relative to its crate's root folder), and whether it is
/// a folder's module (`mod.rs`, or the crate's `lib.rs` or `main.rs`).
fn module_of(rel: &Path) -> (ModulePath, bool) {
    let mut parts: ModulePath = rel
        .with_extension("")
        .iter()
        .map(|c| c.to_string_lossy().into_owned())
        .collect();
    let folder = matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    );
    if folder {
        parts.pop();
    }
    (parts, folder)
}

/// Every path that `text` names from `crate::`, `super::` or `self::`, as its segments after
/// that head; a group (`crate::a::{b, c::d}`) gives one path per member.
fn references(text: &str) -> Vec<(String, ModulePath)> {
    let code: String = text
        .lines()
        .map(|line| line.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n");
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut found = Vec::new();
    for head in ["crate", "super", "self"] {
        let needle = format!("{head}::");
        for (at, _) in code.match_indices(&needle) {
            if code[..at].ends_with(is_ident) {
                continue;
            }
            let mut rest = &code[at + needle.len()..];
            let mut segments = ModulePath::new();
            loop {
                let ident: String = rest.chars().take_while(|c| is_ident(*c)).collect();
                if ident.is_empty() {
                    break;
                }
                rest = &rest[ident.len()..];
                segments.push(ident);
                match rest.strip_prefix("::") {
                    Some(more) => rest = more,
                    None => break,
                }
            }
            if let Some(group) = rest.strip_prefix('{') {
                // The group's members, split at its own commas, not those of a nested group.
                let (mut depth, mut member) = (0, String::new());
                for c in group.chars() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => break,
                        '}' => depth -= 1,
                        ',' if depth == 0 => member.push('\n'),
                        _ if depth == 0 => member.push(c),
                        _ => {}
                    }
                }
                for name in member.split('\n') {
                    let name: String = name.trim().chars().take_while(|c| is_ident(*c)).collect();
                    if !name.is_empty() && name != "self" {
                        let mut path = segments.clone();
                        path.push(name);
                        found.push((head.to_owned(), path));
                    }
                }
            }
            found.push((head.to_owned(), segments));
        }
    }
    found
}

/// The cycles between sibling modules of the crate whose root folder is `root`: one line per
/// folder and set of modules that import each other around a circle.
fn sibling_cycles(root: &Path) -> Vec<String> {
    let files = rust_files(root);
    let modules: BTreeSet<ModulePath> = files
        .iter()
        .filter_map(|(f, _)| f.strip_prefix(root).ok())
        .flat_map(|rel| {
            let (path, _) = module_of(rel);
            (1..=path.len()).map(move |n| path[..n].to_vec())
        })
        .collect();
    let mut edges: BTreeMap<ModulePath, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (file, text) in &files {
        let Ok(rel) = file.strip_prefix(root) else {
            continue;
        };
        let (here, _) = module_of(rel);
        for (head, segments) in references(text) {
            let mut target = match head.as_str() {
                "crate" => ModulePath::new(),
                "self" => here.clone(),
                _ => here[..here.len().saturating_sub(1)].to_vec(),
            };
            for segment in segments {
                match segment.as_str() {
                    "super" => {
                        target.pop();
                    }
                    "self" => {}
                    _ => target.push(segment),
                }
            }
            let common = here.iter().zip(&target).take_while(|(a, b)| a == b).count();
            if common < here.len() && common < target.len() && modules.contains(&target[..=common])
            {
                edges
                    .entry(here[..common].to_vec())
                    .or_default()
                    .entry(here[common].clone())
                    .or_default()
                    .insert(target[common].clone());
            }
        }
    }
    let mut cycles = Vec::new();
    for (folder, graph) in &edges {
        let reach = |from: &String| {
            let (mut seen, mut todo) = (BTreeSet::new(), vec![from.clone()]);
            while let Some(node) = todo.pop() {
                for next in graph.get(&node).into_iter().flatten() {
                    if seen.insert(next.clone()) {
                        todo.push(next.clone());
                    }
                }
            }
            seen
        };
        let reached: BTreeMap<&String, BTreeSet<String>> =
            graph.keys().map(|node| (node, reach(node))).collect();
        let mut circles = BTreeSet::new();
        for (node, seen) in &reached {
            if seen.contains(*node) {
                let circle: Vec<&String> = reached
                    .iter()
                    .filter(|(other, theirs)| seen.contains(**other) && theirs.contains(*node))
                    .map(|(other, _)| *other)
                    .collect();
                circles.insert(circle);
            }
        }
        for circle in circles {
            let circle: Vec<&str> = circle.iter().map(|s| s.as_str()).collect();
            cycles.push(format!(
                "{} in {}/{}",
                circle.join(" <-> "),
                root.display(),
                folder.join("/")
            ));
        }
    }
    cycles
}

/// The root folder of every crate and test or example target made of several files.
fn crate_roots() -> Vec<PathBuf> {
    let mut roots = vec![repo().join("src")];
    for parent in ["crates", "tests", "examples"] {
        for entry in std::fs::read_dir(repo().join(parent))
            .into_iter()
            .flatten()
            .flatten()
        {
            let dir = entry.path();
            for root in [dir.join("src"), dir.clone()] {
                if ["lib.rs", "main.rs"].iter().any(|f| root.join(f).is_file()) {
                    roots.push(root);
                }
            }
            for target in std::fs::read_dir(dir.join("tests"))
                .into_iter()
                .flatten()
                .flatten()
            {
                if target.path().join("main.rs").is_file() {
                    roots.push(target.path());
                }
            }
        }
    }
    roots
}

#[test]
fn no_modules_of_one_folder_import_each_other_around_a_circle() {
    let roots = crate_roots();
    assert!(roots.len() > 10, "too few crates found: {roots:?}");
    let cycles: Vec<String> = roots.iter().flat_map(|root| sibling_cycles(root)).collect();
    assert!(cycles.is_empty(), "import cycles: {cycles:#?}");
}

#[test]
fn the_cycle_check_finds_a_circle_through_crate_super_and_a_group() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let write = |path: &str, text: &str| {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("a folder");
        std::fs::write(path, text).expect("a file");
    };
    write("lib.rs", "mod a;\nmod b;\nmod c;\nmod d;\n");
    write(
        "a.rs",
        "use crate::b::X; // crate::d::Y in a comment is no import\n",
    );
    write("b/mod.rs", "mod inner;\n");
    write("b/inner.rs", "use crate::{c::{Z, W}, d};\n");
    write("c.rs", "fn f() { super::a::g() }\n");
    write("d.rs", "use crate::a::Q;\n");
    assert_eq!(
        sibling_cycles(dir.path()).len(),
        1,
        "{:?}",
        sibling_cycles(dir.path())
    );
    assert!(sibling_cycles(dir.path())[0].starts_with("a <-> b <-> c <-> d in "));
    // Without c's import and b's of d, only the comment in a would close a circle with d.
    write("c.rs", "fn f() {}\n");
    write("b/inner.rs", "use crate::c::Z;\n");
    assert_eq!(sibling_cycles(dir.path()), Vec::<String>::new());
}
