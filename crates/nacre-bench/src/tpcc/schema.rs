//! TPC-C tables (spec §1.3): their keys (big-endian, so key order is the spec's primary key
//! order) and rows (the fields the five transactions and the consistency checks use, plus
//! the text fields at the spec's lengths, so rows have their real sizes).

use crate::error::{BenchError, Result};

/// A table, or a secondary index the transactions need.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Table {
    /// WAREHOUSE, key (w).
    Warehouse,
    /// DISTRICT, key (w, d).
    District,
    /// CUSTOMER, key (w, d, c).
    Customer,
    /// HISTORY (no primary key in the spec): key (w, d, terminal, counter).
    History,
    /// NEW-ORDER, key (w, d, o); empty rows.
    NewOrder,
    /// ORDER, key (w, d, o).
    Order,
    /// ORDER-LINE, key (w, d, o, ol).
    OrderLine,
    /// ITEM, key (i).
    Item,
    /// STOCK, key (w, i).
    Stock,
    /// Customers by last name: key (w, d, last, first, c); empty rows.
    CustomerByName,
    /// Orders by customer: key (w, d, c, o); empty rows.
    OrderByCustomer,
}

impl Table {
    /// Every table, in a fixed order (its index is its key prefix in a shared keyspace).
    pub const ALL: [Table; 11] = [
        Table::Warehouse,
        Table::District,
        Table::Customer,
        Table::History,
        Table::NewOrder,
        Table::Order,
        Table::OrderLine,
        Table::Item,
        Table::Stock,
        Table::CustomerByName,
        Table::OrderByCustomer,
    ];

    /// The table's name (a Nacre subtable of that name holds it).
    pub fn name(self) -> &'static str {
        match self {
            Table::Warehouse => "warehouse",
            Table::District => "district",
            Table::Customer => "customer",
            Table::History => "history",
            Table::NewOrder => "new_order",
            Table::Order => "orders",
            Table::OrderLine => "order_line",
            Table::Item => "item",
            Table::Stock => "stock",
            Table::CustomerByName => "customer_by_name",
            Table::OrderByCustomer => "order_by_customer",
        }
    }

    /// Its position in [`Table::ALL`].
    pub fn index(self) -> usize {
        Table::ALL.iter().position(|t| *t == self).unwrap_or(0)
    }
}

/// Builds a key from big-endian fixed-width parts.
#[derive(Default)]
pub struct Key(pub Vec<u8>);

impl Key {
    /// A key of `parts`, each 4 bytes big-endian.
    pub fn of(parts: &[u32]) -> Vec<u8> {
        let mut k = Key::default();
        for p in parts {
            k.u32(*p);
        }
        k.0
    }

    /// Appends `v` big-endian.
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }

    /// Appends `s` padded with zeros to `n` bytes (fixed width keeps key order).
    pub fn text(&mut self, s: &[u8], n: usize) -> &mut Self {
        let take = s.len().min(n);
        self.0.extend_from_slice(&s[..take]);
        self.0.resize(self.0.len() + n - take, 0);
        self
    }
}

/// The u32 at byte `at` of a key.
pub fn key_u32(k: &[u8], at: usize) -> Result<u32> {
    k.get(at..at + 4)
        .and_then(|b| b.try_into().ok())
        .map(u32::from_be_bytes)
        .ok_or_else(|| damaged("key"))
}

fn damaged(what: &str) -> BenchError {
    BenchError::Process {
        what: "TPC-C".into(),
        why: format!("a {what} does not decode"),
    }
}

/// Row encoding: fixed-width little-endian numbers and length-prefixed byte strings.
#[derive(Default)]
struct Enc(Vec<u8>);

impl Enc {
    fn i64(mut self, v: i64) -> Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn bytes(mut self, b: &[u8]) -> Self {
        self.0.extend_from_slice(&(b.len() as u16).to_le_bytes());
        self.0.extend_from_slice(b);
        self
    }
}

struct Dec<'a>(&'a [u8]);

impl Dec<'_> {
    fn i64(&mut self) -> Result<i64> {
        let (h, t) = self.0.split_at_checked(8).ok_or_else(|| damaged("row"))?;
        self.0 = t;
        Ok(i64::from_le_bytes(
            h.try_into().map_err(|_| damaged("row"))?,
        ))
    }
    fn bytes(&mut self) -> Result<Vec<u8>> {
        let (h, t) = self.0.split_at_checked(2).ok_or_else(|| damaged("row"))?;
        let n = u16::from_le_bytes([h[0], h[1]]) as usize;
        let (b, t) = t.split_at_checked(n).ok_or_else(|| damaged("row"))?;
        self.0 = t;
        Ok(b.to_vec())
    }
}

/// Declares a row struct of i64 and byte-string fields with its encoding.
macro_rules! row {
    ($(#[$m:meta])* $name:ident { $($f:ident : $k:ident),* $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Debug, Default, PartialEq, Eq)]
        #[allow(missing_docs)]
        pub struct $name { $(pub $f: row!(@ty $k)),* }
        impl $name {
            /// The row's bytes.
            pub fn enc(&self) -> Vec<u8> {
                let e = Enc::default();
                $(let e = row!(@enc e, self.$f, $k);)*
                e.0
            }
            /// The row from its bytes.
            pub fn dec(b: &[u8]) -> Result<Self> {
                let mut d = Dec(b);
                Ok($name { $($f: row!(@dec d, $k)),* })
            }
        }
    };
    (@ty num) => { i64 };
    (@ty text) => { Vec<u8> };
    (@enc $e:ident, $v:expr, num) => { $e.i64($v) };
    (@enc $e:ident, $v:expr, text) => { $e.bytes(&$v) };
    (@dec $d:ident, num) => { $d.i64()? };
    (@dec $d:ident, text) => { $d.bytes()? };
}

row!(
    /// A WAREHOUSE row (money in cents, tax in hundredths of a percent).
    Warehouse { ytd: num, tax: num, name: text, address: text }
);
row!(
    /// A DISTRICT row.
    District { ytd: num, tax: num, next_o_id: num, name: text, address: text }
);
row!(
    /// A CUSTOMER row.
    Customer {
        first: text, middle: text, last: text, credit: text, discount: num, balance: num,
        ytd_payment: num, payment_cnt: num, delivery_cnt: num, credit_lim: num, since: num,
        address: text, data: text,
    }
);
row!(
    /// A HISTORY row.
    History { c_id: num, c_d: num, c_w: num, d: num, w: num, date: num, amount: num, data: text }
);
row!(
    /// An ORDER row (carrier 0: none yet).
    Order { c_id: num, entry_d: num, carrier_id: num, ol_cnt: num, all_local: num }
);
row!(
    /// An ORDER-LINE row (delivery_d 0: not delivered).
    OrderLine { i_id: num, supply_w: num, delivery_d: num, quantity: num, amount: num, dist_info: text }
);
row!(
    /// An ITEM row.
    Item { im_id: num, price: num, name: text, data: text }
);
row!(
    /// A STOCK row (`dist`: the ten S_DIST_xx fields, 24 bytes each).
    Stock { quantity: num, ytd: num, order_cnt: num, remote_cnt: num, dist: text, data: text }
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_round_trip_and_damage_is_an_error() {
        let c = Customer {
            first: b"Ann".to_vec(),
            last: b"BARBARBAR".to_vec(),
            balance: -1000,
            data: vec![7; 400],
            ..Default::default()
        };
        let b = c.enc();
        assert_eq!(Customer::dec(&b).ok(), Some(c));
        assert!(Customer::dec(&b[..b.len() - 1]).is_err());
        assert!(Key::of(&[1, 2]) < Key::of(&[1, 10]));
        assert!(Key::of(&[1, 0xFFFF]) < Key::of(&[2, 0]));
    }
}
