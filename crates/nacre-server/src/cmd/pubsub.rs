//! Pub/sub commands: SUBSCRIBE UNSUBSCRIBE PSUBSCRIBE PUNSUBSCRIBE PUBLISH PUBSUB. A
//! subscription confirmation is a push (RESP3) or an array (RESP2), one per channel.

use std::sync::atomic::Ordering;

use nacre_resp::Reply;

use super::args::lower;
use super::registry::unknown_subcommand;
use super::registry::{cmd, sub, Command, Keys::None as NK, Run::Conn};
use super::Outcome;
use crate::client::Client;
use crate::shared::Shared;
use crate::store::txn::Ticket;

fn confirm(kind: &str, name: Option<&[u8]>, count: usize) -> Reply {
    Reply::Push(vec![
        Reply::Bulk(kind.as_bytes().to_vec()),
        name.map_or(Reply::Nil, |n| Reply::Bulk(n.to_vec())),
        Reply::Integer(count as i64),
    ])
}

fn sync_counts(client: &Client) {
    client.info.subs.store(client.subs.len(), Ordering::Relaxed);
    client
        .info
        .psubs
        .store(client.psubs.len(), Ordering::Relaxed);
}

fn subscribe_generic(
    shared: &Shared,
    client: &mut Client,
    args: &[Vec<u8>],
    pattern: bool,
) -> Outcome {
    let sub = client.push_queue();
    let mut out = Vec::with_capacity(args.len() - 1);
    for name in &args[1..] {
        let set = if pattern {
            &mut client.psubs
        } else {
            &mut client.subs
        };
        if set.insert(name.clone()) {
            shared
                .pubsub
                .subscribe(pattern, name, client.info.id, sub.clone());
        }
        out.push(confirm(
            if pattern { "psubscribe" } else { "subscribe" },
            Some(name),
            client.subscriptions(),
        ));
    }
    sync_counts(client);
    Outcome::Many(out)
}

fn unsubscribe_generic(
    shared: &Shared,
    client: &mut Client,
    args: &[Vec<u8>],
    pattern: bool,
) -> Outcome {
    let kind = if pattern {
        "punsubscribe"
    } else {
        "unsubscribe"
    };
    let names: Vec<Vec<u8>> = if args.len() > 1 {
        args[1..].to_vec()
    } else if pattern {
        client.psubs.iter().cloned().collect()
    } else {
        client.subs.iter().cloned().collect()
    };
    if names.is_empty() {
        return Outcome::Many(vec![confirm(kind, None, client.subscriptions())]);
    }
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let set = if pattern {
            &mut client.psubs
        } else {
            &mut client.subs
        };
        if set.remove(&name) {
            shared.pubsub.unsubscribe(pattern, &name, client.info.id);
        }
        out.push(confirm(kind, Some(&name), client.subscriptions()));
    }
    sync_counts(client);
    Outcome::Many(out)
}

/// `SUBSCRIBE channel...`.
pub fn subscribe(shared: &Shared, client: &mut Client, args: &[Vec<u8>]) -> Outcome {
    subscribe_generic(shared, client, args, false)
}

/// `PSUBSCRIBE pattern...`.
pub fn psubscribe(shared: &Shared, client: &mut Client, args: &[Vec<u8>]) -> Outcome {
    subscribe_generic(shared, client, args, true)
}

/// `UNSUBSCRIBE [channel...]`.
pub fn unsubscribe(shared: &Shared, client: &mut Client, args: &[Vec<u8>]) -> Outcome {
    unsubscribe_generic(shared, client, args, false)
}

/// `PUNSUBSCRIBE [pattern...]`.
pub fn punsubscribe(shared: &Shared, client: &mut Client, args: &[Vec<u8>]) -> Outcome {
    unsubscribe_generic(shared, client, args, true)
}

/// `PUBLISH channel message`: the number of clients that received it.
pub fn publish(shared: &Shared, _: &mut Client, args: &[Vec<u8>]) -> Outcome {
    Outcome::Reply(
        Reply::Integer(shared.pubsub.publish(&args[1], &args[2], 0)),
        Ticket(0),
    )
}

/// `PUBSUB CHANNELS|NUMSUB|NUMPAT|SHARDCHANNELS|SHARDNUMSUB|HELP`.
pub fn pubsub(shared: &Shared, _: &mut Client, args: &[Vec<u8>]) -> Outcome {
    let sub = lower(&args[1]);
    let n = args.len();
    let r = match sub.as_str() {
        "help" if n == 2 => Reply::Array(
            [
                "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "CHANNELS [<pattern>]",
                "    Return the currently active channels matching a <pattern> (default: '*').",
                "NUMPAT",
                "    Return number of subscriptions to patterns.",
                "NUMSUB [<channel> ...]",
                "    Return the number of subscribers for the specified channels, excluding",
                "    pattern subscriptions(default: no channels).",
                "SHARDCHANNELS [<pattern>]",
                "    Return the currently active shard level channels matching a <pattern> (default: '*').",
                "SHARDNUMSUB [<shardchannel> ...]",
                "    Return the number of subscribers for the specified shard level channel(s)",
                "HELP",
                "    Prints this help.",
            ]
            .iter()
            .map(|s| Reply::Simple(s.to_string()))
            .collect(),
        ),
        "channels" if n <= 3 => {
            let mut chans = shared.pubsub.channels(args.get(2).map(Vec::as_slice));
            chans.sort();
            Reply::Array(chans.into_iter().map(Reply::Bulk).collect())
        }
        "numsub" => Reply::Array(
            args[2..]
                .iter()
                .flat_map(|c| [Reply::Bulk(c.clone()), Reply::Integer(shared.pubsub.numsub(c))])
                .collect(),
        ),
        "numpat" if n == 2 => Reply::Integer(shared.pubsub.numpat()),
        // Shard channels (SSUBSCRIBE) are not offered: none are ever active.
        "shardchannels" if n <= 3 => Reply::Array(vec![]),
        "shardnumsub" => Reply::Array(
            args[2..]
                .iter()
                .flat_map(|c| [Reply::Bulk(c.clone()), Reply::Integer(0)])
                .collect(),
        ),
        "channels" | "numpat" | "shardchannels" | "help" => {
            Reply::Error(format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try PUBSUB HELP.",
                String::from_utf8_lossy(&args[1])
            ))
        }
        _ => unknown_subcommand(&args[1], "pubsub"),
    };
    Outcome::Reply(r, Ticket(0))
}

/// A message as the subscriber's protocol shows it.
pub fn message_reply(m: &crate::pubsub::Message) -> Reply {
    if let Some(r) = &m.push {
        return r.clone();
    }
    let mut v = Vec::with_capacity(4);
    match &m.pattern {
        Some(p) => {
            v.push(Reply::Bulk(b"pmessage".to_vec()));
            v.push(Reply::Bulk(p.clone()));
        }
        None => v.push(Reply::Bulk(b"message".to_vec())),
    }
    v.push(Reply::Bulk(m.channel.clone()));
    v.push(Reply::Bulk(m.payload.clone()));
    Reply::Push(v)
}

/// Whether a RESP2 client in subscribed mode may run `name`.
pub fn allowed_when_subscribed(name: &str) -> bool {
    matches!(
        name,
        "subscribe"
            | "psubscribe"
            | "ssubscribe"
            | "unsubscribe"
            | "punsubscribe"
            | "sunsubscribe"
            | "ping"
            | "quit"
            | "reset"
    )
}

/// The Pub/Sub commands.
#[rustfmt::skip]
pub(crate) static COMMANDS: &[Command] = &[
    cmd!("subscribe", -2, [PUBSUB NOSCRIPT LOADING STALE], [PUBSUB SLOW], [], NK, "pubsub", "2.0.0", "Listens for messages published to channels.", Conn(subscribe)),
    cmd!("unsubscribe", -1, [PUBSUB NOSCRIPT LOADING STALE], [PUBSUB SLOW], [], NK, "pubsub", "2.0.0", "Stops listening to messages posted to channels.", Conn(unsubscribe)),
    cmd!("psubscribe", -2, [PUBSUB NOSCRIPT LOADING STALE], [PUBSUB SLOW], [], NK, "pubsub", "2.0.0", "Listens for messages published to channels that match one or more patterns.", Conn(psubscribe)),
    cmd!("punsubscribe", -1, [PUBSUB NOSCRIPT LOADING STALE], [PUBSUB SLOW], [], NK, "pubsub", "2.0.0", "Stops listening to messages published to channels that match one or more patterns.", Conn(punsubscribe)),
    cmd!("publish", 3, [PUBSUB LOADING STALE FAST], [PUBSUB FAST], [], NK, "pubsub", "2.0.0", "Posts a message to a channel.", Conn(publish)),
    cmd!("pubsub", -2, [], [SLOW], [], NK, "pubsub", "2.8.0", "A container for Pub/Sub commands.", Conn(pubsub), &[
        sub!("help", 2, [LOADING STALE], [SLOW], (0, 0, 0)),
        sub!("channels", -2, [PUBSUB LOADING STALE], [PUBSUB SLOW], (0, 0, 0)),
        sub!("numsub", -2, [PUBSUB LOADING STALE], [PUBSUB SLOW], (0, 0, 0)),
        sub!("numpat", 2, [PUBSUB LOADING STALE], [PUBSUB SLOW], (0, 0, 0)),
        sub!("shardchannels", -2, [PUBSUB LOADING STALE], [PUBSUB SLOW], (0, 0, 0)),
        sub!("shardnumsub", -2, [PUBSUB LOADING STALE], [PUBSUB SLOW], (0, 0, 0)),
    ]),
];
