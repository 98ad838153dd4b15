//! `/etc/resolv.conf`: the resolver's name servers, search list and options.

/// The directives of a resolv.conf in file order: keyword and its arguments. Comment lines
/// (`#`, `;`) and blank lines are skipped; how repeated directives combine is the caller's
/// choice (libc and Ansible differ).
pub fn directives(text: &str) -> Vec<(String, Vec<String>)> {
    text.lines()
        .filter(|line| !(line.starts_with('#') || line.starts_with(';') || line.trim().is_empty()))
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let keyword = words.next()?.to_owned();
            Some((keyword, words.map(str::to_owned).collect()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn directives_in_order() {
        let d = super::directives(
            "# generated\nnameserver 10.0.0.1\n; x\n\nsearch a.example b.example\noptions ndots:2 edns0\n",
        );
        assert_eq!(d.len(), 3);
        assert_eq!(d[0], ("nameserver".into(), vec!["10.0.0.1".into()]));
        assert_eq!(d[2].1, ["ndots:2", "edns0"]);
    }
}
