//! Transactions: MULTI EXEC DISCARD WATCH UNWATCH. `EXEC` runs every queued command in one
//! transaction over the union of their keys and the watched keys, and queues one batch: it
//! is atomic, isolated and one group commit.

use std::sync::atomic::Ordering;

use nacre_resp::Reply;

use super::registry::{cmd, Command, Keys::None as NK, Keys::Range as KR, Run::Conn};
use super::registry::{keys_of, lookup, Flags, Local, Run};
use super::{err, ok, run_key, Outcome};
use crate::client::{Client, WatchedKey};
use crate::shared::{now_ms, Shared};
use crate::store::txn::{Ticket, Txn};

fn reply(r: Reply) -> Outcome {
    Outcome::Reply(r, Ticket(0))
}

/// `MULTI`.
pub fn multi(_: &Shared, client: &mut Client, _: &[Vec<u8>]) -> Outcome {
    if client.multi.is_some() {
        return reply(err("MULTI calls can not be nested"));
    }
    client.multi = Some(Vec::new());
    client.multi_failed = false;
    client.info.multi.store(true, Ordering::Relaxed);
    reply(ok())
}

/// `DISCARD`.
pub fn discard(shared: &Shared, client: &mut Client, _: &[Vec<u8>]) -> Outcome {
    if client.multi.is_none() {
        return reply(err("DISCARD without MULTI"));
    }
    client.end_multi(shared);
    reply(ok())
}

/// `WATCH key [key ...]`.
pub fn watch(shared: &Shared, client: &mut Client, args: &[Vec<u8>]) -> Outcome {
    if client.multi.is_some() {
        return reply(err("WATCH inside MULTI is not allowed"));
    }
    for key in &args[1..] {
        if client
            .watched
            .iter()
            .any(|w| w.db == client.db && w.key == *key)
        {
            continue;
        }
        let mut txn = shared.store.txn(&[(client.db, key)], now_ms());
        let existed = match txn.get(client.db, key) {
            Ok(m) => m.is_some(),
            Err(e) => return reply(e.into()),
        };
        let epoch = txn.watch(client.db, key);
        drop(txn);
        client.watched.push(WatchedKey {
            db: client.db,
            key: key.clone(),
            epoch,
            existed,
        });
    }
    client
        .info
        .watching
        .store(client.watched.len(), Ordering::Relaxed);
    reply(ok())
}

/// `UNWATCH`.
pub fn unwatch(shared: &Shared, client: &mut Client, _: &[Vec<u8>]) -> Outcome {
    client.unwatch_all(shared);
    reply(ok())
}

/// `EXEC`.
pub fn exec(shared: &Shared, client: &mut Client, _: &[Vec<u8>]) -> Outcome {
    let Some(queue) = client.multi.take() else {
        return reply(err("EXEC without MULTI"));
    };
    if client.multi_failed {
        client.end_multi(shared);
        return reply(Reply::Error(
            "EXECABORT Transaction discarded because of previous errors.".into(),
        ));
    }
    // Every key the queued commands name (following SELECTs), and the watched ones.
    let mut db = client.db;
    let mut keys: Vec<(usize, Vec<u8>)> = Vec::new();
    let mut exclusive = false;
    let mut writes = false;
    let mut adds = false;
    let mut key_errors: Vec<Option<Reply>> = Vec::with_capacity(queue.len());
    for args in &queue {
        let Some(cmd) = lookup(&super::args::lower(&args[0])) else {
            key_errors.push(None);
            continue;
        };
        if cmd.name == "select" {
            if let Ok(d) = super::args::int(&args[1]) {
                if d >= 0 && (d as usize) < shared.store.databases() {
                    db = d as usize;
                }
            }
        }
        exclusive |= cmd.local.contains(Local::EXCLUSIVE)
            || (cmd.local.contains(Local::PATTERNS) && super::sort::uses_patterns(args));
        writes |= cmd.flags.contains(Flags::WRITE);
        adds |= cmd.flags.contains(Flags::DENYOOM);
        if cmd.name == "debug" {
            keys.extend(super::server::debug_keys(db, args));
        }
        match keys_of(cmd, db, args, shared.store.databases()) {
            Ok(k) => {
                keys.extend(k);
                key_errors.push(None);
            }
            Err(e) => key_errors.push(Some(e)),
        }
    }
    keys.extend(client.watched.iter().map(|w| (w.db, w.key.clone())));
    if adds && shared.store.commits.full() {
        client.end_multi(shared);
        return reply(super::exec_abort(crate::store::commits::OOM));
    }
    let refs: Vec<(usize, &[u8])> = keys.iter().map(|(d, k)| (*d, k.as_slice())).collect();
    let now = client.clock.now_ms();
    let mut txn = if exclusive {
        Txn::exclusive(&shared.store, &refs, now)
    } else {
        shared.store.txn(&refs, now)
    };
    if !adds {
        txn.mark_frees_space();
    }
    for w in &client.watched {
        let changed = txn.watch_epoch(w.db, &w.key) != Some(w.epoch);
        let expired = w.existed && txn.expired(w.db, &w.key).unwrap_or(true);
        if changed || expired {
            let t = txn.read_ticket();
            drop(txn);
            client.end_multi(shared);
            return Outcome::Reply(Reply::NilArray, t);
        }
    }
    let mut replies = Vec::with_capacity(queue.len());
    if shared.notify_flags() != 0 && shared.pubsub.anyone() {
        txn.record_events();
    }
    let mut events = Vec::new();
    let mut scripts = Vec::new();
    let mut deferred: Vec<(usize, Box<dyn FnOnce() -> Reply + Send>)> = Vec::new();
    for (args, kerr) in queue.iter().zip(key_errors) {
        let mark = txn.mark();
        if let Some(e) = kerr {
            replies.push(e);
            continue;
        }
        let Some(cmd) = lookup(&super::args::lower(&args[0])) else {
            replies.push(err("unknown command"));
            continue;
        };
        // As Redis: permissions are checked again as each command runs, in case they
        // changed since it was queued.
        if let Err(d) = super::acl::permit(shared, client, cmd, cmd.sub(args), args, "multi") {
            let reason = match d {
                crate::acl::Denied::Command => "no permission to execute the command or subcommand",
                crate::acl::Denied::Key(_) => "no permission to touch the specified keys",
                crate::acl::Denied::Channel(_) => {
                    "no permission to access one of the channels used as arguments"
                }
            };
            replies.push(Reply::Error(format!(
                "NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: {reason}"
            )));
            continue;
        }
        let in_txn = match cmd.name {
            "debug" => super::server::debug_in_txn(shared, client, &mut txn, args),
            "migrate" => Some(super::migrate::in_exec(&mut txn, client.db, args)),
            name if crate::script::is_eval(name) => {
                let (r, done) = crate::script::in_exec(shared, client, &mut txn, args);
                scripts.extend(done);
                Some(r)
            }
            _ => None,
        };
        let r = match (in_txn, cmd.run) {
            (Some(r), _) => r,
            (None, Run::Key(_)) => match run_key(cmd, &mut txn, client, shared, args, false) {
                // A blocking command with nothing to pop does not block in a transaction: it
                // answers as if its timeout had passed.
                Reply::Nil if cmd.flags.contains(Flags::BLOCKING) => Reply::NilArray,
                r => r,
            },
            (None, Run::Conn(f)) => match f(shared, client, args) {
                Outcome::Reply(r, _) | Outcome::Close(r) => r,
                Outcome::Many(mut rs) if rs.len() == 1 => rs.remove(0),
                Outcome::Delay(_, r) => r,
                // What must run on a blocking thread (REPLICAOF, SAVE) runs once the
                // transaction has committed, its reply in its place.
                Outcome::Blocking(f) => {
                    deferred.push((replies.len(), f));
                    Reply::Nil
                }
                Outcome::Many(rs) => Reply::Array(rs),
                Outcome::After(..) | Outcome::AfterCount(..) | Outcome::AfterRebuild(..) => {
                    err("the server is still counting keys or rebuilding its index after a restart; try again")
                }
                // As Redis: a transaction's commands cannot block or take over the client.
                Outcome::Monitor => err("MONITOR isn't allowed for DENY BLOCKING client"),
                // As Redis: WAIT in a transaction answers at once, with the replicas that
                // acknowledged the stream so far.
                Outcome::WaitReplicas(..) => {
                    Reply::Integer(shared.repl.acked_at_least(shared.store.repl.end()) as i64)
                }
                _ => ok(),
            },
        };
        replies.push(r);
        events.push(txn.take_raised(mark));
    }
    let exclusive = txn.is_exclusive();
    let changed = if exclusive {
        Vec::new()
    } else {
        super::tracking::changed(shared, &txn)
    };
    let ticket = txn.commit();
    if exclusive {
        // FLUSHDB, FLUSHALL or SWAPDB ran: every tracked key may have changed.
        super::tracking::flushed(shared, ticket.0);
    }
    super::tracking::invalidate(shared, &changed, client.info.id, ticket.0);
    for raised in events {
        crate::notify::publish(shared, raised, ticket.0);
    }
    for done in scripts {
        crate::script::release(shared, done, ticket, exclusive);
    }
    client.end_multi(shared);
    if writes {
        shared.waiters.serve(shared, &keys);
    }
    if !deferred.is_empty() {
        let store = shared.store.clone();
        return Outcome::Blocking(Box::new(move || {
            let mut replies = replies;
            if let Err(e) = store.commits.wait_blocking(&store, ticket.0) {
                return Reply::Error(e.reply());
            }
            for (i, f) in deferred {
                replies[i] = f();
            }
            Reply::Array(replies)
        }));
    }
    Outcome::Reply(Reply::Array(replies), ticket)
}

/// The flags of the commands queued in `client`'s transaction, together (what a pause
/// decides EXEC by).
pub fn queued_flags(client: &Client) -> Flags {
    let mut f = Flags::empty();
    for args in client.multi.iter().flatten() {
        if let Some(c) = lookup(&super::args::lower(&args[0])) {
            f |= c.sub(args).map_or(c.flags, |s| s.flags);
        }
    }
    f
}

/// The flags of each command an `EXEC` would run (none for any other command): EXEC is
/// refused for what it queued.
pub(crate) fn queued_flags_each(client: &Client, cmd: &Command) -> Vec<Flags> {
    if cmd.name != "exec" {
        return Vec::new();
    }
    client
        .multi
        .iter()
        .flatten()
        .filter_map(|a| {
            let c = lookup(&super::args::lower(&a[0]))?;
            Some(c.sub(a).map_or(c.flags, |s| s.flags))
        })
        .collect()
}

/// The transaction commands.
#[rustfmt::skip]
pub(crate) static COMMANDS: &[Command] = &[
    cmd!("multi", 1, [NOSCRIPT LOADING STALE FAST ALLOW_BUSY], [FAST TRANSACTION], [], NK, "transactions", "1.2.0", "Starts a transaction.", Conn(multi)),
    cmd!("exec", 1, [NOSCRIPT LOADING STALE SKIP_SLOWLOG], [SLOW TRANSACTION], [], NK, "transactions", "1.2.0", "Executes all commands in a transaction.", Conn(exec)),
    cmd!("discard", 1, [NOSCRIPT LOADING STALE FAST ALLOW_BUSY], [FAST TRANSACTION], [], NK, "transactions", "2.0.0", "Discards a transaction.", Conn(discard)),
    cmd!("watch", -2, [NOSCRIPT LOADING STALE FAST ALLOW_BUSY], [FAST TRANSACTION], [], KR(1, -1, 1), "transactions", "2.2.0", "Monitors changes to keys to determine the execution of a transaction.", Conn(watch)),
    cmd!("unwatch", 1, [NOSCRIPT LOADING STALE FAST ALLOW_BUSY], [FAST TRANSACTION], [], NK, "transactions", "2.2.0", "Forgets about watched keys of a transaction.", Conn(unwatch)),
];
