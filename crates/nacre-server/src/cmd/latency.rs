//! `LATENCY LATEST HISTORY RESET GRAPH DOCTOR HISTOGRAM HELP`: the latency monitor's events
//! (`latency.rs`) and the per-command latency histograms (`cmdstats.rs`).

use nacre_resp::Reply;

use super::args::lower;
use super::registry::{cmd, sub, unknown_subcommand, Command, Keys::None as NK, Run::Conn};
use super::{err_bytes, Outcome};
use crate::client::Client;
use crate::shared::Shared;
use crate::store::txn::Ticket;

fn reply(r: Reply) -> Outcome {
    Outcome::Reply(r, Ticket(0))
}

fn bulk(s: &str) -> Reply {
    Reply::Bulk(s.as_bytes().to_vec())
}

fn int(n: u64) -> Reply {
    Reply::Integer(n as i64)
}

/// `LATENCY HISTOGRAM [command ...]`: commands that ran, with their runs by duration; a
/// container's name asks for its subcommands; unknown names are skipped.
fn histogram(shared: &Shared, names: &[Vec<u8>]) -> Reply {
    let all = shared.cmdstats.all();
    let wanted = |full: &str| {
        names.is_empty()
            || names.iter().any(|n| {
                let n = lower(n);
                full == n || full.split_once('|').is_some_and(|(parent, _)| parent == n)
            })
    };
    Reply::Map(
        all.into_iter()
            .filter(|(full, _)| wanted(full))
            .map(|(full, s)| {
                let buckets = s
                    .cumulative()
                    .into_iter()
                    .map(|(bound, n)| (int(bound), int(n)))
                    .collect();
                (
                    bulk(&full),
                    Reply::Map(vec![
                        (bulk("calls"), int(s.calls)),
                        (bulk("histogram_usec"), Reply::Map(buckets)),
                    ]),
                )
            })
            .collect(),
    )
}

/// `LATENCY GRAPH event`: the event's samples as rows of text.
fn graph(shared: &Shared, event: &[u8]) -> Reply {
    let name = String::from_utf8_lossy(event).into_owned();
    let h = shared.latency.history(&name);
    if h.is_empty() {
        let mut msg = b"No samples available for event '".to_vec();
        msg.extend_from_slice(event);
        msg.push(b'\'');
        return err_bytes(&msg);
    }
    let high = h.iter().map(|s| s.1).max().unwrap_or(0);
    let low = h.iter().map(|s| s.1).min().unwrap_or(0);
    let mut text = format!("{name} - high {high} ms, low {low} ms\n\n");
    for (at, ms) in &h {
        let width = (ms * 60).checked_div(high).unwrap_or(0) as usize;
        text.push_str(&format!("{at} {ms:>8} ms {}\n", "#".repeat(width.max(1))));
    }
    Reply::Verbatim {
        format: "txt".into(),
        text: text.into_bytes(),
    }
}

fn doctor(shared: &Shared) -> Reply {
    let latest = shared.latency.latest();
    let text = if latest.is_empty() {
        "Dave, no latency spike was observed during the lifetime of this Redis instance, not in the slightest bit. I honestly think you ought to sleep tonight.\n".to_string()
    } else {
        let mut t =
            String::from("Dave, I have observed latency spikes in this Redis instance.\n\n");
        for (i, (event, _, last, max)) in latest.iter().enumerate() {
            let n = shared.latency.history(event).len();
            t.push_str(&format!(
                "{}. {event}: {n} latency spikes (latest {last} ms, all time high {max} ms).\n",
                i + 1
            ));
        }
        t.push_str("\nCommands above the threshold show in SLOWLOG GET; values live in the pool, so no fork, swap or transparent huge page advice applies.\n");
        t
    };
    Reply::Verbatim {
        format: "txt".into(),
        text: text.into_bytes(),
    }
}

/// `LATENCY subcommand ...`.
pub fn latency(shared: &Shared, _: &mut Client, args: &[Vec<u8>]) -> Outcome {
    match lower(&args[1]).as_str() {
        "latest" => reply(Reply::Array(
            shared
                .latency
                .latest()
                .into_iter()
                .map(|(e, at, last, max)| {
                    Reply::Array(vec![bulk(e), int(at), int(last), int(max)])
                })
                .collect(),
        )),
        "history" => reply(Reply::Array(
            shared
                .latency
                .history(&String::from_utf8_lossy(&args[2]))
                .into_iter()
                .map(|(at, ms)| Reply::Array(vec![int(at), int(ms)]))
                .collect(),
        )),
        "reset" => {
            let events: Vec<String> = args[2..]
                .iter()
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            reply(int(shared.latency.reset(&events) as u64))
        }
        "graph" => reply(graph(shared, &args[2])),
        "doctor" => reply(doctor(shared)),
        "histogram" => reply(histogram(shared, &args[2..])),
        "help" => reply(crate::cmd::help_lines(&[
                "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "DOCTOR",
                "    Return a human readable latency analysis report.",
                "GRAPH <event>",
                "    Return an ASCII latency graph for the <event> class.",
                "HISTORY <event>",
                "    Return time-latency samples for the <event> class.",
                "LATEST",
                "    Return the latest latency samples for all events.",
                "RESET [<event> ...]",
                "    Reset latency data of one or more <event> classes.",
                "    (default: reset all data for all event classes)",
                "HISTOGRAM [COMMAND ...]",
                "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
                "    If no commands are specified then all histograms are replied.",
                "HELP",
                "    Prints this help.",
        ])),
        _ => reply(unknown_subcommand(&args[1], "latency")),
    }
}

/// The latency monitor's command.
#[rustfmt::skip]
pub(crate) static COMMANDS: &[Command] = &[
    cmd!("latency", -2, [], [SLOW], [], NK, "server", "2.8.13", "A container for latency diagnostics commands.", Conn(latency), &[
        sub!("latest", 2, [ADMIN NOSCRIPT LOADING STALE], [ADMIN SLOW DANGEROUS], (0, 0, 0)),
        sub!("history", 3, [ADMIN NOSCRIPT LOADING STALE], [ADMIN SLOW DANGEROUS], (0, 0, 0)),
        sub!("reset", -2, [ADMIN NOSCRIPT LOADING STALE], [ADMIN SLOW DANGEROUS], (0, 0, 0)),
        sub!("graph", 3, [ADMIN NOSCRIPT LOADING STALE], [ADMIN SLOW DANGEROUS], (0, 0, 0)),
        sub!("doctor", 2, [ADMIN NOSCRIPT LOADING STALE], [ADMIN SLOW DANGEROUS], (0, 0, 0)),
        sub!("histogram", -2, [ADMIN NOSCRIPT LOADING STALE], [ADMIN SLOW DANGEROUS], (0, 0, 0)),
        sub!("help", 2, [LOADING STALE], [SLOW], (0, 0, 0)),
    ]),
];
