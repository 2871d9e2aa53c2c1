//! Optional parts of this build (cargo features) and the check every command runs on its
//! targets before it measures anything: a target the user named that needs a part this
//! build lacks is refused with the feature to enable; a default target that needs one is
//! left out, and the run says which and why.

use std::fmt::Debug;

use crate::error::{BenchError, Result};

/// An optional part of `nacre-bench`, enabled by the cargo feature of the same name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Feature {
    /// Embedded RocksDB (Debian's librocksdb-dev).
    Rocksdb,
}

impl Feature {
    /// The cargo feature's name.
    pub fn name(self) -> &'static str {
        match self {
            Feature::Rocksdb => "rocksdb",
        }
    }

    /// What building with the feature needs on the machine.
    pub fn needs(self) -> &'static str {
        match self {
            Feature::Rocksdb => "Debian's librocksdb-dev",
        }
    }

    /// Whether this build has it.
    pub fn enabled(self) -> bool {
        match self {
            Feature::Rocksdb => cfg!(feature = "rocksdb"),
        }
    }
}

/// The targets a command runs, and the default ones it left out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selection<T> {
    /// What runs, in the order asked for.
    pub run: Vec<T>,
    /// Default targets this build cannot run, with the feature each needs.
    pub left_out: Vec<(T, Feature)>,
}

impl<T: Debug> Selection<T> {
    /// One line saying what was left out and why, if anything was.
    pub fn left_out_note(&self) -> Option<String> {
        let first = self.left_out.first()?;
        let names: Vec<String> = self
            .left_out
            .iter()
            .map(|(t, _)| format!("{t:?}"))
            .collect();
        let f = first.1;
        Some(format!(
            "left out {}: this build has no `{}` feature (rebuild with `--features {}`, which \
             needs {})",
            names.join(", "),
            f.name(),
            f.name(),
            f.needs()
        ))
    }
}

/// Picks the targets to run: `named` when the user named some (each must be runnable, or
/// the whole command is refused before anything runs), else the `defaults` this build can
/// run. `needs` says which feature a target needs; `enabled` which features this build has
/// (a parameter so both kinds of build can be tested).
pub fn select<T: Copy + Debug>(
    option: &'static str,
    named: Option<&[T]>,
    defaults: &[T],
    needs: impl Fn(T) -> Option<Feature>,
    enabled: impl Fn(Feature) -> bool,
) -> Result<Selection<T>> {
    if let Some(named) = named {
        if let Some((t, f)) = named
            .iter()
            .find_map(|&t| needs(t).filter(|&f| !enabled(f)).map(|f| (t, f)))
        {
            return Err(BenchError::MissingFeature {
                target: format!("{t:?}"),
                option,
                feature: f.name(),
                needs: f.needs(),
            });
        }
        return Ok(Selection {
            run: named.to_vec(),
            left_out: Vec::new(),
        });
    }
    let mut sel = Selection {
        run: Vec::new(),
        left_out: Vec::new(),
    };
    for &t in defaults {
        match needs(t).filter(|&f| !enabled(f)) {
            Some(f) => sel.left_out.push((t, f)),
            None => sel.run.push(t),
        }
    }
    Ok(sel)
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use super::*;

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum T {
        Nacre,
        Rocks,
    }

    fn needs(t: T) -> Option<Feature> {
        (t == T::Rocks).then_some(Feature::Rocksdb)
    }

    #[test]
    fn named_targets_this_build_lacks_are_refused_naming_the_feature() {
        let e = select("--targets", Some(&[T::Nacre, T::Rocks]), &[], needs, |_| {
            false
        })
        .expect_err("refused");
        let text = e.to_string();
        assert!(matches!(e, BenchError::MissingFeature { .. }), "{e:?}");
        for part in [
            "Rocks",
            "`rocksdb` feature",
            "--features rocksdb",
            "--targets",
        ] {
            assert!(text.contains(part), "{part:?} missing from {text:?}");
        }
    }

    #[test]
    fn named_targets_run_as_named_when_the_build_has_them() {
        let sel = select("--targets", Some(&[T::Rocks, T::Nacre]), &[], needs, |_| {
            true
        })
        .expect("ok");
        assert_eq!(sel.run, [T::Rocks, T::Nacre]);
        assert!(sel.left_out.is_empty() && sel.left_out_note().is_none());
        let sel = select("--targets", Some(&[T::Nacre]), &[], needs, |_| false).expect("ok");
        assert_eq!(sel.run, [T::Nacre]);
    }

    #[test]
    fn defaults_keep_what_this_build_has_and_say_what_they_left_out() {
        let defaults = [T::Nacre, T::Rocks, T::Nacre];
        let sel = select("--targets", None, &defaults, needs, |_| false).expect("ok");
        assert_eq!(sel.run, [T::Nacre, T::Nacre]);
        assert_eq!(sel.left_out, [(T::Rocks, Feature::Rocksdb)]);
        let note = sel.left_out_note().expect("note");
        assert!(
            note.contains("Rocks") && note.contains("`rocksdb`"),
            "{note}"
        );
        let sel = select("--targets", None, &defaults, needs, |_| true).expect("ok");
        assert_eq!(sel.run, defaults);
        assert!(sel.left_out_note().is_none());
    }

    #[test]
    fn this_build_reports_its_own_features() {
        assert_eq!(Feature::Rocksdb.enabled(), cfg!(feature = "rocksdb"));
    }
}
