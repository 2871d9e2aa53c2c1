//! A transaction's iterator: the database at the transaction's snapshot merged with the
//! transaction's own writes (read-your-own-writes), forward or reverse, within bounds.

use std::iter::Peekable;

use crate::error::Result;
use crate::iter::DbIterator;

/// Rows of a transaction's iterator.
type Row = Result<(Vec<u8>, Vec<u8>)>;

/// The transaction's own writes, in iteration order (`None`: a delete).
type Own = Peekable<std::vec::IntoIter<(Vec<u8>, Option<Vec<u8>>)>>;

/// Iterator over (key, value) pairs of one subtable as a transaction sees them: its own puts
/// and deletes (those made before the iterator was created) over the database at its
/// snapshot.
pub struct TxnIterator {
    base: Peekable<DbIterator>,
    /// The transaction's writes in the bounds, in iteration order (`None`: a delete).
    own: Own,
    reverse: bool,
}

impl TxnIterator {
    pub(crate) fn new(
        base: DbIterator,
        own: Vec<(Vec<u8>, Option<Vec<u8>>)>,
        reverse: bool,
    ) -> TxnIterator {
        TxnIterator {
            base: base.peekable(),
            own: own.into_iter().peekable(),
            reverse,
        }
    }

    /// Whether the transaction's next write comes before (or at) the database's next row.
    fn own_first(&mut self) -> Option<std::cmp::Ordering> {
        let own = self.own.peek()?;
        let Some(Ok((k, _))) = self.base.peek() else {
            // The database is exhausted, or its next row is an error: that comes out first
            // unless the database is done.
            return match self.base.peek() {
                None => Some(std::cmp::Ordering::Less),
                Some(_) => None,
            };
        };
        let ord = own.0.cmp(k);
        Some(if self.reverse { ord.reverse() } else { ord })
    }
}

impl Iterator for TxnIterator {
    type Item = Row;

    fn next(&mut self) -> Option<Row> {
        loop {
            let (key, value) = match self.own_first() {
                Some(std::cmp::Ordering::Less) => self.own.next()?,
                Some(std::cmp::Ordering::Equal) => {
                    self.base.next();
                    self.own.next()?
                }
                Some(std::cmp::Ordering::Greater) | None => return self.base.next(),
            };
            match value {
                Some(v) => return Some(Ok((key, v))),
                // The transaction deleted it: the database's row (if any) was skipped above.
                None => continue,
            }
        }
    }
}
