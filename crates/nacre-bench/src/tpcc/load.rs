//! The TPC-C initial population (spec §4.3.3) and the random inputs of spec §2 and §4.3.2:
//! NURand, last names from syllables, random strings.

use nacre_pmem::SplitMix64;

use super::schema::{
    Customer, District, History, Item, Key, Order, OrderLine, Stock, Table, Warehouse,
};
use super::store::TxStore;
use crate::error::Result;

/// Table sizes: the spec's by default, smaller in tests.
#[derive(Clone, Copy, Debug)]
pub struct Scale {
    /// Items (and stock rows per warehouse): 100,000.
    pub items: u32,
    /// Districts per warehouse: 10.
    pub districts: u32,
    /// Customers per district: 3,000.
    pub customers: u32,
    /// Orders loaded per district: 3,000 (the last `new_orders` of them undelivered).
    pub orders: u32,
    /// Undelivered orders loaded per district: 900.
    pub new_orders: u32,
}

impl Scale {
    /// The spec's cardinalities.
    pub const SPEC: Scale = Scale {
        items: 100_000,
        districts: 10,
        customers: 3_000,
        orders: 3_000,
        new_orders: 900,
    };
}

/// The run-time constant C of NURand for C_LAST (spec §2.1.6: it differs from the load's by
/// 65..=119, not 96 or 112), C_ID and OL_I_ID.
pub const C_LAST_LOAD: u64 = 157;
/// See [`C_LAST_LOAD`].
pub const C_LAST_RUN: u64 = 223;
/// C for C_ID.
pub const C_ID: u64 = 259;
/// C for OL_I_ID.
pub const C_OL_I_ID: u64 = 7911;

/// Random inputs.
pub struct Rand(pub SplitMix64);

impl Rand {
    /// A stream from `seed`.
    pub fn new(seed: u64) -> Rand {
        Rand(SplitMix64::new(seed))
    }

    /// Uniform in `lo..=hi`.
    pub fn uniform(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.0.next_u64() % (hi - lo + 1)
    }

    /// NURand(A, x, y) with constant `c` (spec §2.1.6).
    pub fn nurand(&mut self, a: u64, x: u64, y: u64, c: u64) -> u64 {
        (((self.uniform(0, a) | self.uniform(x, y)) + c) % (y - x + 1)) + x
    }

    /// Random alphanumeric text of `lo..=hi` bytes.
    pub fn astring(&mut self, lo: usize, hi: usize) -> Vec<u8> {
        const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
        let n = self.uniform(lo as u64, hi as u64) as usize;
        (0..n)
            .map(|_| CHARS[(self.0.next_u64() % CHARS.len() as u64) as usize])
            .collect()
    }

    /// Random digits, `n` of them.
    pub fn nstring(&mut self, n: usize) -> Vec<u8> {
        (0..n)
            .map(|_| b'0' + (self.0.next_u64() % 10) as u8)
            .collect()
    }

    /// Text of `lo..=hi` bytes holding "ORIGINAL" 10% of the time (I_DATA, S_DATA).
    fn data(&mut self, lo: usize, hi: usize) -> Vec<u8> {
        let mut d = self.astring(lo, hi);
        if self.uniform(1, 10) == 1 {
            let at = self.uniform(0, (d.len() - 8) as u64) as usize;
            d[at..at + 8].copy_from_slice(b"ORIGINAL");
        }
        d
    }

    /// A last name for a customer picked at run time (spec §2.5.1.2), given how many
    /// customers a district has.
    pub fn run_last_name(&mut self, customers: u32) -> Vec<u8> {
        let top = (customers.min(1000) - 1) as u64;
        last_name(self.nurand(255, 0, top, C_LAST_RUN))
    }

    /// A customer id picked at run time.
    pub fn run_customer(&mut self, customers: u32) -> u32 {
        self.nurand(1023, 1, customers as u64, C_ID) as u32
    }
}

/// The last name numbered `n` (0..=999) from its three digits' syllables (spec §4.3.2.3).
pub fn last_name(n: u64) -> Vec<u8> {
    const S: [&str; 10] = [
        "BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING",
    ];
    let n = n % 1000;
    format!(
        "{}{}{}",
        S[(n / 100) as usize],
        S[(n / 10 % 10) as usize],
        S[(n % 10) as usize]
    )
    .into_bytes()
}

/// Width of a last name in index keys.
pub const LAST_LEN: usize = 16;
/// Width of a first name in index keys.
pub const FIRST_LEN: usize = 16;

/// The index key of a customer by name.
pub fn by_name_key(w: u32, d: u32, last: &[u8], first: &[u8], c: u32) -> Vec<u8> {
    let mut k = Key::default();
    k.u32(w)
        .u32(d)
        .text(last, LAST_LEN)
        .text(first, FIRST_LEN)
        .u32(c);
    k.0
}

/// The timestamp rows carry (seconds since the epoch).
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Writes rows in batches of this many.
const BATCH: usize = 400;

struct Loader<'a> {
    store: &'a dyn TxStore,
    rows: Vec<(Table, Vec<u8>, Vec<u8>)>,
    total: u64,
}

impl Loader<'_> {
    fn add(&mut self, t: Table, k: Vec<u8>, v: Vec<u8>) -> Result<()> {
        self.rows.push((t, k, v));
        if self.rows.len() >= BATCH {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if !self.rows.is_empty() {
            self.store.load(&self.rows)?;
            self.total += self.rows.len() as u64;
            self.rows.clear();
        }
        Ok(())
    }
}

/// Loads `warehouses` warehouses at `scale` into `store`; the rows written.
pub fn load(store: &dyn TxStore, warehouses: u32, scale: Scale, seed: u64) -> Result<u64> {
    let mut l = Loader {
        store,
        rows: Vec::with_capacity(BATCH),
        total: 0,
    };
    let mut r = Rand::new(seed);
    for i in 1..=scale.items {
        let item = Item {
            im_id: r.uniform(1, 10_000) as i64,
            price: r.uniform(100, 10_000) as i64,
            name: r.astring(14, 24),
            data: r.data(26, 50),
        };
        l.add(Table::Item, Key::of(&[i]), item.enc())?;
    }
    let entry = now();
    for w in 1..=warehouses {
        let wh = Warehouse {
            // 300,000.00 with the spec's ten districts of 30,000.00 each.
            ytd: 3_000_000 * i64::from(scale.districts),
            tax: r.uniform(0, 2000) as i64,
            name: r.astring(6, 10),
            address: r.astring(60, 80),
        };
        l.add(Table::Warehouse, Key::of(&[w]), wh.enc())?;
        for i in 1..=scale.items {
            let s = Stock {
                quantity: r.uniform(10, 100) as i64,
                dist: r.astring(240, 240),
                data: r.data(26, 50),
                ..Default::default()
            };
            l.add(Table::Stock, Key::of(&[w, i]), s.enc())?;
        }
        for d in 1..=scale.districts {
            let dist = District {
                ytd: 3_000_000,
                tax: r.uniform(0, 2000) as i64,
                next_o_id: scale.orders as i64 + 1,
                name: r.astring(6, 10),
                address: r.astring(60, 80),
            };
            l.add(Table::District, Key::of(&[w, d]), dist.enc())?;
            for c in 1..=scale.customers {
                let last = if c <= 1000 {
                    last_name((c - 1) as u64)
                } else {
                    last_name(r.nurand(255, 0, 999, C_LAST_LOAD))
                };
                let cust = Customer {
                    first: r.astring(8, 16),
                    middle: b"OE".to_vec(),
                    last,
                    credit: if r.uniform(1, 10) == 1 { b"BC" } else { b"GC" }.to_vec(),
                    discount: r.uniform(0, 5000) as i64,
                    balance: -1000,
                    ytd_payment: 1000,
                    payment_cnt: 1,
                    delivery_cnt: 0,
                    credit_lim: 5_000_000,
                    since: entry,
                    address: r.astring(80, 110),
                    data: r.astring(300, 500),
                };
                l.add(
                    Table::CustomerByName,
                    by_name_key(w, d, &cust.last, &cust.first, c),
                    Vec::new(),
                )?;
                l.add(Table::Customer, Key::of(&[w, d, c]), cust.enc())?;
                let h = History {
                    c_id: c as i64,
                    c_d: d as i64,
                    c_w: w as i64,
                    d: d as i64,
                    w: w as i64,
                    date: entry,
                    amount: 1000,
                    data: r.astring(12, 24),
                };
                // Terminal 0 is the loader's.
                l.add(Table::History, Key::of(&[w, d, 0, c]), h.enc())?;
            }
            // Orders go to the customers in a random permutation.
            let mut perm: Vec<u32> = (1..=scale.customers).collect();
            for i in (1..perm.len()).rev() {
                perm.swap(i, r.uniform(0, i as u64) as usize);
            }
            let delivered = scale.orders - scale.new_orders;
            for o in 1..=scale.orders {
                let c = perm[(o as usize - 1) % perm.len()];
                let ol_cnt = r.uniform(5, 15) as u32;
                let order = Order {
                    c_id: c as i64,
                    entry_d: entry,
                    carrier_id: if o <= delivered {
                        r.uniform(1, 10) as i64
                    } else {
                        0
                    },
                    ol_cnt: ol_cnt as i64,
                    all_local: 1,
                };
                l.add(Table::Order, Key::of(&[w, d, o]), order.enc())?;
                l.add(Table::OrderByCustomer, Key::of(&[w, d, c, o]), Vec::new())?;
                if o > delivered {
                    l.add(Table::NewOrder, Key::of(&[w, d, o]), Vec::new())?;
                }
                for ol in 1..=ol_cnt {
                    let line = OrderLine {
                        i_id: r.uniform(1, scale.items as u64) as i64,
                        supply_w: w as i64,
                        delivery_d: if o <= delivered { entry } else { 0 },
                        quantity: 5,
                        amount: if o <= delivered {
                            0
                        } else {
                            r.uniform(1, 999_999) as i64
                        },
                        dist_info: r.astring(24, 24),
                    };
                    l.add(Table::OrderLine, Key::of(&[w, d, o, ol]), line.enc())?;
                }
            }
        }
        tracing::info!(warehouse = w, rows = l.total, "loaded");
    }
    l.flush()?;
    Ok(l.total)
}
