//! The master side's commands of Redis's replication protocol: `PSYNC`, `SYNC`, `REPLCONF`,
//! `ROLE`, `WAIT` (the link itself is `repl::master`).

use nacre_resp::Reply;

use super::args::{int, lower};
use super::registry::{cmd, Command, Keys::None as NK, Run::Conn};
use super::{err, ok, syntax, Outcome};
use crate::client::Client;
use crate::repl::master::{decide, SyncStart};
use crate::shared::Shared;
use crate::store::txn::Ticket;

fn reply(r: Reply) -> Outcome {
    Outcome::Reply(r, Ticket(0))
}

/// `PSYNC replid offset`: the connection becomes an attached replica, continuing the stream
/// from `offset` when it can, else with a full synchronization.
pub fn psync(shared: &Shared, client: &mut Client, args: &[Vec<u8>]) -> Outcome {
    // `PSYNC replid offset FAILOVER`: a master hands its role to this replica, whose
    // replication id is its own (repl/failover.rs); this server promotes itself first.
    let failover = args.len() > 3 && args[3].eq_ignore_ascii_case(b"failover");
    if failover {
        tracing::warn!(
            "Failover request received for replid {}.",
            String::from_utf8_lossy(&args[1])
        );
        if !shared
            .store
            .replica
            .load(std::sync::atomic::Ordering::Acquire)
        {
            return reply(err("PSYNC FAILOVER can't be sent to a master."));
        }
        if args[1] != shared.repl.ids.lock().replid.as_bytes() {
            return reply(err("PSYNC FAILOVER replid must match my replid."));
        }
    }
    if shared.repl.failover.phase() != crate::repl::failover::Phase::None {
        return reply(Reply::Error(
            "NOMASTERLINK Can't SYNC while failing over".into(),
        ));
    }
    let offset = match super::args::parse_i64_strict(&args[2]) {
        Some(o) => o,
        None => return reply(err("value is not an integer or out of range")),
    };
    if failover {
        return Outcome::Replicate(Box::new(SyncStart {
            from: None,
            old_sync: false,
            port: client.repl_port,
            ip: client.repl_ip.clone(),
            promote_first: Some((args[1].clone(), offset)),
        }));
    }
    let from = decide(shared, &args[1], offset);
    if from.is_none() && args[1] != b"?" {
        shared
            .repl
            .partial_err
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    Outcome::Replicate(Box::new(SyncStart {
        from,
        old_sync: false,
        port: client.repl_port,
        ip: client.repl_ip.clone(),
        promote_first: None,
    }))
}

/// `SYNC`: the old full synchronization (no `+FULLRESYNC` line).
pub fn sync(_: &Shared, client: &mut Client, _: &[Vec<u8>]) -> Outcome {
    Outcome::Replicate(Box::new(SyncStart {
        from: None,
        old_sync: true,
        port: client.repl_port,
        ip: client.repl_ip.clone(),
        promote_first: None,
    }))
}

/// `REPLCONF option value [option value ...]`, as a master takes it from a replica about to
/// synchronize. `ACK` and `GETACK` get no reply (an attached replica's ACKs are read by its
/// link).
pub fn replconf(_: &Shared, client: &mut Client, args: &[Vec<u8>]) -> Outcome {
    if args.len() % 2 == 0 {
        return reply(syntax());
    }
    for pair in args[1..].chunks(2) {
        match lower(&pair[0]).as_str() {
            "listening-port" => match int(&pair[1]) {
                Ok(p) if (0..=65535).contains(&p) => client.repl_port = p as u16,
                Ok(_) => return reply(err("value is out of range")),
                Err(e) => return reply(e),
            },
            "ip-address" => client.repl_ip = Some(String::from_utf8_lossy(&pair[1]).into_owned()),
            "capa" | "rdb-only" | "rdb-filter-only" => {}
            "ack" | "getack" => return Outcome::Nothing,
            _ => {
                let mut m = b"Unrecognized REPLCONF option: ".to_vec();
                m.extend_from_slice(&pair[0]);
                return reply(super::err_bytes(&m));
            }
        }
    }
    reply(ok())
}

/// `ROLE`: a replica's link to its master, or a master's offset and its replicas (address,
/// port, acknowledged offset).
pub fn role(shared: &Shared, _: &mut Client, _: &[Vec<u8>]) -> Outcome {
    if let Some(r) = crate::repl::replica::role_reply(shared) {
        return reply(r);
    }
    let replicas = shared
        .repl
        .attached
        .lock()
        .values()
        .filter(|a| a.state == "online")
        .map(|a| {
            Reply::Array(vec![
                Reply::Bulk(a.ip.clone().into_bytes()),
                Reply::Bulk(a.port.to_string().into_bytes()),
                Reply::Bulk(a.ack.to_string().into_bytes()),
            ])
        })
        .collect();
    reply(Reply::Array(vec![
        Reply::Bulk(b"master".to_vec()),
        Reply::Integer(shared.store.repl.end() as i64),
        Reply::Array(replicas),
    ]))
}

/// `WAIT numreplicas timeout`: once this client's writes are in the stream, how many
/// replicas acknowledged them, waiting up to `timeout` ms (0: forever) for `numreplicas`.
pub fn wait(_: &Shared, _: &mut Client, args: &[Vec<u8>]) -> Outcome {
    let n = match int(&args[1]) {
        Ok(n) => n,
        Err(e) => return reply(e),
    };
    let t = match super::args::parse_i64_strict(&args[2]) {
        None => return reply(err("timeout is not an integer or out of range")),
        Some(t) if t < 0 => return reply(err("timeout is negative")),
        Some(t) => t,
    };
    Outcome::WaitReplicas(
        n,
        (t > 0).then(|| std::time::Duration::from_millis(t as u64)),
    )
}

/// `FAILOVER [TO host port [FORCE]] [ABORT] [TIMEOUT ms]` (`repl::failover`).
pub fn failover(shared: &Shared, _: &mut Client, args: &[Vec<u8>]) -> Outcome {
    let shared = shared.handle();
    if crate::repl::failover::is_abort(args) {
        return Outcome::Blocking(Box::new(move || {
            crate::repl::failover::abort_command(&shared)
        }));
    }
    reply(crate::repl::failover::command(&shared, args))
}

/// The replication commands of a master.
#[rustfmt::skip]
pub(crate) static COMMANDS: &[Command] = &[
    cmd!("psync", -3, [ADMIN NOSCRIPT NO_ASYNC_LOADING NO_MULTI], [ADMIN SLOW DANGEROUS], [], NK, "server", "2.8.0", "Internal command used for replication", Conn(psync)),
    cmd!("sync", 1, [ADMIN NOSCRIPT NO_ASYNC_LOADING NO_MULTI], [ADMIN SLOW DANGEROUS], [], NK, "server", "1.0.0", "Internal command used for replication", Conn(sync)),
    cmd!("replconf", -1, [ADMIN NOSCRIPT LOADING STALE ALLOW_BUSY], [ADMIN SLOW DANGEROUS], [], NK, "server", "3.0.0", "An internal command for configuring the replication stream", Conn(replconf)),
    cmd!("role", 1, [NOSCRIPT LOADING STALE FAST], [ADMIN FAST DANGEROUS], [], NK, "server", "2.8.12", "Returns the replication role.", Conn(role)),
    cmd!("failover", -1, [ADMIN NOSCRIPT STALE], [ADMIN SLOW DANGEROUS], [], NK, "server", "6.2.0", "Start a coordinated failover between this server and one of its replicas.", Conn(failover)),
    cmd!("wait", 3, [NOSCRIPT], [SLOW CONNECTION], [], NK, "generic", "3.0.0", "Blocks until the asynchronous replication of all preceding write commands sent by the connection is completed.", Conn(wait)),
];
