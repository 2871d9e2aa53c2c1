//! `REPLICAOF host port`, `REPLICAOF NO ONE` and their old name `SLAVEOF`: the replica side
//! itself is `repl::replica`.

use super::registry::{cmd, Command, Keys::None as NK, Run::Conn};
use super::{err, Outcome};
use crate::client::Client;
use crate::shared::Shared;
use crate::store::txn::Ticket;

/// `REPLICAOF host port | NO ONE`, as Redis's `replicaofCommand` answers it. It waits for
/// the link before it to stop, off the runtime's workers.
fn replicaof(shared: &Shared, _: &mut Client, args: &[Vec<u8>]) -> Outcome {
    if shared.repl.failover.phase() != crate::repl::failover::Phase::None {
        return Outcome::Reply(err("REPLICAOF not allowed while failing over."), Ticket(0));
    }
    let target = if args[1].eq_ignore_ascii_case(b"no") && args[2].eq_ignore_ascii_case(b"one") {
        None
    } else {
        match super::args::int(&args[2]) {
            Ok(p) if (0..=65535).contains(&p) => {
                Some((String::from_utf8_lossy(&args[1]).into_owned(), p as u16))
            }
            _ => return Outcome::Reply(err("Invalid master port"), Ticket(0)),
        }
    };
    let shared = shared.handle();
    Outcome::Blocking(Box::new(move || {
        crate::repl::replica::replicaof(&shared, target)
    }))
}

/// The commands.
#[rustfmt::skip]
pub(crate) static COMMANDS: &[Command] = &[
    cmd!("replicaof", 3, [NO_ASYNC_LOADING ADMIN NOSCRIPT STALE], [ADMIN SLOW DANGEROUS], [], NK, "server", "5.0.0", "Make the server a replica of another instance, or promote it as master.", Conn(replicaof)),
    cmd!("slaveof", 3, [NO_ASYNC_LOADING ADMIN NOSCRIPT STALE], [ADMIN SLOW DANGEROUS], [], NK, "server", "1.0.0", "Make the server a replica of another instance, or promote it as master.", Conn(replicaof)),
];
