//! `CLIENT TRACKING|CACHING|GETREDIR|TRACKINGINFO` and where commands meet the tracking table
//! (`crate::tracking`): reads remember keys, writes and flushes invalidate them.

use nacre_resp::Reply;

use super::args::is;
use super::registry::{Command, Flags};
use super::{err, err_bytes, ok, syntax};
use crate::client::Client;
use crate::shared::Shared;
use crate::store::txn::Txn;
use crate::tracking::Tracked;

/// `CLIENT TRACKING on|off [REDIRECT id] [PREFIX p]... [BCAST] [OPTIN] [OPTOUT] [NOLOOP]`.
pub fn tracking(shared: &Shared, client: &mut Client, args: &[Vec<u8>]) -> Reply {
    let mut redirect: i64 = 0;
    let (mut bcast, mut optin, mut optout, mut noloop) = (false, false, false, false);
    let mut prefixes: Vec<Vec<u8>> = Vec::new();
    let mut j = 3;
    while j < args.len() {
        let more = j + 1 < args.len();
        let a = &args[j];
        if is(a, "redirect") && more {
            j += 1;
            if redirect != 0 {
                return err("A client can only redirect to a single other client");
            }
            redirect = match crate::num::parse_i64_strict(&args[j]) {
                Some(v) => v,
                None => return err("value is not an integer or out of range"),
            };
            let exists =
                u64::try_from(redirect).is_ok_and(|id| shared.clients.lock().contains_key(&id));
            if !exists {
                return err("The client ID you want redirect to does not exist");
            }
        } else if is(a, "bcast") {
            bcast = true;
        } else if is(a, "optin") {
            optin = true;
        } else if is(a, "optout") {
            optout = true;
        } else if is(a, "noloop") {
            noloop = true;
        } else if is(a, "prefix") && more {
            j += 1;
            prefixes.push(args[j].clone());
        } else {
            return syntax();
        }
        j += 1;
    }
    let id = client.info.id;
    let old = shared.tracking.get(id);
    if is(&args[2], "off") {
        shared.tracking.disable(id);
        client.tracking_caching = false;
        return ok();
    }
    if !is(&args[2], "on") {
        return syntax();
    }
    if !bcast && !prefixes.is_empty() {
        return err("PREFIX option requires BCAST mode to be enabled");
    }
    if old.as_ref().is_some_and(|o| o.bcast != bcast) {
        return err("You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.");
    }
    if bcast && (optin || optout) {
        return err("OPTIN and OPTOUT are not compatible with BCAST");
    }
    if optin && optout {
        return err("You can't specify both OPTIN mode and OPTOUT mode");
    }
    if old
        .as_ref()
        .is_some_and(|o| (optin && o.optout) || (optout && o.optin))
    {
        return err("You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.");
    }
    let existing = old.as_ref().map(|o| o.prefixes.clone()).unwrap_or_default();
    if bcast {
        for (i, p) in prefixes.iter().enumerate() {
            let overlaps = |a: &[u8], b: &[u8]| a.starts_with(b) || b.starts_with(a);
            if let Some(e) = existing.iter().find(|e| overlaps(p, e)) {
                return err_bytes(
                    &[
                        b"Prefix '".as_slice(),
                        p,
                        b"' overlaps with an existing prefix '",
                        e,
                        b"'. Prefixes for a single client must not overlap.",
                    ]
                    .concat(),
                );
            }
            if let Some(o) = prefixes[i + 1..].iter().find(|o| overlaps(p, o)) {
                return err_bytes(
                    &[
                        b"Prefix '".as_slice(),
                        p,
                        b"' overlaps with another provided prefix '",
                        o,
                        b"'. Prefixes for a single client must not overlap.",
                    ]
                    .concat(),
                );
            }
        }
    }
    let own = client.push_queue();
    let redirect = redirect as u64;
    let sink = if redirect != 0 {
        let target = shared.clients.lock().get(&redirect).cloned();
        match target.and_then(|t| shared.pubsub_queue(&t)) {
            Some(q) => q,
            None => own.clone(),
        }
    } else {
        own.clone()
    };
    let mut all = existing;
    if bcast {
        // No prefix is the empty prefix (every key), as Redis lists it; prefixes add to
        // those given before.
        if prefixes.is_empty() && all.is_empty() {
            all.push(Vec::new());
        }
        for p in prefixes {
            if !all.contains(&p) {
                all.push(p);
            }
        }
    }
    shared.tracking.enable(
        id,
        Tracked {
            sink,
            own,
            redirect,
            resp: client.resp,
            bcast,
            optin,
            optout,
            noloop,
            prefixes: all,
        },
    );
    ok()
}

/// `CLIENT CACHING yes|no`.
pub fn caching(shared: &Shared, client: &mut Client, args: &[Vec<u8>]) -> Reply {
    let Some(t) = shared
        .tracking
        .get(client.info.id)
        .filter(|t| t.optin || t.optout)
    else {
        return err("CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled");
    };
    if is(&args[2], "yes") {
        if !t.optin {
            return err("CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.");
        }
    } else if is(&args[2], "no") {
        if !t.optout {
            return err("CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.");
        }
    } else {
        return syntax();
    }
    client.tracking_caching = true;
    ok()
}

/// `CLIENT GETREDIR`.
pub fn getredir(shared: &Shared, client: &Client) -> Reply {
    Reply::Integer(
        shared
            .tracking
            .get(client.info.id)
            .map_or(-1, |t| t.redirect as i64),
    )
}

/// `CLIENT TRACKINGINFO`.
pub fn trackinginfo(shared: &Shared, client: &Client) -> Reply {
    let b = |s: &str| Reply::Bulk(s.as_bytes().to_vec());
    let t = shared.tracking.get(client.info.id);
    let mut flags = vec![b(if t.is_some() { "on" } else { "off" })];
    if let Some(t) = &t {
        if t.bcast {
            flags.push(b("bcast"));
        }
        if t.optin {
            flags.push(b("optin"));
            if client.tracking_caching {
                flags.push(b("caching-yes"));
            }
        }
        if t.optout {
            flags.push(b("optout"));
            if client.tracking_caching {
                flags.push(b("caching-no"));
            }
        }
        if t.noloop {
            flags.push(b("noloop"));
        }
        if t.redirect != 0 && !shared.clients.lock().contains_key(&t.redirect) {
            flags.push(b("broken_redirect"));
        }
    }
    Reply::Map(vec![
        (b("flags"), Reply::Set(flags)),
        (
            b("redirect"),
            Reply::Integer(t.as_ref().map_or(-1, |t| t.redirect as i64)),
        ),
        (
            b("prefixes"),
            Reply::Array(
                t.map(|t| t.prefixes.into_iter().map(Reply::Bulk).collect())
                    .unwrap_or_default(),
            ),
        ),
    ])
}

/// After a read-only command of a tracking client: remembers its keys (T1), unless OPTIN
/// without `CLIENT CACHING yes` or OPTOUT after `CLIENT CACHING no`.
pub fn after_read<K: AsRef<[u8]>>(
    shared: &Shared,
    client: &mut Client,
    cmd: &Command,
    keys: &[(usize, K)],
) {
    let caching = std::mem::take(&mut client.tracking_caching);
    if !shared.tracking.active() || !cmd.flags.contains(Flags::READONLY) || keys.is_empty() {
        return;
    }
    let Some(t) = shared.tracking.get(client.info.id) else {
        return;
    };
    if t.bcast || (t.optin && !caching) || (t.optout && caching) {
        return;
    }
    let ks: Vec<Vec<u8>> = keys.iter().map(|(_, k)| k.as_ref().to_vec()).collect();
    shared.tracking.remember(client.info.id, &ks);
    enforce_limit(shared);
}

/// Applies `tracking-table-max-keys`.
pub fn enforce_limit(shared: &Shared) {
    let max = shared.config.read().params.uint("tracking-table-max-keys") as usize;
    let live = |id: u64| shared.clients.lock().contains_key(&id);
    shared.tracking.limit(max, 0, &live);
}

/// After a script that ran a read-only command: its declared keys are tracked.
pub fn after_script(shared: &Shared, client: &mut Client, keys: &[Vec<u8>]) {
    let caching = std::mem::take(&mut client.tracking_caching);
    if !shared.tracking.active() || keys.is_empty() {
        return;
    }
    let Some(t) = shared.tracking.get(client.info.id) else {
        return;
    };
    if t.bcast || (t.optin && !caching) || (t.optout && caching) {
        return;
    }
    shared.tracking.remember(client.info.id, keys);
    enforce_limit(shared);
}

/// The keys `txn` changed, when anyone tracks (to invalidate once it commits).
pub fn changed(shared: &Shared, txn: &Txn<'_>) -> Vec<Vec<u8>> {
    if !shared.tracking.active() {
        return Vec::new();
    }
    txn.changes_since(0)
        .into_iter()
        .map(|(_, k, _, _)| k)
        .collect()
}

/// Invalidates `keys`, written by client `writer` (0: the server) in commit `ticket` (T2).
pub fn invalidate(shared: &Shared, keys: &[Vec<u8>], writer: u64, ticket: u64) {
    if keys.is_empty() {
        return;
    }
    let live = |id: u64| shared.clients.lock().contains_key(&id);
    shared.tracking.invalidate(keys, writer, ticket, &live);
}

/// A flush: every tracking client drops everything.
pub fn flushed(shared: &Shared, ticket: u64) {
    let live = |id: u64| shared.clients.lock().contains_key(&id);
    shared.tracking.flush(ticket, &live);
}
