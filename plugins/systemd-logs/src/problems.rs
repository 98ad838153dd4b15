//! Warnings about damaged or unreadable parts of the journal, collected here and sent to the
//! host as progress warnings. Each file reports its first few problems in full and then only a
//! count, so a badly damaged journal cannot flood the operator (or the host's record budget).

use std::collections::BTreeMap;

/// Problems reported in full per file; later ones are counted.
const SHOWN_PER_FILE: usize = 8;

#[derive(Default)]
pub struct Problems {
    pending: Vec<String>,
    shown: BTreeMap<String, usize>,
    hidden: BTreeMap<String, u64>,
}

impl Problems {
    /// Records a problem with `file` (a path, or a short subject such as `parameters`).
    pub fn warn(&mut self, file: &str, message: impl AsRef<str>) {
        let shown = self.shown.entry(file.to_owned()).or_default();
        if *shown < SHOWN_PER_FILE {
            *shown += 1;
            self.pending.push(format!("{file}: {}", message.as_ref()));
        } else {
            *self.hidden.entry(file.to_owned()).or_default() += 1;
        }
    }

    /// The warnings not yet taken.
    pub fn take(&mut self) -> Vec<String> {
        std::mem::take(&mut self.pending)
    }

    /// Adds the counts of problems not shown, at the end of a run.
    pub fn finish(&mut self) {
        for (file, count) in std::mem::take(&mut self.hidden) {
            self.pending.push(format!(
                "{file}: {count} more problems of the same kinds, not shown"
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_each_file_and_counts_the_rest() {
        let mut problems = Problems::default();
        for n in 0..20 {
            problems.warn("a.journal", format!("problem {n}"));
        }
        problems.warn("b.journal", "one");
        let shown = problems.take();
        assert_eq!(shown.len(), SHOWN_PER_FILE + 1);
        assert_eq!(shown[0], "a.journal: problem 0");
        problems.finish();
        assert_eq!(
            problems.take(),
            ["a.journal: 12 more problems of the same kinds, not shown"]
        );
    }
}
