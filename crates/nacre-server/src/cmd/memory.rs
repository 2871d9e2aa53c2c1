//! `MEMORY USAGE STATS DOCTOR MALLOC-STATS PURGE HELP`. Values live in the pool, so a key's
//! usage counts its records there (its metadata record and, for a collection, its member
//! records, sampled as Redis samples them) and the index entries that find them.

use nacre_resp::Reply;

use super::args::{int, is, lower};
use super::registry::{cmd, sub, Command, Keys, Run::Key};
use super::{syntax, CmdResult, Ctx};
use crate::store::encoding;

/// Bytes an index entry costs beside its record (node share, pointer, header), as counted
/// for `MEMORY USAGE`.
const ENTRY_OVERHEAD: u64 = 48;

/// Elements sampled by default (Redis's `SAMPLES 5`).
const DEFAULT_SAMPLES: u64 = 5;

/// `MEMORY` names a key only in `USAGE`.
fn memory_keys(db: usize, args: &[Vec<u8>], _: usize) -> Result<Vec<(usize, Vec<u8>)>, Reply> {
    Ok(match args.get(1) {
        Some(s) if is(s, "usage") && args.len() >= 3 => vec![(db, args[2].clone())],
        _ => Vec::new(),
    })
}

fn usage(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let key = &args[2];
    let samples = match &args[3..] {
        [] => DEFAULT_SAMPLES,
        [s, n] if is(s, "samples") => match int(n)? {
            n if n < 0 => return Err(syntax()),
            n => n as u64,
        },
        _ => return Err(syntax()),
    };
    let Some(m) = ctx.txn.get(ctx.db, key)?.cloned() else {
        return Ok(Reply::Nil);
    };
    let own = key.len() as u64 + m.encode().len() as u64 + ENTRY_OVERHEAD;
    if !m.kind.is_collection() || m.size == 0 {
        return Ok(Reply::Integer(own as i64));
    }
    // Members: the average of the first `samples` (all of them for `SAMPLES 0`) times
    // their number, as Redis estimates a collection.
    // Every record of the version, as `Txn::all_records` bounds them, until enough are seen.
    let lower = encoding::sub_prefix(m.version).to_vec();
    let upper = encoding::sub_prefix(m.version.saturating_add(1)).to_vec();
    let (mut seen, mut bytes) = (0u64, 0u64);
    ctx.txn.sub_scan(ctx.db, key, lower, upper, false, |k, v| {
        seen += 1;
        bytes += (k.len() + v.len()) as u64 + ENTRY_OVERHEAD;
        Ok(samples == 0 || seen < samples)
    })?;
    let members = match seen {
        0 => 0,
        n => bytes / n * m.size,
    };
    Ok(Reply::Integer((own + members) as i64))
}

/// `MEMORY subcommand ...`.
pub fn memory(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    match lower(&args[1]).as_str() {
        "usage" => usage(ctx, args),
        "stats" => {
            let s = ctx.shared.store.db.stats();
            let keys: u64 = (0..ctx.shared.store.databases())
                .map(|d| ctx.shared.store.dbsize(d) as u64)
                .sum();
            let bulk = |s: &str| Reply::Bulk(s.as_bytes().to_vec());
            let total = s.zones * s.zone_size;
            Ok(Reply::Map(vec![
                (bulk("peak.allocated"), Reply::Integer(total as i64)),
                (bulk("total.allocated"), Reply::Integer(s.live_bytes as i64)),
                (bulk("keys.count"), Reply::Integer(keys as i64)),
                (
                    bulk("keys.bytes-per-key"),
                    Reply::Integer(s.live_bytes.checked_div(keys).unwrap_or(0) as i64),
                ),
                (bulk("dataset.bytes"), Reply::Integer(s.live_bytes as i64)),
                (bulk("nacre.pool.bytes"), Reply::Integer(total as i64)),
                (bulk("nacre.pool.free-zones"), Reply::Integer(s.zones_free as i64)),
            ]))
        }
        "doctor" => Ok(Reply::Verbatim {
            format: "txt".into(),
            text: b"Hi Sam, I can't find any memory issue in your instance. I can only account for what occurs on this base.".to_vec(),
        }),
        "malloc-stats" => Ok(Reply::Verbatim {
            format: "txt".into(),
            text: b"Stats not supported for the current allocator".to_vec(),
        }),
        "purge" => Ok(Reply::Simple("OK".into())),
        "help" => Ok(crate::cmd::help_lines(&[
                "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "DOCTOR",
                "    Return memory problems reports.",
                "MALLOC-STATS",
                "    Return internal statistics report from the memory allocator.",
                "PURGE",
                "    Attempt to purge dirty pages for reclamation by the allocator.",
                "STATS",
                "    Return information about the memory usage of the server.",
                "USAGE <key> [SAMPLES <count>]",
                "    Return memory in bytes used by <key> and its value. Nested values are",
                "    sampled up to <count> times (default: 5, 0 means sample all).",
                "HELP",
                "    Prints this help.",
        ])),
        _ => Err(super::registry::unknown_subcommand(&args[1], "memory")),
    }
}

/// The memory commands.
#[rustfmt::skip]
pub(crate) static COMMANDS: &[Command] = &[
    cmd!("memory", -2, [], [SLOW], [NO_TOUCH], Keys::Custom(memory_keys, 0, 0, 0), "server", "4.0.0", "A container for memory diagnostics commands.", Key(memory), &[
        sub!("usage", -3, [READONLY], [READ SLOW], (2, 2, 1)),
        sub!("stats", 2, [], [SLOW], (0, 0, 0)),
        sub!("doctor", 2, [], [SLOW], (0, 0, 0)),
        sub!("malloc-stats", 2, [], [SLOW], (0, 0, 0)),
        sub!("purge", 2, [], [SLOW], (0, 0, 0)),
        sub!("help", 2, [LOADING STALE], [SLOW], (0, 0, 0)),
    ]),
];
