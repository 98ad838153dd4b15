//! `/proc/meminfo`: `Name:   12345 kB` lines.

use std::collections::BTreeMap;

/// The numbers of `/proc/meminfo` by name, as written (kibibytes for the `kB` lines, counts for
/// the `HugePages_*` ones). Lines that do not parse are skipped.
pub fn parse(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|line| {
            let (name, rest) = line.split_once(':')?;
            let number = rest.split_whitespace().next()?.parse().ok()?;
            Some((name.trim().to_owned(), number))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn parses_kib_and_counts() {
        let m = super::parse(
            "MemTotal:       24684148 kB\nHugePages_Total:       0\nbroken line\nX: y kB\n",
        );
        assert_eq!(m["MemTotal"], 24684148);
        assert_eq!(m["HugePages_Total"], 0);
        assert_eq!(m.len(), 2);
    }
}
