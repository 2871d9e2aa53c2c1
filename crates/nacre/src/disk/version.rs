//! The checks of a tree's version files that lsm-tree 3.1.10 does not make. It records each
//! tree version in a file `v<N>` (levels, runs, and per table its id, checksum and
//! `global_seqno`, which is added to every sequence number in the table) and writes
//! `current` as `N u64 | xxh3-128 of v<N> u128 | checksum type u8 (0: xxh3)`, little-endian;
//! but it opens `v<N>` without checking that checksum, so a flipped byte in a table's
//! `global_seqno` hides the table's keys from every read, silently. Nacre checks both files
//! before lsm-tree opens the tree (lsm-tree's open also deletes every table file the version
//! does not name) and again in `Db::verify`.
//!
//! Invariants:
//! - V1: a tree directory with `current` opens only if `current` is 25 bytes, names checksum
//!   type 0, and names a version file whose xxh3-128 is the one `current` records.
//! - V2: a tree directory without `current` holds no table file and no version file but
//!   `v0` (lsm-tree creates a tree by writing `v0`, then `current`; a crash in between leaves
//!   `v0` alone). Otherwise lsm-tree would start a new, empty tree over the old tables.
//! - V3: every table of an open tree has `global_seqno` 0: Nacre writes its own sequence
//!   number into every entry, and lsm-tree sets a global one only when ingesting, which Nacre
//!   never does.

use std::path::Path;

use crate::error::{Error, Result};

/// The file naming a tree's version and its checksum.
const CURRENT: &str = "current";
/// `current`'s length: id u64, checksum u128, checksum type u8.
const CURRENT_LEN: usize = 25;
/// The only checksum type lsm-tree 3.1.10 writes (xxh3).
const XXH3: u8 = 0;

/// Checks V1 and V2 in the tree directory `tree` (the files on disk, not what an open tree
/// holds in memory): returns the id of the version `current` names, or `None` for a tree
/// not yet created.
pub(crate) fn check_files(tree: &Path) -> Result<Option<u64>> {
    let current = tree.join(CURRENT);
    let bytes = match std::fs::read(&current) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            check_uncreated(tree)?;
            return Ok(None);
        }
        Err(e) => return Err(Error::disk("reading the tree's current version", tree, e)),
    };
    let (Some(id), Some(want), Some(&kind), CURRENT_LEN) = (
        bytes
            .get(..8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes),
        bytes
            .get(8..24)
            .and_then(|b| b.try_into().ok())
            .map(u128::from_le_bytes),
        bytes.get(24),
        bytes.len(),
    ) else {
        return Err(Error::corrupt(format!(
            "disk levels: {} holds {} bytes, not {CURRENT_LEN} (a version id, its checksum \
             and the checksum's type)",
            current.display(),
            bytes.len()
        )));
    };
    if kind != XXH3 {
        return Err(Error::corrupt(format!(
            "disk levels: {} names checksum type {kind}, not {XXH3} (xxh3), for version {id}",
            current.display()
        )));
    }
    let file = tree.join(format!("v{id}"));
    let body = match std::fs::read(&file) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::corrupt(format!(
                "disk levels: {} names version file {}, which does not exist",
                current.display(),
                file.display()
            )))
        }
        Err(e) => return Err(Error::disk("reading the tree's version file", tree, e)),
    };
    let got = xxhash_rust::xxh3::xxh3_128(&body);
    if got != want {
        return Err(Error::corrupt(format!(
            "disk levels: version file {} fails its checksum: its xxh3-128 is {got:032x}, \
             {} records {want:032x}",
            file.display(),
            current.display()
        )));
    }
    Ok(Some(id))
}

/// V2: a directory without `current` holds no tables and no version but `v0`.
fn check_uncreated(tree: &Path) -> Result<()> {
    let list = |dir: &Path| -> Result<Vec<String>> {
        match std::fs::read_dir(dir) {
            Ok(rd) => rd
                .map(|e| {
                    e.map(|e| e.file_name().to_string_lossy().into_owned())
                        .map_err(|e| Error::disk("listing the tree's directory", tree, e))
                })
                .collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(Error::disk("listing the tree's directory", tree, e)),
        }
    };
    let versions: Vec<String> = list(tree)?
        .into_iter()
        .filter(|n| n.starts_with('v') && n[1..].parse::<u64>().is_ok_and(|v| v > 0))
        .collect();
    let tables = list(&tree.join("tables"))?;
    if versions.is_empty() && tables.is_empty() {
        return Ok(());
    }
    Err(Error::corrupt(format!(
        "disk levels: {} is missing, but {} holds {} version files ({}) and {} table files",
        tree.join(CURRENT).display(),
        tree.display(),
        versions.len(),
        versions.join(", "),
        tables.len()
    )))
}

/// V3 for an open tree's version `id`, given each table's id and `global_seqno`: a line per
/// table whose `global_seqno` is not 0.
pub(crate) fn check_global_seqnos(
    tree: &Path,
    id: u64,
    tables: impl Iterator<Item = (u64, u64)>,
) -> Vec<String> {
    tables
        .filter(|&(_, global)| global != 0)
        .map(|(table, global)| {
            format!(
                "disk levels: table {} has global sequence number {global} in version file {} \
                 (Nacre writes none: every entry carries its own)",
                tree.join("tables").join(table.to_string()).display(),
                tree.join(format!("v{id}")).display()
            )
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn the_checksum_is_lsm_trees_and_each_damage_is_named() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("t");
        let counter = lsm_tree::SequenceNumberCounter::new(0);
        {
            let tree = lsm_tree::Config::new(&path, counter.clone(), counter.clone())
                .open()
                .expect("create");
            drop(tree);
        }
        let id = check_files(&path).expect("a whole tree").expect("created");
        let current = path.join(CURRENT);
        let good = std::fs::read(&current).expect("current");
        let err = |c: &[u8]| {
            std::fs::write(&current, c).expect("write");
            let e = check_files(&path).expect_err("damage found").to_string();
            std::fs::write(&current, &good).expect("restore");
            e
        };
        let mut c = good.clone();
        c[24] = 1;
        assert!(err(&c).contains("checksum type 1"), "{}", err(&c));
        c = good.clone();
        c[0] ^= 0x40;
        assert!(err(&c).contains("does not exist"), "{}", err(&c));
        c = good.clone();
        c[9] ^= 1;
        assert!(err(&c).contains("fails its checksum"), "{}", err(&c));
        assert!(err(&good[..24]).contains("holds 24 bytes"));
        // A version file that lost `current`: not a new tree.
        std::fs::remove_file(&current).expect("rm");
        std::fs::copy(path.join(format!("v{id}")), path.join("v3")).expect("copy");
        let e = check_files(&path)
            .expect_err("v3 without current")
            .to_string();
        assert!(e.contains("v3") && e.contains("missing"), "{e}");
        std::fs::remove_file(path.join("v3")).expect("rm");
        assert_eq!(
            check_files(&path).expect("v0 alone is a tree being created"),
            None
        );
    }
}
