//! Server commands: COMMAND INFO CONFIG TIME LASTSAVE SAVE BGSAVE SHUTDOWN DEBUG MONITOR
//! SLOWLOG.

use std::sync::atomic::Ordering;
use std::time::Duration;

use nacre_resp::Reply;

use super::args::{float, int, is, lower};
use super::flags;
use super::registry::{all, full_name, unknown_subcommand};
use super::registry::{cmd, sub, Command, Keys::None as NK, Run::Conn};
use super::{arity_error, err, ok, syntax, Outcome};
use crate::client::Client;
use crate::glob::glob_match;
use crate::shared::{now_ms, Shared};
use crate::store::txn::{Ticket, Txn};

fn reply(r: Reply) -> Outcome {
    Outcome::Reply(r, Ticket(0))
}

fn bulk(s: impl Into<String>) -> Reply {
    Reply::Bulk(s.into().into_bytes())
}

fn help(lines: &[&str]) -> Outcome {
    reply(Reply::Array(
        lines.iter().map(|s| Reply::Simple(s.to_string())).collect(),
    ))
}

/// One row of `COMMAND INFO`: name, arity, flags, key range, ACL categories, tips (none),
/// key specs (none), subcommands.
fn info_row(
    name: String,
    arity: i32,
    f: super::registry::Flags,
    (first, last, step): (i64, i64, i64),
    acl: super::registry::Acl,
    subs: Vec<Reply>,
) -> Reply {
    let names = |n: Vec<&str>, prefix: &str| {
        Reply::Set(
            n.into_iter()
                .map(|n| Reply::Simple(format!("{prefix}{n}")))
                .collect(),
        )
    };
    Reply::Array(vec![
        bulk(name),
        Reply::Integer(arity.into()),
        names(flags::names(f, flags::FLAG_NAMES), ""),
        Reply::Integer(first),
        Reply::Integer(last),
        Reply::Integer(step),
        names(flags::names(acl, flags::ACL_NAMES), "@"),
        Reply::Set(vec![]),
        Reply::Array(vec![]),
        Reply::Array(subs),
    ])
}

fn sub_info(parent: &Command, s: &super::registry::Sub) -> Reply {
    let (first, last, step) = s.keys;
    info_row(
        full_name(parent.name, Some(s.name)),
        s.arity,
        s.flags,
        (first.into(), last.into(), step.into()),
        s.acl,
        Vec::new(),
    )
}

fn command_info(c: &Command) -> Reply {
    info_row(
        c.name.to_string(),
        c.arity,
        c.flags,
        c.key_spec(),
        c.acl,
        c.subs.iter().map(|s| sub_info(c, s)).collect(),
    )
}

fn command_docs(c: &Command) -> (Reply, Reply) {
    (
        bulk(c.name),
        Reply::Map(vec![
            (bulk("summary"), bulk(c.summary)),
            (bulk("since"), bulk(c.since)),
            (bulk("group"), bulk(c.group)),
        ]),
    )
}

/// User, system, children's user and children's system CPU seconds from a `stat` file of
/// `/proc` (zeros where it cannot be read). The kernel counts in ticks of 1/100 s.
fn cpu_times(path: &str) -> [f64; 4] {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = text.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0) / 100.0;
    // utime, stime, cutime, cstime are fields 14-17, so 11-14 after the name and state.
    [tick(11), tick(12), tick(13), tick(14)]
}

/// The process's resident memory: all of it, and what is not a file's mapping (the heap and
/// stacks: DRAM the server uses for itself). The rest is mapped files, almost all of it the
/// pool (a file on tmpfs or on disk), and the binary's code.
struct Resident {
    total: u64,
    anon: u64,
}

fn resident() -> Resident {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024)
    };
    Resident {
        total: field("VmRSS:"),
        anon: field("RssAnon:"),
    }
}

/// A name `COMMAND LIST` may show, with its ACL categories.
type Listed = (String, super::registry::Acl);

/// `COMMAND INFO` of `name`: a command, or a subcommand as `parent|sub`; nil for neither.
fn info_of(name: &[u8]) -> Reply {
    let name = lower(name);
    match name.split_once('|') {
        None => super::lookup(&name).map_or(Reply::Nil, command_info),
        Some((parent, sub)) => super::lookup(parent)
            .and_then(|c| {
                c.subs
                    .iter()
                    .find(|s| s.name == sub)
                    .map(|s| sub_info(c, s))
            })
            .unwrap_or(Reply::Nil),
    }
}

/// `COMMAND [COUNT|INFO|DOCS|LIST|GETKEYS|HELP]`.
pub fn command(shared: &Shared, client: &mut Client, args: &[Vec<u8>]) -> Outcome {
    if args.len() == 1 {
        return reply(Reply::Array(
            all().iter().map(|c| command_info(c)).collect(),
        ));
    }
    let find = |n: &[u8]| super::lookup(&lower(n));
    match lower(&args[1]).as_str() {
        "count" if args.len() == 2 => reply(Reply::Integer(all().len() as i64)),
        "info" => reply(Reply::Array(if args.len() == 2 {
            all().iter().map(|c| command_info(c)).collect()
        } else {
            args[2..].iter().map(|n| info_of(n)).collect()
        })),
        "docs" => reply(Reply::Map(if args.len() == 2 {
            all().iter().map(|c| command_docs(c)).collect()
        } else {
            args[2..]
                .iter()
                .filter_map(|n| find(n))
                .map(command_docs)
                .collect()
        })),
        "list" => {
            // Commands and subcommands (`config|get`), as Redis lists them.
            let names = all().iter().flat_map(|c| {
                std::iter::once((c.name.to_string(), c.acl)).chain(
                    c.subs
                        .iter()
                        .map(move |s| (full_name(c.name, Some(s.name)), s.acl)),
                )
            });
            let keep: Box<dyn Fn(&Listed) -> bool> = match args.len() {
                2 => Box::new(|_| true),
                5 if is(&args[2], "filterby") && is(&args[3], "pattern") => {
                    let p = args[4].clone();
                    Box::new(move |(n, _)| glob_match(&p, n.as_bytes(), true))
                }
                5 if is(&args[2], "filterby") && is(&args[3], "aclcat") => {
                    let cat = lower(&args[4]);
                    let bit = flags::ACL_NAMES
                        .iter()
                        .find(|(_, n)| *n == cat)
                        .map(|(b, _)| *b);
                    Box::new(move |(_, acl)| bit.is_some_and(|b| acl.contains(b)))
                }
                5 if is(&args[2], "filterby") && is(&args[3], "module") => Box::new(|_| false),
                _ => return reply(syntax()),
            };
            reply(Reply::Array(
                names.filter(|e| keep(e)).map(|(n, _)| bulk(n)).collect(),
            ))
        }
        "getkeys" | "getkeysandflags" if args.len() >= 3 => {
            let with_flags = is(&args[1], "getkeysandflags");
            let Some(c) = find(&args[2]) else {
                return reply(err("Invalid command specified"));
            };
            let cargs = &args[2..];
            let sub = c.sub(cargs);
            if !super::arity_ok(sub.map_or(c.arity, |s| s.arity), cargs.len()) {
                return reply(err("Invalid number of arguments specified for command"));
            }
            // As Redis: a command without key specs has no keys to find; one that has them
            // but finds none here is an error unless its keys are optional (EVAL's).
            let has_keys = !matches!(c.keys, super::registry::Keys::None)
                && sub.is_none_or(|s| s.keys != (0, 0, 0));
            if !has_keys {
                return reply(err("The command has no key arguments"));
            }
            let keys = match super::registry::keys_of(c, client.db, cargs, shared.store.databases())
            {
                Ok(k) if k.is_empty() => {
                    let flags = sub.map_or(c.flags, |s| s.flags);
                    return reply(if flags.contains(super::Flags::NO_MANDATORY_KEYS) {
                        Reply::Array(Vec::new())
                    } else {
                        err("Invalid arguments specified for command")
                    });
                }
                Ok(k) => k,
                Err(e) => return reply(e),
            };
            if !with_flags {
                return reply(Reply::Array(
                    keys.into_iter().map(|(_, k)| Reply::Bulk(k)).collect(),
                ));
            }
            // Each key's argument position, in order, picks its spec's flags.
            let name = full_name(c.name, sub.map(|s| s.name));
            let mut at = 0;
            let rows = keys
                .into_iter()
                .map(|(_, k)| {
                    at = (at + 1..cargs.len()).find(|&i| cargs[i] == k).unwrap_or(at);
                    let flags = super::keyspecs::flags_of(&name, cargs, at)
                        .iter()
                        .map(|f| Reply::Simple(f.to_string()))
                        .collect();
                    Reply::Array(vec![Reply::Bulk(k), Reply::Set(flags)])
                })
                .collect();
            reply(Reply::Array(rows))
        }
        "help" => help(&[
            "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "(no subcommand)",
            "    Return details about all commands.",
            "COUNT",
            "    Return the total number of commands in this server.",
            "LIST",
            "    Return a list of all commands in this server.",
            "INFO [<command-name> ...]",
            "    Return details about multiple commands.",
            "DOCS [<command-name> ...]",
            "    Return documentation details about multiple commands.",
            "GETKEYS <full-command>",
            "    Return the keys from a full command.",
            "HELP",
            "    Prints this help.",
        ]),
        "count" | "getkeys" => reply(arity_error(&format!("command|{}", lower(&args[1])))),
        _ => reply(unknown_subcommand(&args[1], "command")),
    }
}

/// The text of `INFO` for `sections` (empty: the default ones).
pub fn info_text(shared: &Shared, sections: &[String]) -> String {
    let all = sections.iter().any(|s| s == "all" || s == "everything");
    let want = |s: &str| {
        sections.is_empty() && s != "commandstats"
            || all
            || sections
                .iter()
                .any(|x| x == s || (x == "default" && s != "commandstats"))
    };
    let store = &shared.store;
    let cfg = shared.config.read().clone();
    let mut out = String::new();
    let uptime = shared.started.elapsed().as_secs();
    if want("server") {
        out.push_str(&format!(
            "# Server\r\nredis_version:{}\r\nnacre_version:{}\r\nredis_mode:standalone\r\nos:{}\r\narch_bits:64\r\nmultiplexing_api:epoll\r\nprocess_id:{}\r\nrun_id:{}\r\ntcp_port:{}\r\nuptime_in_seconds:{}\r\nuptime_in_days:{}\r\nexecutable:{}\r\nconfig_file:{}\r\n\r\n",
            crate::REDIS_VERSION,
            env!("CARGO_PKG_VERSION"),
            std::env::consts::OS,
            std::process::id(),
            shared.run_id,
            cfg.port,
            uptime,
            uptime / 86400,
            std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_default(),
            cfg.file.as_ref().map(|p| p.display().to_string()).unwrap_or_default(),
        ));
    }
    if want("clients") {
        let clients = shared.clients.lock();
        let watching = clients
            .values()
            .filter(|c| c.watching.load(Ordering::Relaxed) > 0)
            .count();
        out.push_str(&format!(
            "# Clients\r\nconnected_clients:{}\r\nmaxclients:{}\r\nblocked_clients:{}\r\ntracking_clients:{}\r\nwatching_clients:{}\r\n\r\n",
            clients.len(),
            cfg.maxclients,
            shared.waiters.count(),
            shared.tracking.clients(),
            watching
        ));
    }
    let stats = store.db.stats();
    if want("memory") {
        let used = stats.live_bytes;
        let total = stats.zones * stats.zone_size;
        let rss = resident();
        let keys: u64 = (0..store.databases()).map(|d| store.dbsize(d) as u64).sum();
        let per_key = rss.anon.checked_div(keys).unwrap_or(0);
        let (scripts, script_bytes) = shared.scripts.cached();
        let (libraries, functions, library_bytes) = shared.functions.counts();
        out.push_str(&format!(
            "# Memory\r\nused_memory:{used}\r\nused_memory_human:{}\r\nused_memory_rss:{}\r\nused_memory_rss_human:{}\r\nmaxmemory:{total}\r\nmaxmemory_human:{}\r\nmaxmemory_policy:noeviction\r\nmem_not_counted_for_evict:0\r\nmem_allocator:mimalloc\r\nnacre_dram_bytes:{}\r\nnacre_dram_human:{}\r\nnacre_dram_bytes_per_key:{per_key}\r\nnacre_mapped_resident_bytes:{}\r\nused_memory_scripts_eval:{script_bytes}\r\nnumber_of_cached_scripts:{scripts}\r\nnumber_of_functions:{functions}\r\nnumber_of_libraries:{libraries}\r\nused_memory_functions:{library_bytes}\r\nused_memory_scripts:{}\r\nlazyfree_pending_objects:{}\r\nlazyfreed_objects:{}\r\n\r\n",
            human(used),
            rss.total,
            human(rss.total),
            human(total),
            rss.anon,
            human(rss.anon),
            rss.total.saturating_sub(rss.anon),
            script_bytes + library_bytes,
            store.gc_pending.load(Ordering::Relaxed),
            store.gc_objects.load(Ordering::Relaxed),
        ));
    }
    if want("persistence") {
        out.push_str(&format!(
            "# Persistence\r\nloading:{}\r\nasync_loading:0\r\nrdb_changes_since_last_save:0\r\nrdb_bgsave_in_progress:{}\r\nrdb_last_save_time:{}\r\nrdb_last_bgsave_status:{}\r\naof_enabled:0\r\naof_rewrite_in_progress:0\r\nnacre_durability:every acknowledged write\r\nnacre_last_start_clean:{}\r\nnacre_last_start_created:{}\r\nnacre_last_recovery_ms:{}\r\nnacre_last_key_count_ms:{}\r\n\r\n",
            u8::from(shared.repl.replica.loading()),
            u8::from(shared.saving.load(Ordering::Relaxed)),
            shared.lastsave.load(Ordering::Relaxed),
            if shared.last_save_ok.load(Ordering::Relaxed) { "ok" } else { "err" },
            u8::from(shared.start.clean),
            u8::from(shared.start.created),
            shared.start.recovery.as_millis(),
            shared.start.counting.as_millis(),
        ));
    }
    if want("stats") {
        let c = &shared.counters;
        out.push_str(&format!(
            "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\ntotal_net_input_bytes:{}\r\ntotal_net_output_bytes:{}\r\nrejected_connections:{}\r\nexpired_keys:{}\r\nevicted_keys:0\r\nkeyspace_hits:{}\r\nkeyspace_misses:{}\r\nmigrate_cached_sockets:{}\r\ntotal_error_replies:{}\r\ntracking_total_keys:{}\r\ntracking_total_items:{}\r\ntracking_total_prefixes:{}\r\nsync_full:{}\r\nsync_partial_ok:{}\r\nsync_partial_err:{}\r\ntotal_net_repl_output_bytes:{}\r\n\r\n",
            c.connections.load(Ordering::Relaxed),
            c.commands.load(Ordering::Relaxed),
            c.net_in.load(Ordering::Relaxed),
            c.net_out.load(Ordering::Relaxed),
            c.rejected.load(Ordering::Relaxed),
            store.expired_keys.load(Ordering::Relaxed),
            c.hits.load(Ordering::Relaxed),
            c.misses.load(Ordering::Relaxed),
            super::migrate::cached_sockets(),
            c.errors.load(Ordering::Relaxed),
            shared.tracking.keys(),
            shared.tracking.items(),
            shared.tracking.prefixes(),
            shared.repl.full_syncs.load(Ordering::Relaxed),
            shared.repl.partial_ok.load(Ordering::Relaxed),
            shared.repl.partial_err.load(Ordering::Relaxed),
            c.net_repl_out.load(Ordering::Relaxed),
        ));
    }
    if want("replication") {
        out.push_str(&crate::repl::info(shared));
    }
    if want("cpu") {
        let me = cpu_times("/proc/self/stat");
        let main = cpu_times("/proc/thread-self/stat");
        out.push_str(&format!(
            "# CPU\r\nused_cpu_sys:{:.6}\r\nused_cpu_user:{:.6}\r\nused_cpu_sys_children:{:.6}\r\nused_cpu_user_children:{:.6}\r\nused_cpu_sys_main_thread:{:.6}\r\nused_cpu_user_main_thread:{:.6}\r\n\r\n",
            me[1], me[0], me[3], me[2], main[1], main[0]
        ));
    }
    if want("errorstats") {
        out.push_str("# Errorstats\r\n");
        for (code, n) in shared.errorstats.lock().iter() {
            out.push_str(&format!("errorstat_{code}:count={n}\r\n"));
        }
        out.push_str("\r\n");
    }
    if want("commandstats") {
        out.push_str("# Commandstats\r\n");
        out.push_str(&shared.cmdstats.lines());
        out.push_str("\r\n");
    }
    if want("nacre") {
        let pm_total = stats.zones * stats.zone_size;
        let sum = |f: fn(&nacre::SubtableStats) -> u64| stats.subtables.iter().map(f).sum::<u64>();
        out.push_str(&format!(
            "# Nacre\r\nbackend:{}\r\nwrite_survives:{}\r\npm_total_bytes:{}\r\npm_used_bytes:{}\r\npm_free_bytes:{}\r\nzones:{}\r\nzones_free:{}\r\nzone_size:{}\r\ncommit_groups:{}\r\ncommits_queued:{}\r\ncommits_via_committer:{}\r\npm_bytes_written:{}\r\nuser_bytes_written:{}\r\ncleaner_zones_freed:{}\r\ncleaner_moved_bytes:{}\r\nstalls:{}\r\nstall_time_ms:{}\r\ndamaged_zones:{}\r\nold_version_records_deleted:{}\r\nsubtables:{}\r\nactive_memtables:{}\r\nimmutable_memtables:{}\r\nmemtable_bytes:{}\r\ngi_keys:{}\r\ngi_versions:{}\r\ngi_live_bytes:{}\r\nsnapshots:{}\r\nkey_counts_at_start:{}\r\nkey_counts_checked:{}\r\nindex_rebuilding:{}\r\n\r\n",
            shared.start.backend,
            shared.start.survives,
            pm_total,
            stats.live_bytes,
            stats.zones_free * stats.zone_size,
            stats.zones,
            stats.zones_free,
            stats.zone_size,
            stats.commit_groups,
            store.commits.last(),
            store.commits.via_committer(),
            stats.pm_bytes_written,
            stats.user_bytes_written,
            stats.cleaner_zones_freed,
            stats.cleaner_moved_bytes,
            stats.stalls,
            stats.stall_time.as_millis(),
            stats.damaged_zones,
            store.gc_records.load(Ordering::Relaxed),
            stats.subtables.len(),
            sum(|s| s.active_memtables),
            sum(|s| s.immutable_memtables),
            sum(|s| s.memtable_bytes),
            sum(|s| s.gi_keys),
            sum(|s| s.gi_versions),
            sum(|s| s.gi_live_bytes),
            stats.snapshots,
            shared.start.counts_source(),
            match store.counts_checked.load(Ordering::Acquire) {
                1 => "agreed",
                2 => "corrected",
                3 => "counted",
                _ => "no",
            },
            u8::from(stats.rebuilding),
        ));
        if let Some(d) = &stats.disk {
            // Replace the section's blank line: the disk figures belong to it.
            out.truncate(out.len() - 2);
            let levels: Vec<String> = d.level_tables.iter().map(u64::to_string).collect();
            out.push_str(&format!(
                "disk_level_tables:{}\r\ndisk_bytes:{}\r\ndisk_spills:{}\r\ndisk_spill_time_ms:{}\r\ndisk_spill_bytes_written:{}\r\ndisk_compactions:{}\r\ndisk_compaction_bytes_written:{}\r\ndisk_cache_hit_rate:{:.4}\r\n\r\n",
                levels.join(","),
                d.disk_bytes,
                d.spills,
                d.spill_time.as_millis(),
                d.spill_bytes_written,
                d.compactions,
                d.compaction_bytes_written,
                d.cache_hit_rate,
            ));
        }
        if let Some(pi) = &stats.persistent_index {
            // The same section: its blank line goes after these figures.
            out.truncate(out.len() - 2);
            out.push_str(&format!(
                "persistent_index_stale:{}\r\npersistent_index_long_versions:{}\r\n\r\n",
                u8::from(pi.stale),
                pi.long_versions,
            ));
        }
    }
    if want("keyspace") {
        out.push_str("# Keyspace\r\n");
        for db in 0..store.databases() {
            let n = store.dbsize(db);
            if n > 0 {
                out.push_str(&format!("db{db}:keys={n},expires=0,avg_ttl=0\r\n"));
            }
        }
        out.push_str("\r\n");
    }
    while out.ends_with("\r\n\r\n") {
        out.truncate(out.len() - 2);
    }
    out
}

fn human(b: u64) -> String {
    let f = b as f64;
    if f >= (1u64 << 30) as f64 {
        format!("{:.2}G", f / (1u64 << 30) as f64)
    } else if f >= (1u64 << 20) as f64 {
        format!("{:.2}M", f / (1u64 << 20) as f64)
    } else if f >= 1024.0 {
        format!("{:.2}K", f / 1024.0)
    } else {
        format!("{b}B")
    }
}

/// `INFO [section ...]`.
pub fn info(shared: &Shared, _: &mut Client, args: &[Vec<u8>]) -> Outcome {
    let sections: Vec<String> = args[1..].iter().map(|a| lower(a)).collect();
    reply(Reply::Bulk(info_text(shared, &sections).into_bytes()))
}

/// Runtime parameters `CONFIG GET` lists besides the file directives and the parameters
/// kept without effect (`crate::params`).
const RUNTIME: [&str; 2] = ["slowlog-log-slower-than", "slowlog-max-len"];

fn config_get(shared: &Shared, pat: &[u8]) -> Vec<(String, String)> {
    let cfg = shared.config.read();
    let mut out = Vec::new();
    let names = crate::config::DIRECTIVES
        .iter()
        .chain(RUNTIME.iter())
        .copied()
        .chain(crate::params::names());
    for name in names {
        if !glob_match(pat, name.as_bytes(), true) {
            continue;
        }
        let hidden = crate::params::find(name).is_some_and(|p| p.hidden);
        if hidden && !pat.eq_ignore_ascii_case(name.as_bytes()) {
            continue;
        }
        let v = match name {
            "slowlog-log-slower-than" => shared
                .slowlog_slower_than
                .load(Ordering::Relaxed)
                .to_string(),
            "slowlog-max-len" => shared.slowlog_max_len.load(Ordering::Relaxed).to_string(),
            n => cfg.get(n).unwrap_or_default(),
        };
        out.push((name.to_string(), v));
    }
    out
}

/// Points the access clock at `cfg`'s `maxmemory-policy`, `lfu-log-factor` and
/// `lfu-decay-time`.
pub fn configure_access_clock(shared: &Shared, cfg: &crate::config::Config) {
    let num = |name: &str, default: u32| {
        cfg.get(name)
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    shared.store.access.configure(
        &cfg.get("maxmemory-policy").unwrap_or_default(),
        num("lfu-log-factor", 10),
        num("lfu-decay-time", 1),
    );
}

/// `CONFIG GET|SET|RESETSTAT|REWRITE|HELP`.
pub fn config(shared: &Shared, _: &mut Client, args: &[Vec<u8>]) -> Outcome {
    match lower(&args[1]).as_str() {
        "get" if args.len() >= 3 => {
            let mut seen = std::collections::BTreeMap::new();
            for p in &args[2..] {
                for (k, v) in config_get(shared, p) {
                    seen.insert(k, v);
                }
            }
            reply(Reply::Map(
                seen.into_iter().map(|(k, v)| (bulk(k), bulk(v))).collect(),
            ))
        }
        "set" if args.len() >= 4 && args.len() % 2 == 0 => {
            let mut cfg = shared.config.read().clone();
            let mut named: Vec<&'static str> = Vec::new();
            for pair in args[2..].chunks(2) {
                let name = lower(&pair[0]);
                // As Redis: a parameter named twice (by either of its names) is refused.
                let canonical = crate::params::find(&name).map(|p| p.name);
                if let Some(c) = canonical {
                    if named.contains(&c) {
                        return reply(err(format!(
                            "CONFIG SET failed (possibly related to argument '{name}') - duplicate parameter"
                        )));
                    }
                    named.push(c);
                }
                let val = String::from_utf8_lossy(&pair[1]).into_owned();
                let r = match name.as_str() {
                    "slowlog-log-slower-than" => match int(&pair[1]) {
                        Ok(v) => {
                            shared.slowlog_slower_than.store(v, Ordering::Relaxed);
                            Ok(())
                        }
                        Err(_) => Err("argument couldn't be parsed into an integer".to_string()),
                    },
                    "slowlog-max-len" => match int(&pair[1]) {
                        Ok(v) if v >= 0 => {
                            shared.slowlog_max_len.store(v as usize, Ordering::Relaxed);
                            Ok(())
                        }
                        _ => Err("argument couldn't be parsed into an integer".to_string()),
                    },
                    // Where the server listens: the new sockets are bound once every
                    // parameter is read, before anything is committed (below).
                    "port" | "bind" => {
                        let words: Vec<String> = nacre_resp::split_args(&pair[1])
                            .unwrap_or_default()
                            .iter()
                            .map(|w| String::from_utf8_lossy(w).into_owned())
                            .collect();
                        cfg.set(&name, &words)
                    }
                    // Fixed at start (where the server stores); setting one to the value it
                    // has changes nothing and is accepted.
                    "dir" | "databases" | "pmem-size" | "pmem-backend" | "disk-dir"
                    | "gi-size-limit" | "persistent-index" | "logfile" | "io-threads" => {
                        if cfg.get(&name).as_deref() == Some(val.as_str()) {
                            Ok(())
                        } else {
                            Err("can't set immutable config".to_string())
                        }
                    }
                    n if crate::params::find(n).is_some_and(|p| !p.mutable) => {
                        Err("can't set immutable config".to_string())
                    }
                    n if crate::params::find(n).is_some_and(|p| p.protected)
                        && cfg.get("enable-protected-configs").as_deref() != Some("yes") =>
                    {
                        Err("can't set protected config".to_string())
                    }
                    "enable-debug-command" => Err("can't set protected config".to_string()),
                    n if crate::config::DIRECTIVES.contains(&n)
                        || crate::params::find(n).is_some() =>
                    {
                        let words = nacre_resp::split_args(&pair[1]).unwrap_or_default();
                        // Passwords and text parameters take the value whole.
                        let whole = name == "requirepass"
                            || crate::params::find(n)
                                .is_some_and(|p| matches!(p.kind, crate::params::Kind::Str));
                        let words: Vec<String> = if whole {
                            vec![val.clone()]
                        } else {
                            words
                                .iter()
                                .map(|w| String::from_utf8_lossy(w).into_owned())
                                .collect()
                        };
                        cfg.set(n, &words)
                    }
                    _ => Err("Unknown option or number of arguments for CONFIG SET".to_string()),
                };
                if let Err(why) = r {
                    return reply(err(format!(
                        "CONFIG SET failed (possibly related to argument '{name}') - {why}"
                    )));
                }
            }
            // As Redis: a port or address that cannot be bound fails the whole CONFIG SET,
            // and nothing of it is applied; the old listeners serve on.
            let rebind = {
                let now = shared.config.read();
                (now.port != cfg.port || now.bind != cfg.bind).then(|| now.port != cfg.port)
            };
            if let Some(port_changed) = rebind {
                let (name, why) = if port_changed {
                    ("port", "Unable to listen on this port")
                } else {
                    ("bind", "Failed to bind to specified addresses.")
                };
                let failed = |e: String| {
                    reply(err(format!(
                        "CONFIG SET failed (possibly related to argument '{name}') - {why}: {e}"
                    )))
                };
                let bound = match crate::listen::bind(Some(shared), &cfg.bind, cfg.port, false) {
                    Ok(b) => b,
                    Err((addr, e)) => return failed(format!("{addr}: {e}")),
                };
                if let Err(e) = crate::listen::install(&shared.handle(), bound) {
                    return failed(e.to_string());
                }
                tracing::info!(port = cfg.port, bind = ?cfg.bind, "listening anew (CONFIG SET)");
            }
            shared
                .notify
                .store(cfg.notify_keyspace_events, Ordering::Relaxed);
            shared
                .latency
                .threshold
                .store(cfg.latency_threshold_ms(), Ordering::Relaxed);
            // As Redis: requirepass is the default user's one password.
            if args[2..].chunks(2).any(|p| lower(&p[0]) == "requirepass") {
                shared.acl.set_default_password(cfg.requirepass.as_deref());
            }
            configure_access_clock(shared, &cfg);
            shared.repl.configure(&cfg);
            *shared.config.write() = cfg;
            super::tracking::enforce_limit(shared);
            reply(ok())
        }
        "resetstat" if args.len() == 2 => {
            shared.cmdstats.reset();
            shared.errorstats.lock().clear();
            let c = &shared.counters;
            for a in [
                &c.commands,
                &c.hits,
                &c.misses,
                &c.net_in,
                &c.net_out,
                &c.errors,
                &c.rejected,
                &c.connections,
            ] {
                a.store(0, Ordering::Relaxed);
            }
            shared.store.expired_keys.store(0, Ordering::Relaxed);
            shared.store.gc_objects.store(0, Ordering::Relaxed);
            reply(ok())
        }
        "rewrite" if args.len() == 2 => {
            let cfg = shared.config.read().clone();
            // As Redis: users go to the config file unless an ACL file holds them.
            let users: Vec<String> = if super::acl::aclfile(shared).is_some() {
                Vec::new()
            } else {
                shared
                    .acl
                    .all()
                    .iter()
                    .map(|u| format!("user {} {}", String::from_utf8_lossy(&u.name), u.describe()))
                    .collect()
            };
            match crate::config_rewrite::rewrite(&cfg, &users) {
                Ok(()) => reply(ok()),
                Err(e) => reply(err(e)),
            }
        }
        "help" => help(&[
            "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "GET <pattern>",
            "    Return parameters matching the glob-like <pattern> and their values.",
            "SET <directive> <value>",
            "    Set the configuration <directive> to <value>.",
            "RESETSTAT",
            "    Reset statistics reported by the INFO command.",
            "REWRITE",
            "    Rewrite the configuration file.",
            "HELP",
            "    Prints this help.",
        ]),
        s @ ("get" | "set" | "resetstat" | "rewrite") => reply(arity_error(&format!("config|{s}"))),
        _ => reply(unknown_subcommand(&args[1], "config")),
    }
}

/// `TIME`.
pub fn time(_: &Shared, _: &mut Client, _: &[Vec<u8>]) -> Outcome {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    reply(Reply::Array(vec![
        bulk(d.as_secs().to_string()),
        bulk(d.subsec_micros().to_string()),
    ]))
}

/// `LASTSAVE`.
pub fn lastsave(shared: &Shared, _: &mut Client, _: &[Vec<u8>]) -> Outcome {
    reply(Reply::Integer(
        shared.lastsave.load(Ordering::Relaxed) as i64
    ))
}

/// Writes a checkpoint now (on the calling thread).
pub fn checkpoint(shared: &Shared) -> Result<(), String> {
    let (dir, opts) = {
        let cfg = shared.config.read();
        (cfg.dir.clone(), cfg.engine_options(&cfg.dir, false))
    };
    let t = std::time::Instant::now();
    let r = crate::store::checkpoint::save(&shared.store, &dir, &opts);
    shared.saving.store(false, Ordering::Release);
    match r {
        Ok(s) => {
            shared.lastsave.store(now_ms() / 1000, Ordering::Relaxed);
            shared.last_save_ok.store(true, Ordering::Relaxed);
            tracing::info!(dir = %s.dir.display(), keys = s.keys, records = s.records, ms = t.elapsed().as_millis() as u64, "checkpoint saved");
            Ok(())
        }
        Err(e) => {
            shared.last_save_ok.store(false, Ordering::Relaxed);
            tracing::error!(error = %e, "checkpoint failed");
            Err(e.to_string())
        }
    }
}

/// `SAVE`.
pub fn save(shared: &Shared, _: &mut Client, _: &[Vec<u8>]) -> Outcome {
    if shared.saving.swap(true, Ordering::AcqRel) {
        return reply(err("Background save already in progress"));
    }
    let shared = shared.handle();
    Outcome::Blocking(Box::new(move || match checkpoint(&shared) {
        Ok(()) => ok(),
        Err(e) => err(e),
    }))
}

/// `BGSAVE [SCHEDULE]`, and Nacre's `BGSAVE RDB`: a Redis RDB file of a snapshot in `dir`,
/// named `dbfilename` (see `crate::transfer::export`).
pub fn bgsave(shared: &Shared, _: &mut Client, args: &[Vec<u8>]) -> Outcome {
    let rdb = args.len() == 2 && is(&args[1], "rdb");
    if args.len() > 2 || (args.len() == 2 && !rdb && !is(&args[1], "schedule")) {
        return reply(syntax());
    }
    if shared.saving.swap(true, Ordering::AcqRel) {
        return reply(err("Background save already in progress"));
    }
    let handle = shared.handle();
    std::thread::spawn(move || {
        let _ = if rdb {
            export_rdb(&handle)
        } else {
            checkpoint(&handle)
        };
    });
    reply(Reply::Simple("Background saving started".into()))
}

/// Writes an RDB file of a snapshot of the keyspace to `dir`/`dbfilename` (on the calling
/// thread; clients go on writing).
pub fn export_rdb(shared: &Shared) -> Result<(), String> {
    let path = {
        let cfg = shared.config.read();
        let name = crate::params::find("dbfilename")
            .map_or_else(|| "dump.rdb".to_string(), |p| cfg.params.get(p));
        cfg.dir.join(name)
    };
    let r = crate::transfer::export::export(&shared.store, &path, &mut |_, _| {});
    shared.saving.store(false, Ordering::Release);
    match r {
        Ok(s) => {
            shared.lastsave.store(now_ms() / 1000, Ordering::Relaxed);
            shared.last_save_ok.store(true, Ordering::Relaxed);
            tracing::info!(file = %path.display(), keys = s.keys(), bytes = s.bytes, ms = s.elapsed.as_millis() as u64, "RDB file written");
            Ok(())
        }
        Err(e) => {
            shared.last_save_ok.store(false, Ordering::Relaxed);
            tracing::error!(file = %path.display(), error = %e, "writing the RDB file failed");
            Err(e.to_string())
        }
    }
}

/// `SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]`.
pub fn shutdown(shared: &Shared, _: &mut Client, args: &[Vec<u8>]) -> Outcome {
    let mut save = false;
    for a in &args[1..] {
        match lower(a).as_str() {
            "save" => save = true,
            "nosave" | "now" | "force" => {}
            "abort" => return reply(err("No shutdown in progress.")),
            _ => return reply(syntax()),
        }
    }
    if save {
        if shared.saving.swap(true, Ordering::AcqRel) {
            return reply(err("Errors trying to SHUTDOWN. Check logs."));
        }
        if let Err(e) = checkpoint(shared) {
            tracing::error!(error = %e, "SHUTDOWN SAVE: the checkpoint failed, not shutting down");
            return reply(err("Errors trying to SHUTDOWN. Check logs."));
        }
    }
    Outcome::Shutdown
}

/// `DEBUG SLEEP|RELOAD|OBJECT|HELP`.
pub fn debug(shared: &Shared, client: &mut Client, args: &[Vec<u8>]) -> Outcome {
    if !shared
        .config
        .read()
        .enable_debug_command
        .allows(&client.info.addr)
    {
        return reply(debug_refused());
    }
    match lower(&args[1]).as_str() {
        "sleep" if args.len() == 3 => match float(&args[2]) {
            Ok(s) if s >= 0.0 => {
                let d = Duration::from_secs_f64(s.min(1e6));
                // As Redis, where DEBUG SLEEP blocks the whole server: a latency event.
                shared.latency.add("command", d.as_millis() as u64);
                Outcome::Delay(Some(d), ok())
            }
            _ => reply(err("value is not a valid float")),
        },
        "reload" => {
            // The engine needs no reload: every acknowledged write is already in the pool.
            // Like Redis, the reply comes once what was written is durable.
            reply_after_all(shared)
        }
        "object" if args.len() == 3 => {
            let mut txn = shared.store.txn(&[(client.db, &args[2])], now_ms());
            let r = debug_object(&mut txn, client.db, &args[2]);
            let t = txn.read_ticket();
            drop(txn);
            Outcome::Reply(r, t)
        }
        "help" => help(&[
            "DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "OBJECT <key>",
            "    Show low-level info about the key and associated value.",
            "RELOAD",
            "    Wait until every acknowledged write is durable (they always are).",
            "SLEEP <seconds>",
            "    Stop the server for <seconds>. Decimals allowed.",
            "HELP",
            "    Prints this help.",
        ]),
        _ => reply(unknown_subcommand(&args[1], "debug")),
    }
}

/// The key `DEBUG` reads, if any: `EXEC` locks it with the transaction's other keys and runs
/// [`debug_in_txn`] in its own transaction.
pub fn debug_keys(db: usize, args: &[Vec<u8>]) -> Vec<(usize, Vec<u8>)> {
    match args {
        [_, sub, key] if lower(sub) == "object" => vec![(db, key.clone())],
        _ => Vec::new(),
    }
}

/// Redis's refusal of `DEBUG` under `enable-debug-command no`.
fn debug_refused() -> Reply {
    err("DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.")
}

/// `DEBUG` queued in `MULTI`: `DEBUG OBJECT` reads through `EXEC`'s transaction (taking the
/// key's lock again would wait for itself); `None` for the other subcommands, which touch
/// no key.
pub fn debug_in_txn(
    shared: &Shared,
    client: &Client,
    txn: &mut Txn<'_>,
    args: &[Vec<u8>],
) -> Option<Reply> {
    let [_, sub, key] = args else { return None };
    if lower(sub) != "object" {
        return None;
    }
    let allowed = shared
        .config
        .read()
        .enable_debug_command
        .allows(&client.info.addr);
    Some(if allowed {
        debug_object(txn, client.db, key)
    } else {
        debug_refused()
    })
}

fn debug_object(txn: &mut Txn<'_>, db: usize, key: &[u8]) -> Reply {
    match txn.get(db, key) {
        Ok(Some(m)) => Reply::Simple(format!(
            "Value at:0x0 refcount:1 encoding:{} serializedlength:{} lru:0 lru_seconds_idle:0",
            super::keys::encoding_of(m),
            if m.kind.is_collection() {
                m.size as usize
            } else {
                m.payload.len()
            }
        )),
        Ok(None) => err("no such key"),
        Err(e) => e.into(),
    }
}

fn reply_after_all(shared: &Shared) -> Outcome {
    Outcome::Reply(ok(), Ticket(shared.store.commits.last()))
}

/// `MONITOR`.
pub fn monitor(shared: &Shared, client: &mut Client, _: &[Vec<u8>]) -> Outcome {
    if !client.info.monitor.swap(true, Ordering::AcqRel) {
        shared.monitors.fetch_add(1, Ordering::Relaxed);
    }
    Outcome::Monitor
}

/// `SLOWLOG GET [count]|LEN|RESET|HELP`.
pub fn slowlog(shared: &Shared, _: &mut Client, args: &[Vec<u8>]) -> Outcome {
    match lower(&args[1]).as_str() {
        "get" if args.len() <= 3 => {
            let count = match args.get(2).map(|a| int(a)) {
                None => 10,
                Some(Ok(-1)) => usize::MAX,
                Some(Ok(n)) if n >= 0 => n as usize,
                _ => return reply(err("count should be greater than or equal to -1")),
            };
            let log = shared.slowlog.lock();
            reply(Reply::Array(
                log.iter()
                    .take(count)
                    .map(|e| {
                        Reply::Array(vec![
                            Reply::Integer(e.id as i64),
                            Reply::Integer(e.at as i64),
                            Reply::Integer(e.micros as i64),
                            Reply::Array(e.args.iter().map(|a| Reply::Bulk(a.clone())).collect()),
                            bulk(e.addr.clone()),
                            bulk(e.name.clone()),
                        ])
                    })
                    .collect(),
            ))
        }
        "len" if args.len() == 2 => reply(Reply::Integer(shared.slowlog.lock().len() as i64)),
        "reset" if args.len() == 2 => {
            shared.slowlog.lock().clear();
            reply(ok())
        }
        "help" => help(&[
            "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "GET [<count>]",
            "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
            "    Entries are made of:",
            "    id, timestamp, time in microseconds, arguments array, client IP and port,",
            "    client name",
            "LEN",
            "    Return the length of the slowlog.",
            "RESET",
            "    Reset the slowlog.",
            "HELP",
            "    Prints this help.",
        ]),
        s @ ("get" | "len" | "reset") => reply(arity_error(&format!("slowlog|{s}"))),
        _ => reply(unknown_subcommand(&args[1], "slowlog")),
    }
}

/// The server commands.
#[rustfmt::skip]
pub(crate) static COMMANDS: &[Command] = &[
    cmd!("command", -1, [LOADING STALE], [SLOW CONNECTION], [], NK, "server", "2.8.13", "Returns detailed information about all commands.", Conn(command), &[
        sub!("count", 2, [LOADING STALE], [SLOW CONNECTION], (0, 0, 0)),
        sub!("info", -2, [LOADING STALE], [SLOW CONNECTION], (0, 0, 0)),
        sub!("docs", -2, [LOADING STALE], [SLOW CONNECTION], (0, 0, 0)),
        sub!("list", -2, [LOADING STALE], [SLOW CONNECTION], (0, 0, 0)),
        sub!("getkeysandflags", -4, [LOADING STALE], [SLOW CONNECTION], (0, 0, 0)),
        sub!("getkeys", -4, [LOADING STALE], [SLOW CONNECTION], (0, 0, 0)),
        sub!("help", 2, [LOADING STALE], [SLOW CONNECTION], (0, 0, 0)),
    ]),
    cmd!("info", -1, [LOADING STALE], [SLOW DANGEROUS], [COUNTS], NK, "server", "1.0.0", "Returns information and statistics about the server.", Conn(info)),
    cmd!("config", -2, [], [SLOW], [], NK, "server", "2.0.0", "A container for server configuration commands.", Conn(config), &[
        sub!("get", -3, [ADMIN NOSCRIPT LOADING STALE], [ADMIN SLOW DANGEROUS], (0, 0, 0)),
        sub!("set", -4, [ADMIN NOSCRIPT LOADING STALE], [ADMIN SLOW DANGEROUS], (0, 0, 0)),
        sub!("resetstat", 2, [ADMIN NOSCRIPT LOADING STALE], [ADMIN SLOW DANGEROUS], (0, 0, 0)),
        sub!("rewrite", 2, [ADMIN NOSCRIPT LOADING STALE], [ADMIN SLOW DANGEROUS], (0, 0, 0)),
        sub!("help", 2, [LOADING STALE], [SLOW], (0, 0, 0)),
    ]),
    cmd!("time", 1, [LOADING STALE FAST], [FAST], [], NK, "server", "2.6.0", "Returns the server time.", Conn(time)),
    cmd!("lastsave", 1, [LOADING STALE FAST], [ADMIN FAST DANGEROUS], [], NK, "server", "1.0.0", "Returns the Unix timestamp of the last successful save.", Conn(lastsave)),
    cmd!("save", 1, [ADMIN NOSCRIPT NO_ASYNC_LOADING NO_MULTI], [ADMIN SLOW DANGEROUS], [], NK, "server", "1.0.0", "Synchronously saves the database to a checkpoint.", Conn(save)),
    cmd!("bgsave", -1, [ADMIN NOSCRIPT NO_ASYNC_LOADING], [ADMIN SLOW DANGEROUS], [], NK, "server", "1.0.0", "Asynchronously saves the database to a checkpoint.", Conn(bgsave)),
    cmd!("shutdown", -1, [ADMIN NOSCRIPT LOADING STALE NO_MULTI ALLOW_BUSY], [ADMIN SLOW DANGEROUS], [], NK, "server", "1.0.0", "Closes the database and shuts down the server.", Conn(shutdown)),
    cmd!("debug", -2, [ADMIN NOSCRIPT LOADING STALE], [ADMIN SLOW DANGEROUS], [], NK, "server", "1.0.0", "A container for debugging commands.", Conn(debug)),
    cmd!("monitor", 1, [ADMIN NOSCRIPT LOADING STALE], [ADMIN SLOW DANGEROUS], [], NK, "server", "1.0.0", "Listens for all requests received by the server in real time.", Conn(monitor)),
    cmd!("slowlog", -2, [], [SLOW], [], NK, "server", "2.2.12", "A container for slow log commands.", Conn(slowlog), &[
        sub!("get", -2, [ADMIN LOADING STALE], [ADMIN SLOW DANGEROUS], (0, 0, 0)),
        sub!("len", 2, [ADMIN LOADING STALE], [ADMIN SLOW DANGEROUS], (0, 0, 0)),
        sub!("reset", 2, [ADMIN LOADING STALE], [ADMIN SLOW DANGEROUS], (0, 0, 0)),
        sub!("help", 2, [LOADING STALE], [SLOW], (0, 0, 0)),
    ]),
];
