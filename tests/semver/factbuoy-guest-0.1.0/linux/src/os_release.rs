//! `os-release(5)`: `KEY=value` lines with shell quoting.

use std::collections::BTreeMap;

/// Where os-release lives, in the order systemd reads it.
pub const PATHS: [&str; 2] = ["/etc/os-release", "/usr/lib/os-release"];

/// The variables of an os-release file, names as written (`ID`, `VERSION_ID`, ...), values with
/// their quoting and escapes removed. Lines that are not assignments are skipped.
pub fn parse(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|line| {
            let line = line.trim();
            if line.starts_with('#') {
                return None;
            }
            let (name, value) = line.split_once('=')?;
            let name = name.trim();
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return None;
            }
            Some((name.to_owned(), unquote(value.trim())))
        })
        .collect()
}

/// Shell word unquoting: `"..."` with `\\`, `\"`, `\$` and `` \` `` escapes, `'...'` taken
/// literally, backslash escapes outside quotes.
fn unquote(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut chars = value.chars();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (Some('\''), c) => out.push(c),
            (Some('"'), '\\') => match chars.next() {
                Some(next @ ('\\' | '"' | '$' | '`')) => out.push(next),
                Some(next) => {
                    out.push('\\');
                    out.push(next);
                }
                None => out.push('\\'),
            },
            (None, '\\') => {
                if let Some(next) = chars.next() {
                    out.push(next);
                }
            }
            (None, c) if c.is_whitespace() => break, // a comment or garbage after the value
            (_, c) => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_quoted_and_unquoted_values() {
        let text = "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME='Arch Linux'\nID=debian\n# c\nVERSION=\"a \\\"b\\\" \\$c\"\nBAD LINE\n=x\n";
        let v = parse(text);
        assert_eq!(v["PRETTY_NAME"], "Debian GNU/Linux 12 (bookworm)");
        assert_eq!(v["NAME"], "Arch Linux");
        assert_eq!(v["ID"], "debian");
        assert_eq!(v["VERSION"], "a \"b\" $c");
        assert_eq!(v.len(), 4);
    }
}
