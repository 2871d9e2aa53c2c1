//! What the power-failure tortures over two subtables share: the states each key may hold
//! after a crash, built from what two writer threads had acknowledged, and the check of a
//! recovered database against them (gets, forward and reverse scans, `Db::check`).

use std::collections::BTreeMap;

use nacre::{Db, IterOptions, Subtable};

/// Per key, the states it may be in: the last acknowledged one, and the one its thread's
/// unacknowledged write would leave.
pub type Expect = BTreeMap<Vec<u8>, Vec<Option<Vec<u8>>>>;

/// Rows of a scan.
type Rows = Vec<(Vec<u8>, Vec<u8>)>;

/// The state every key holds (all acknowledged).
pub type State = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

/// What each key may hold after a crash: `state`, then thread `t`'s first `acked[t]` ops
/// (of `ops`) acknowledged, and its next one maybe applied; `op(t, j)` gives op `j`'s key
/// and the value it leaves.
#[allow(dead_code)] // Each torture uses one of the two.
pub fn expected(
    state: &State,
    acked: &[u64],
    ops: u64,
    op: impl Fn(u64, u64) -> (Vec<u8>, Option<Vec<u8>>),
) -> Expect {
    expected_batches(state, acked, ops, |t, j| vec![op(t, j)])
}

/// As [`expected`], for ops that write batches: `op(t, j)` gives every key op `j` writes
/// (each once) and the value it leaves there.
pub fn expected_batches(
    state: &State,
    acked: &[u64],
    ops: u64,
    op: impl Fn(u64, u64) -> Vec<(Vec<u8>, Option<Vec<u8>>)>,
) -> Expect {
    let mut expect: Expect = state
        .iter()
        .map(|(k, v)| (k.clone(), vec![v.clone()]))
        .collect();
    for (t, &n) in acked.iter().enumerate() {
        let t = t as u64;
        for j in 0..n {
            for (k, v) in op(t, j) {
                expect.insert(k, vec![v]);
            }
        }
        if n < ops {
            for (k, v) in op(t, n) {
                // A key nothing wrote yet may stay absent.
                expect.entry(k).or_insert_with(|| vec![None]).push(v);
            }
        }
    }
    expect
}

fn show(v: &Option<Vec<u8>>) -> Option<String> {
    v.as_ref()
        .map(|v| String::from_utf8_lossy(&v[..16.min(v.len())]).into_owned())
}

/// `key`'s value in `sub`, which must be one of `options` (`when` says when, in the error).
fn get_one_of(
    db: &Db,
    sub: &Subtable,
    k: &[u8],
    options: &[Option<Vec<u8>>],
    when: &str,
) -> Result<Option<Vec<u8>>, String> {
    let got = db
        .get(sub, k)
        .map_err(|e| format!("get {k:?}{when}: {e}"))?;
    if !options.contains(&got) {
        return Err(format!(
            "key {:?}: holds {:?}{when}, expected one of {:?}",
            String::from_utf8_lossy(k),
            show(&got),
            options.iter().map(show).collect::<Vec<_>>()
        ));
    }
    Ok(got)
}

/// With a Global Index rebuild held back (`Options::hold_rebuild`): checks every key's get
/// against `expect` while reads answer from the stand-ins (gi/pending.rs), then lets the
/// rebuild go. Whether the open had left the rebuild to the background.
#[allow(dead_code)] // Only the tortures with the persistent index use it.
pub fn verify_while_rebuilding(
    db: &Db,
    subs: &[Subtable],
    of: impl Fn(&[u8]) -> usize,
    expect: &Expect,
) -> Result<bool, String> {
    let rebuilding = db.rebuilding();
    let gets = || -> Result<(), String> {
        for (k, options) in expect {
            get_one_of(
                db,
                &subs[of(k)],
                k,
                options,
                " while the Global Index is rebuilt",
            )?;
        }
        Ok(())
    };
    let r = if rebuilding { gets() } else { Ok(()) };
    db.release_rebuild();
    r.map(|()| rebuilding)
}

/// Checks a recovered database against `expect` (each key in `subs[of(key)]`); returns the
/// state it holds.
pub fn verify(
    db: &Db,
    subs: &[Subtable],
    of: impl Fn(&[u8]) -> usize,
    expect: &Expect,
) -> Result<State, String> {
    let mut state = State::new();
    for (k, options) in expect {
        let got = get_one_of(db, &subs[of(k)], k, options, "")?;
        state.insert(k.clone(), got);
    }
    for (i, sub) in subs.iter().enumerate() {
        let live: Rows = state
            .iter()
            .filter(|(k, _)| of(k) == i)
            .filter_map(|(k, v)| v.clone().map(|v| (k.clone(), v)))
            .collect();
        let scan = |reverse| -> Result<Rows, String> {
            db.iter(
                sub,
                IterOptions {
                    reverse,
                    ..Default::default()
                },
            )
            .map_err(|e| e.to_string())?
            .collect::<Result<_, _>>()
            .map_err(|e| format!("scan: {e}"))
        };
        let fwd = scan(false)?;
        if fwd != live {
            return Err(format!(
                "forward scan of {} disagrees with gets: {} rows, {} live",
                sub.name(),
                fwd.len(),
                live.len()
            ));
        }
        let mut rev = scan(true)?;
        rev.reverse();
        if rev != live {
            return Err(format!(
                "reverse scan of {} disagrees with gets",
                sub.name()
            ));
        }
    }
    db.check()?;
    Ok(state)
}
