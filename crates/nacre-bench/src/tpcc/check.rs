//! TPC-C consistency conditions 1-4 (spec §3.3.2.1-4), read in one transaction.

use super::load::Scale;
use super::schema::{key_u32, District, Key, Order, Table, Warehouse};
use super::store::{TxFail, TxStore};
use crate::error::{BenchError, Result};

/// The outcome of one condition: `None` when it holds, else the first violation.
pub type Outcome = Option<String>;

fn fatal(e: TxFail) -> BenchError {
    match e {
        TxFail::Fatal(e) => e,
        TxFail::Retry(why) => BenchError::Process {
            what: "TPC-C consistency check".into(),
            why,
        },
    }
}

/// Conditions 1-4 over every warehouse and district, in order.
pub fn consistency(store: &dyn TxStore, warehouses: u32, scale: Scale) -> Result<[Outcome; 4]> {
    let mut tx = store.begin();
    let mut out: [Outcome; 4] = Default::default();
    let mut note = |i: usize, why: String| {
        if out[i].is_none() {
            out[i] = Some(why);
        }
    };
    let get = |tx: &mut Box<dyn super::store::Tx + '_>, t: Table, k: Vec<u8>| {
        tx.get(t, &k)
            .map_err(fatal)?
            .ok_or_else(|| BenchError::Process {
                what: "TPC-C consistency check".into(),
                why: format!("a {} row is missing", t.name()),
            })
    };
    for w in 1..=warehouses {
        let wh = Warehouse::dec(&get(&mut tx, Table::Warehouse, Key::of(&[w]))?)?;
        let mut d_ytd = 0;
        for d in 1..=scale.districts {
            let dist = District::dec(&get(&mut tx, Table::District, Key::of(&[w, d]))?)?;
            d_ytd += dist.ytd;
            let (lo, hi) = (Key::of(&[w, d]), Key::of(&[w, d + 1]));
            let last_order = tx
                .scan(Table::Order, &lo, &hi, true, 1)
                .map_err(fatal)?
                .first()
                .map(|(k, _)| key_u32(k, 8))
                .transpose()?;
            let new_orders = tx
                .scan(Table::NewOrder, &lo, &hi, false, usize::MAX)
                .map_err(fatal)?;
            let no_ids: Vec<u32> = new_orders
                .iter()
                .map(|(k, _)| key_u32(k, 8))
                .collect::<Result<_>>()?;
            // 2: D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID).
            let next = dist.next_o_id - 1;
            let max_o = last_order.map_or(0, i64::from);
            if next != max_o || no_ids.last().is_some_and(|&m| i64::from(m) != next) {
                note(
                    1,
                    format!(
                        "district ({w},{d}): D_NEXT_O_ID - 1 = {next}, max(O_ID) = {max_o}, max(NO_O_ID) = {:?}",
                        no_ids.last()
                    ),
                );
            }
            // 3: max(NO_O_ID) - min(NO_O_ID) + 1 = rows in NEW-ORDER.
            if let (Some(&lo_id), Some(&hi_id)) = (no_ids.first(), no_ids.last()) {
                if (hi_id - lo_id + 1) as usize != no_ids.len() {
                    note(
                        2,
                        format!(
                            "district ({w},{d}): NEW-ORDER holds {} rows for ids {lo_id}..={hi_id}",
                            no_ids.len()
                        ),
                    );
                }
            }
            // 4: sum(O_OL_CNT) = rows in ORDER-LINE.
            let orders = tx
                .scan(Table::Order, &lo, &hi, false, usize::MAX)
                .map_err(fatal)?;
            let mut ol_cnt = 0i64;
            for (_, v) in &orders {
                ol_cnt += Order::dec(v)?.ol_cnt;
            }
            let lines = tx
                .scan(Table::OrderLine, &lo, &hi, false, usize::MAX)
                .map_err(fatal)?
                .len() as i64;
            if ol_cnt != lines {
                note(
                    3,
                    format!(
                        "district ({w},{d}): sum(O_OL_CNT) = {ol_cnt}, ORDER-LINE rows = {lines}"
                    ),
                );
            }
        }
        // 1: W_YTD = sum(D_YTD).
        if wh.ytd != d_ytd {
            note(
                0,
                format!("warehouse {w}: W_YTD = {}, sum(D_YTD) = {d_ytd}", wh.ytd),
            );
        }
    }
    tx.rollback();
    Ok(out)
}

/// The lines `consistency N: ok` (or `FAILED: why`), one per condition.
pub fn lines(out: &[Outcome; 4]) -> Vec<String> {
    out.iter()
        .enumerate()
        .map(|(i, o)| match o {
            None => format!("consistency {}: ok", i + 1),
            Some(why) => format!("consistency {}: FAILED: {why}", i + 1),
        })
        .collect()
}
