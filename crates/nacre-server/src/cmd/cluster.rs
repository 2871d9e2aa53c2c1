//! `CLUSTER`, `ASKING`, `READONLY`, `READWRITE` on a server that is not part of a cluster:
//! each answers as a Redis 7.0 server started with `cluster-enabled no` answers, with
//! Redis's error, once its arity is right.

use super::registry::{cmd, sub, unknown_subcommand, Command, Keys::None as NK, Run::Conn};
use super::{err, Outcome};
use crate::client::Client;
use crate::shared::Shared;
use crate::store::txn::Ticket;

/// What every cluster command answers here.
const DISABLED: &str = "This instance has cluster support disabled";

fn disabled() -> Outcome {
    Outcome::Reply(err(DISABLED), Ticket(0))
}

/// `CLUSTER <subcommand>`: Redis's error for each known subcommand.
pub fn cluster(_: &Shared, _: &mut Client, args: &[Vec<u8>]) -> Outcome {
    match COMMANDS[0].sub(args) {
        Some(_) => disabled(),
        None => Outcome::Reply(unknown_subcommand(&args[1], "cluster"), Ticket(0)),
    }
}

/// `ASKING`, `READONLY`, `READWRITE`.
pub fn standalone(_: &Shared, _: &mut Client, _: &[Vec<u8>]) -> Outcome {
    disabled()
}

/// The cluster commands, as Redis 7.0 lists them.
#[rustfmt::skip]
pub(crate) static COMMANDS: &[Command] = &[
    cmd!("cluster", -2, [], [SLOW], [], NK, "cluster", "3.0.0", "A container for cluster commands", Conn(cluster), &[
        sub!("addslots", -3, [ADMIN STALE NO_ASYNC_LOADING], [ADMIN SLOW DANGEROUS], (0, 0, 0)),
        sub!("addslotsrange", -4, [ADMIN STALE NO_ASYNC_LOADING], [ADMIN SLOW DANGEROUS], (0, 0, 0)),
        sub!("bumpepoch", 2, [ADMIN STALE NO_ASYNC_LOADING], [ADMIN SLOW DANGEROUS], (0, 0, 0)),
        sub!("count-failure-reports", 3, [ADMIN STALE], [ADMIN SLOW DANGEROUS], (0, 0, 0)),
        sub!("countkeysinslot", 3, [STALE], [SLOW], (0, 0, 0)),
        sub!("delslots", -3, [ADMIN STALE NO_ASYNC_LOADING], [ADMIN SLOW DANGEROUS], (0, 0, 0)),
        sub!("delslotsrange", -4, [ADMIN STALE NO_ASYNC_LOADING], [ADMIN SLOW DANGEROUS], (0, 0, 0)),
        sub!("failover", -2, [ADMIN STALE NO_ASYNC_LOADING], [ADMIN SLOW DANGEROUS], (0, 0, 0)),
        sub!("flushslots", 2, [ADMIN STALE NO_ASYNC_LOADING], [ADMIN SLOW DANGEROUS], (0, 0, 0)),
        sub!("forget", 3, [ADMIN STALE NO_ASYNC_LOADING], [ADMIN SLOW DANGEROUS], (0, 0, 0)),
        sub!("getkeysinslot", 4, [STALE], [SLOW], (0, 0, 0)),
        sub!("help", 2, [LOADING STALE], [SLOW], (0, 0, 0)),
        sub!("info", 2, [STALE], [SLOW], (0, 0, 0)),
        sub!("keyslot", 3, [STALE], [SLOW], (0, 0, 0)),
        sub!("links", 2, [STALE], [SLOW], (0, 0, 0)),
        sub!("meet", -4, [ADMIN STALE NO_ASYNC_LOADING], [ADMIN SLOW DANGEROUS], (0, 0, 0)),
        sub!("myid", 2, [STALE], [SLOW], (0, 0, 0)),
        sub!("nodes", 2, [STALE], [SLOW], (0, 0, 0)),
        sub!("replicas", 3, [ADMIN STALE], [ADMIN SLOW DANGEROUS], (0, 0, 0)),
        sub!("replicate", 3, [ADMIN STALE NO_ASYNC_LOADING], [ADMIN SLOW DANGEROUS], (0, 0, 0)),
        sub!("reset", -2, [ADMIN NOSCRIPT STALE], [ADMIN SLOW DANGEROUS], (0, 0, 0)),
        sub!("saveconfig", 2, [ADMIN STALE NO_ASYNC_LOADING], [ADMIN SLOW DANGEROUS], (0, 0, 0)),
        sub!("set-config-epoch", 3, [ADMIN STALE NO_ASYNC_LOADING], [ADMIN SLOW DANGEROUS], (0, 0, 0)),
        sub!("setslot", -4, [ADMIN STALE NO_ASYNC_LOADING], [ADMIN SLOW DANGEROUS], (0, 0, 0)),
        sub!("shards", 2, [STALE], [SLOW], (0, 0, 0)),
        sub!("slaves", 3, [ADMIN STALE], [ADMIN SLOW DANGEROUS], (0, 0, 0)),
        sub!("slots", 2, [STALE], [SLOW], (0, 0, 0)),
    ]),
    cmd!("asking", 1, [FAST], [FAST CONNECTION], [], NK, "cluster", "3.0.0", "Sent by cluster clients after an -ASK redirect", Conn(standalone)),
    cmd!("readonly", 1, [LOADING STALE FAST], [FAST CONNECTION], [], NK, "cluster", "3.0.0", "Enables read queries for a connection to a cluster replica node", Conn(standalone)),
    cmd!("readwrite", 1, [LOADING STALE FAST], [FAST CONNECTION], [], NK, "cluster", "3.0.0", "Disables read queries for a connection to a cluster replica node", Conn(standalone)),
];
