//! Text from a plugin (or an agent) made safe to print on a terminal or into a log.
//!
//! Plugin text is hostile: an escape sequence in a log record can clear the operator's screen,
//! retitle the window or write the clipboard (OSC 52), a carriage return or newline can forge a
//! line, and bidirectional controls can make text read as something else. Every place that
//! prints text a plugin chose passes it through [`printable`].

use std::borrow::Cow;

/// `text` with every control character (C0 including newline and tab, DEL, C1) and every
/// bidirectional control escaped as Rust writes it in a string (`\u{1b}`, `\n`, `\u{202e}`).
/// Text without any is returned as it is, without copying. For text of several lines, escape
/// each line.
pub fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut escaped = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if needs_escape(c) {
            escaped.extend(c.escape_debug());
        } else {
            escaped.push(c);
        }
    }
    Cow::Owned(escaped)
}

/// `text` of several lines for a terminal: each line as [`printable`] shows it, every line after
/// the first indented by four spaces, so that none can pass for a line of its own (a forged
/// `error:`). A traceback stays readable as lines.
pub fn printable_lines(text: &str) -> String {
    text.lines()
        .map(printable)
        .collect::<Vec<_>>()
        .join("\n    ")
}

fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_what_a_terminal_acts_on_and_keeps_the_rest() {
        let attack = "\u{1b}]52;c;aGk=\u{7}\u{1b}[2J\r\nok\u{9b}31m\u{202e}txt\u{7f}";
        let shown = printable(attack);
        assert_eq!(
            shown,
            "\\u{1b}]52;c;aGk=\\u{7}\\u{1b}[2J\\r\\nok\\u{9b}31m\\u{202e}txt\\u{7f}"
        );
        assert!(!shown.chars().any(needs_escape));
        assert!(matches!(printable("plain é ✓ text"), Cow::Borrowed(_)));
    }

    #[test]
    fn lines_stay_lines_and_none_can_pass_for_one_of_its_own() {
        assert_eq!(
            printable_lines("Traceback:\n  File \"app.py\"\r\nerror: forged\u{1b}[2J"),
            "Traceback:\n      File \"app.py\"\n    error: forged\\u{1b}[2J"
        );
        assert_eq!(printable_lines("one line"), "one line");
    }
}
