//! Document handles that say nothing about other documents. A document's row id counts up
//! across every collection, the sensitive ones included, so handles made of it (`D1`, `D2`,
//! `D5`…) let a run with no reach into a sensitive collection count its documents from the
//! gaps, and try the missing numbers. A handle is instead the id through a keyed permutation
//! of 40-bit numbers (a four-round Feistel network whose round function mixes the id's half
//! with the store's own random key, kept in the database), written as `D-` and 10 hex digits:
//! `D-5c0e91a2f7`. The same document keeps its handle; another store has other handles.

use rusqlite::Connection;

use super::{DataError, Result};

/// Bits of an id a handle holds (ids beyond are refused, not wrapped).
const BITS: u32 = 40;
const HALF: u32 = BITS / 2;
const HALF_MASK: u64 = (1 << HALF) - 1;
const ROUNDS: u64 = 4;

/// The store's handle key.
#[derive(Clone, Copy, Debug)]
pub struct Handles {
    key: [u64; 2],
}

/// splitmix64's finaliser: a good mix of a 64-bit word.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Handles {
    /// The key in `conn`'s `meta` table, made (from SQLite's random source) on first use.
    pub fn load(conn: &Connection) -> rusqlite::Result<Handles> {
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
             INSERT OR IGNORE INTO meta (key, value) VALUES ('handle_key', hex(randomblob(16)));",
        )?;
        let hex: String =
            conn.query_row("SELECT value FROM meta WHERE key = 'handle_key'", [], |r| {
                r.get(0)
            })?;
        let word = |range: std::ops::Range<usize>| {
            hex.get(range)
                .and_then(|h| u64::from_str_radix(h, 16).ok())
                .unwrap_or(0)
        };
        Ok(Handles {
            key: [word(0..16), word(16..32)],
        })
    }

    fn round(&self, half: u64, round: u64) -> u64 {
        mix(half ^ self.key[(round & 1) as usize] ^ round.wrapping_mul(0x9e37_79b9_7f4a_7c15))
            & HALF_MASK
    }

    /// The handle of document `id`.
    pub fn show(&self, id: i64) -> String {
        let n = id as u64 & ((1 << BITS) - 1);
        let (mut l, mut r) = (n >> HALF, n & HALF_MASK);
        for round in 0..ROUNDS {
            (l, r) = (r, l ^ self.round(r, round));
        }
        format!("D-{:010x}", (l << HALF) | r)
    }

    /// The document id of `handle`.
    pub fn parse(&self, handle: &str) -> Result<i64> {
        let bad = || DataError::InvalidArgs {
            message: format!("{handle:?} is not a document handle"),
            hint: "handles look like D-5c0e91a2f7: take one from search_data or list_data".into(),
        };
        let hex = handle
            .strip_prefix("D-")
            .or_else(|| handle.strip_prefix("d-"))
            .filter(|h| h.len() == 10)
            .ok_or_else(bad)?;
        let n = u64::from_str_radix(hex, 16).map_err(|_| bad())?;
        let (mut l, mut r) = (n >> HALF, n & HALF_MASK);
        for round in (0..ROUNDS).rev() {
            (l, r) = (r ^ self.round(l, round), l);
        }
        let id = ((l << HALF) | r) as i64;
        if id <= 0 {
            return Err(bad());
        }
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_go_both_ways_and_hide_the_order() {
        let conn = Connection::open_in_memory().unwrap();
        let h = Handles::load(&conn).unwrap();
        // The key is kept: loading again gives the same handles.
        let again = Handles::load(&conn).unwrap();
        for id in [1, 2, 3, 42, 1_000_000, (1 << 40) - 1] {
            let shown = h.show(id);
            assert_eq!(shown, again.show(id));
            assert!(shown.starts_with("D-") && shown.len() == 12, "{shown}");
            assert_eq!(h.parse(&shown).unwrap(), id, "{shown}");
        }
        // Neighbours are not neighbours: their handles share no long prefix.
        let (a, b) = (h.show(4), h.show(5));
        assert_ne!(a[..6], b[..6], "{a} {b}");
        // Another store, other handles.
        let other = Handles::load(&Connection::open_in_memory().unwrap()).unwrap();
        assert_ne!(h.show(1), other.show(1));
        // The old form and garbage are refused with the form to use.
        for bad in ["D42", "D-", "D-zzzzzzzzzz", "D-123", "42"] {
            let e = h.parse(bad).unwrap_err();
            assert!(
                e.to_string().contains("D-5c0e91a2f7") || format!("{e:?}").contains("D-5c0e91a2f7"),
                "{bad}: {e:?}"
            );
        }
    }
}
