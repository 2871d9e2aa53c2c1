//! The five TPC-C transactions (spec §2.4-2.8), each one transaction on a [`TxStore`], with
//! the spec's input generation. Delivery runs inline (not queued, spec §2.7.2.2 permits
//! either for a benchmark that measures the engine). Delivery looks for each district's
//! oldest new order from a shared hint, the order after the last one a committed Delivery
//! took (as most drivers do): new orders only ever come in above it, so the scan finds the
//! same row, without stepping over every tombstone earlier Deliveries left (in any engine).

use super::load::{by_name_key, now, Rand, Scale, C_OL_I_ID, FIRST_LEN, LAST_LEN};
use super::schema::{
    key_u32, Customer, District, History, Item, Key, Order, OrderLine, Stock, Table, Warehouse,
};
use super::store::{Tx, TxFail, TxResult};
use crate::error::BenchError;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// The five transactions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// New-Order (45% of the mix).
    NewOrder,
    /// Payment (43%).
    Payment,
    /// Order-Status (4%).
    OrderStatus,
    /// Delivery (4%).
    Delivery,
    /// Stock-Level (4%).
    StockLevel,
}

impl Kind {
    /// Every kind, in report order.
    pub const ALL: [Kind; 5] = [
        Kind::NewOrder,
        Kind::Payment,
        Kind::OrderStatus,
        Kind::Delivery,
        Kind::StockLevel,
    ];

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Kind::NewOrder => "New-Order",
            Kind::Payment => "Payment",
            Kind::OrderStatus => "Order-Status",
            Kind::Delivery => "Delivery",
            Kind::StockLevel => "Stock-Level",
        }
    }

    /// A kind drawn from the spec's minimum mix (45/43/4/4/4).
    pub fn draw(r: &mut Rand) -> Kind {
        match r.uniform(1, 100) {
            1..=45 => Kind::NewOrder,
            46..=88 => Kind::Payment,
            89..=92 => Kind::OrderStatus,
            93..=96 => Kind::Delivery,
            _ => Kind::StockLevel,
        }
    }
}

/// How a transaction ended when it did not fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Done {
    /// Committed.
    Committed,
    /// A New-Order with an unused item number, rolled back as the spec requires (1%).
    RolledBack,
}

/// Who runs a transaction: the terminal's warehouse, district (Stock-Level) and identity.
#[derive(Clone, Debug)]
pub struct Terminal {
    /// Warehouses in the database.
    pub warehouses: u32,
    /// The terminal's home warehouse.
    pub w: u32,
    /// The terminal's district (Stock-Level).
    pub d: u32,
    /// Its number (history keys).
    pub id: u32,
    /// Table sizes.
    pub scale: Scale,
    /// Per district, (w - 1) * districts + (d - 1): no new order below it is left.
    pub hints: Arc<Vec<AtomicU32>>,
}

/// Delivery hints for `warehouses` warehouses at `scale`, all at order 1.
pub fn hints(warehouses: u32, scale: Scale) -> Arc<Vec<AtomicU32>> {
    Arc::new(
        (0..warehouses * scale.districts)
            .map(|_| AtomicU32::new(1))
            .collect(),
    )
}

/// One transaction's inputs, drawn before the first attempt so that retries redo the same
/// work (spec §5.2.5.4 keeps inputs across a retry).
pub enum Input {
    /// New-Order: district, customer, lines (item, supplying warehouse, quantity).
    NewOrder(u32, u32, Vec<(u32, u32, i64)>),
    /// Payment: district, customer's warehouse and district, customer, amount.
    Payment(u32, u32, u32, Who, i64),
    /// Order-Status: district, customer.
    OrderStatus(u32, Who),
    /// Delivery: carrier.
    Delivery(i64),
    /// Stock-Level: threshold.
    StockLevel(i64),
}

/// A customer, by number or by last name.
#[derive(Clone, Debug)]
pub enum Who {
    /// C_ID.
    Id(u32),
    /// C_LAST.
    Last(Vec<u8>),
}

fn who(r: &mut Rand, scale: Scale) -> Who {
    if r.uniform(1, 100) <= 60 {
        Who::Last(r.run_last_name(scale.customers))
    } else {
        Who::Id(r.run_customer(scale.customers))
    }
}

impl Terminal {
    /// Another warehouse than the home one, if there is one.
    fn remote(&self, r: &mut Rand) -> u32 {
        if self.warehouses == 1 {
            return self.w;
        }
        let o = r.uniform(1, self.warehouses as u64 - 1) as u32;
        if o >= self.w {
            o + 1
        } else {
            o
        }
    }

    /// Draws the inputs of a `kind` transaction.
    pub fn input(&self, kind: Kind, r: &mut Rand) -> Input {
        let s = self.scale;
        match kind {
            Kind::NewOrder => {
                let d = r.uniform(1, s.districts as u64) as u32;
                let c = r.run_customer(s.customers);
                let n = r.uniform(5, 15) as usize;
                let rollback = r.uniform(1, 100) == 1;
                let mut lines: Vec<(u32, u32, i64)> = (0..n)
                    .map(|i| {
                        let item = if rollback && i == n - 1 {
                            s.items + 1
                        } else {
                            r.nurand(8191, 1, s.items as u64, C_OL_I_ID) as u32
                        };
                        let supply = if r.uniform(1, 100) == 1 {
                            self.remote(r)
                        } else {
                            self.w
                        };
                        (item, supply, r.uniform(1, 10) as i64)
                    })
                    .collect();
                // Stock rows are locked in one order, as most implementations do, so that
                // New-Orders do not deadlock each other; the unused item stays last.
                let last = lines.pop();
                lines.sort_by_key(|&(i, w, _)| (w, i));
                lines.dedup_by_key(|&mut (i, w, _)| (w, i));
                lines.extend(last);
                Input::NewOrder(d, c, lines)
            }
            Kind::Payment => {
                let d = r.uniform(1, s.districts as u64) as u32;
                let (cw, cd) = if r.uniform(1, 100) <= 85 {
                    (self.w, d)
                } else {
                    (self.remote(r), r.uniform(1, s.districts as u64) as u32)
                };
                let c = who(r, s);
                Input::Payment(d, cw, cd, c, r.uniform(100, 500_000) as i64)
            }
            Kind::OrderStatus => {
                let d = r.uniform(1, s.districts as u64) as u32;
                Input::OrderStatus(d, who(r, s))
            }
            Kind::Delivery => Input::Delivery(r.uniform(1, 10) as i64),
            Kind::StockLevel => Input::StockLevel(r.uniform(10, 20) as i64),
        }
    }

    /// Runs one attempt of the transaction with `input` in `tx`. `seq` numbers the
    /// terminal's history rows.
    pub fn run(&self, tx: Box<dyn Tx + '_>, input: &Input, seq: u32) -> TxResult<Done> {
        let mut tx = tx;
        let mut delivered = Vec::new();
        let r = match input {
            Input::NewOrder(d, c, lines) => self.new_order(&mut *tx, *d, *c, lines),
            Input::Payment(d, cw, cd, c, amount) => {
                self.payment(&mut *tx, *d, (*cw, *cd), c, *amount, seq)
            }
            Input::OrderStatus(d, c) => self.order_status(&mut *tx, *d, c),
            Input::Delivery(carrier) => self.delivery(&mut *tx, *carrier, &mut delivered),
            Input::StockLevel(threshold) => self.stock_level(&mut *tx, *threshold),
        };
        match r {
            Ok(Done::Committed) => {
                tx.commit()?;
                for (i, o) in delivered {
                    self.hints[i].fetch_max(o + 1, Ordering::AcqRel);
                }
                Ok(Done::Committed)
            }
            Ok(Done::RolledBack) => {
                tx.rollback();
                Ok(Done::RolledBack)
            }
            Err(e) => {
                tx.rollback();
                Err(e)
            }
        }
    }

    fn new_order(
        &self,
        tx: &mut dyn Tx,
        d: u32,
        c: u32,
        lines: &[(u32, u32, i64)],
    ) -> TxResult<Done> {
        let w = self.w;
        let wh = Warehouse::dec(&need(
            tx.get(Table::Warehouse, &Key::of(&[w]))?,
            "warehouse",
        )?)?;
        let dk = Key::of(&[w, d]);
        let mut dist = District::dec(&need(tx.get_for_update(Table::District, &dk)?, "district")?)?;
        let o = dist.next_o_id as u32;
        dist.next_o_id += 1;
        tx.put(Table::District, &dk, &dist.enc())?;
        let cust = Customer::dec(&need(
            tx.get(Table::Customer, &Key::of(&[w, d, c]))?,
            "customer",
        )?)?;
        let all_local = lines.iter().all(|&(_, sw, _)| sw == w);
        let order = Order {
            c_id: c as i64,
            entry_d: now(),
            carrier_id: 0,
            ol_cnt: lines.len() as i64,
            all_local: i64::from(all_local),
        };
        tx.put(Table::Order, &Key::of(&[w, d, o]), &order.enc())?;
        tx.put(Table::NewOrder, &Key::of(&[w, d, o]), &[])?;
        tx.put(Table::OrderByCustomer, &Key::of(&[w, d, c, o]), &[])?;
        let mut total = 0i64;
        for (n, &(i, sw, qty)) in lines.iter().enumerate() {
            let Some(item) = tx.get(Table::Item, &Key::of(&[i]))? else {
                // The unused item number: the whole order rolls back (spec §2.4.2.3).
                return Ok(Done::RolledBack);
            };
            let item = Item::dec(&item)?;
            let sk = Key::of(&[sw, i]);
            let mut st = Stock::dec(&need(tx.get_for_update(Table::Stock, &sk)?, "stock")?)?;
            st.quantity = if st.quantity >= qty + 10 {
                st.quantity - qty
            } else {
                st.quantity - qty + 91
            };
            st.ytd += qty;
            st.order_cnt += 1;
            if sw != w {
                st.remote_cnt += 1;
            }
            tx.put(Table::Stock, &sk, &st.enc())?;
            let amount = qty * item.price;
            total += amount;
            let at = (d as usize - 1) * 24 % st.dist.len().max(1);
            let line = OrderLine {
                i_id: i as i64,
                supply_w: sw as i64,
                delivery_d: 0,
                quantity: qty,
                amount,
                dist_info: st.dist.get(at..at + 24).unwrap_or_default().to_vec(),
            };
            tx.put(
                Table::OrderLine,
                &Key::of(&[w, d, o, n as u32 + 1]),
                &line.enc(),
            )?;
        }
        // The order's total with discount and taxes, as the terminal would display it.
        let _total =
            total * (10_000 - cust.discount) / 10_000 * (10_000 + wh.tax + dist.tax) / 10_000;
        Ok(Done::Committed)
    }

    /// The customer `c` of district (w, d): by number, or the one in the middle of those with
    /// the last name, by first name (spec §2.5.2.2).
    fn find_customer(&self, tx: &mut dyn Tx, w: u32, d: u32, c: &Who) -> TxResult<u32> {
        let last = match c {
            Who::Id(id) => return Ok(*id),
            Who::Last(l) => l,
        };
        let lo = by_name_key(w, d, last, &[], 0);
        let mut hi = Key::default();
        hi.u32(w)
            .u32(d)
            .text(last, LAST_LEN)
            .text(&[0xFF; FIRST_LEN], FIRST_LEN)
            .u32(u32::MAX);
        let rows = tx.scan(Table::CustomerByName, &lo, &hi.0, false, usize::MAX)?;
        if rows.is_empty() {
            // Only at reduced scales, where some last names are unused.
            return Ok(1);
        }
        let (k, _) = &rows[(rows.len() - 1) / 2];
        Ok(key_u32(k, k.len() - 4)?)
    }

    fn payment(
        &self,
        tx: &mut dyn Tx,
        d: u32,
        (cw, cd): (u32, u32),
        c: &Who,
        amount: i64,
        seq: u32,
    ) -> TxResult<Done> {
        let w = self.w;
        let wk = Key::of(&[w]);
        let mut wh = Warehouse::dec(&need(
            tx.get_for_update(Table::Warehouse, &wk)?,
            "warehouse",
        )?)?;
        wh.ytd += amount;
        tx.put(Table::Warehouse, &wk, &wh.enc())?;
        let dk = Key::of(&[w, d]);
        let mut dist = District::dec(&need(tx.get_for_update(Table::District, &dk)?, "district")?)?;
        dist.ytd += amount;
        tx.put(Table::District, &dk, &dist.enc())?;
        let c = self.find_customer(tx, cw, cd, c)?;
        let ck = Key::of(&[cw, cd, c]);
        let mut cust = Customer::dec(&need(tx.get_for_update(Table::Customer, &ck)?, "customer")?)?;
        cust.balance -= amount;
        cust.ytd_payment += amount;
        cust.payment_cnt += 1;
        if cust.credit == b"BC" {
            let mut data = format!("{c} {cd} {cw} {d} {w} {amount} | ").into_bytes();
            data.extend_from_slice(&cust.data);
            data.truncate(500);
            cust.data = data;
        }
        tx.put(Table::Customer, &ck, &cust.enc())?;
        let h = History {
            c_id: c as i64,
            c_d: cd as i64,
            c_w: cw as i64,
            d: d as i64,
            w: w as i64,
            date: now(),
            amount,
            data: [&wh.name[..], b"    ", &dist.name[..]].concat(),
        };
        tx.put(Table::History, &Key::of(&[w, d, self.id, seq]), &h.enc())?;
        Ok(Done::Committed)
    }

    fn order_status(&self, tx: &mut dyn Tx, d: u32, c: &Who) -> TxResult<Done> {
        let w = self.w;
        let c = self.find_customer(tx, w, d, c)?;
        need(tx.get(Table::Customer, &Key::of(&[w, d, c]))?, "customer")?;
        let last = tx.scan(
            Table::OrderByCustomer,
            &Key::of(&[w, d, c]),
            &Key::of(&[w, d, c + 1]),
            true,
            1,
        )?;
        if let Some((k, _)) = last.first() {
            let o = key_u32(k, 12)?;
            let order = Order::dec(&need(tx.get(Table::Order, &Key::of(&[w, d, o]))?, "order")?)?;
            let lines = tx.scan(
                Table::OrderLine,
                &Key::of(&[w, d, o]),
                &Key::of(&[w, d, o + 1]),
                false,
                usize::MAX,
            )?;
            if lines.len() as i64 != order.ol_cnt {
                return Err(broken(format!(
                    "order ({w},{d},{o}) has {} lines, its row says {}",
                    lines.len(),
                    order.ol_cnt
                )));
            }
        }
        Ok(Done::Committed)
    }

    fn delivery(
        &self,
        tx: &mut dyn Tx,
        carrier: i64,
        delivered: &mut Vec<(usize, u32)>,
    ) -> TxResult<Done> {
        let w = self.w;
        let date = now();
        for d in 1..=self.scale.districts {
            let hint = ((w - 1) * self.scale.districts + d - 1) as usize;
            let from = self.hints[hint].load(Ordering::Acquire);
            let oldest = tx.scan(
                Table::NewOrder,
                &Key::of(&[w, d, from]),
                &Key::of(&[w, d + 1]),
                false,
                1,
            )?;
            let Some((nk, _)) = oldest.first() else {
                continue;
            };
            let o = key_u32(nk, 8)?;
            delivered.push((hint, o));
            tx.delete(Table::NewOrder, nk)?;
            let ok = Key::of(&[w, d, o]);
            let mut order = Order::dec(&need(tx.get_for_update(Table::Order, &ok)?, "order")?)?;
            order.carrier_id = carrier;
            tx.put(Table::Order, &ok, &order.enc())?;
            let lines = tx.scan(
                Table::OrderLine,
                &ok,
                &Key::of(&[w, d, o + 1]),
                false,
                usize::MAX,
            )?;
            let mut sum = 0;
            for (k, v) in lines {
                let mut line = OrderLine::dec(&v)?;
                sum += line.amount;
                line.delivery_d = date;
                tx.put(Table::OrderLine, &k, &line.enc())?;
            }
            let ck = Key::of(&[w, d, order.c_id as u32]);
            let mut cust =
                Customer::dec(&need(tx.get_for_update(Table::Customer, &ck)?, "customer")?)?;
            cust.balance += sum;
            cust.delivery_cnt += 1;
            tx.put(Table::Customer, &ck, &cust.enc())?;
        }
        Ok(Done::Committed)
    }

    fn stock_level(&self, tx: &mut dyn Tx, threshold: i64) -> TxResult<Done> {
        let (w, d) = (self.w, self.d);
        let dist = District::dec(&need(
            tx.get(Table::District, &Key::of(&[w, d]))?,
            "district",
        )?)?;
        let next = dist.next_o_id as u32;
        let lines = tx.scan(
            Table::OrderLine,
            &Key::of(&[w, d, next.saturating_sub(20)]),
            &Key::of(&[w, d, next]),
            false,
            usize::MAX,
        )?;
        let mut items: Vec<u32> = lines
            .iter()
            .map(|(_, v)| OrderLine::dec(v).map(|l| l.i_id as u32))
            .collect::<Result<_, _>>()?;
        items.sort_unstable();
        items.dedup();
        let mut low = 0;
        for i in items {
            let st = Stock::dec(&need(tx.get(Table::Stock, &Key::of(&[w, i]))?, "stock")?)?;
            low += u32::from(st.quantity < threshold);
        }
        let _ = low;
        Ok(Done::Committed)
    }
}

fn broken(why: String) -> TxFail {
    TxFail::Fatal(BenchError::Process {
        what: "TPC-C".into(),
        why,
    })
}

/// A row the schema guarantees; its absence is a broken database.
fn need(v: Option<Vec<u8>>, what: &str) -> TxResult<Vec<u8>> {
    v.ok_or_else(|| broken(format!("a {what} row is missing")))
}
