//! Text from a plugin, an agent or a bundle made safe to print on a terminal or into a log.
//!
//! Such text is hostile: an escape sequence in a log record can clear the operator's screen,
//! retitle the window or write the clipboard (OSC 52), a carriage return or newline can forge a
//! line, bidirectional controls can make text read as something else, and an invisible
//! character (a zero-width space, a Hangul filler) makes two node names look the same. Every
//! place that prints text another chose passes it through [`printable`]; tables escape each
//! cell before they measure it (the CLI's `table` module), so that columns stay aligned.

use std::borrow::Cow;
use std::fmt::Write;

use unicode_general_category::{GeneralCategory, get_general_category};

/// `text` with what a terminal acts on or draws as nothing escaped as Rust writes it in a
/// string (`\n`, `\u{1b}`, `\u{200b}`): control characters (C0 including newline and tab, DEL,
/// C1), format characters (Unicode's whole Cf category: zero-width spaces and joiners,
/// bidirectional controls, the soft hyphen, byte order marks, tags), the line and paragraph
/// separators, and the other characters Unicode calls default-ignorable (Hangul fillers,
/// variation selectors). Text without any is returned as it is, without copying, and what this
/// returns passes through it again unchanged. For text of several lines, escape each line.
pub fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_escaped) {
        return Cow::Borrowed(text);
    }
    let mut escaped = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            _ if !is_escaped(c) => escaped.push(c),
            '\t' | '\n' | '\r' | '\0' => escaped.extend(c.escape_debug()),
            // Not `escape_debug` for the rest: it shows a Hangul filler as it is.
            _ => {
                let _ = write!(escaped, "\\u{{{:x}}}", u32::from(c));
            }
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

/// Whether [`printable`] escapes `c`.
fn is_escaped(c: char) -> bool {
    // Most text is ASCII, where only C0 and DEL are escaped: answered without the table search.
    if c.is_ascii() {
        return c.is_ascii_control();
    }
    escaped_by_category(c)
}

/// What [`is_escaped`] says of any character, from Unicode's tables.
fn escaped_by_category(c: char) -> bool {
    is_control_or_format(c) || DRAWN_AS_NOTHING.iter().any(|range| range.contains(&c))
}

/// Whether Unicode's general category makes `c` a control (C0, DEL, C1), format (Cf: zero-width
/// and bidirectional controls among them), line or paragraph separator character.
pub(crate) fn is_control_or_format(c: char) -> bool {
    matches!(
        get_general_category(c),
        GeneralCategory::Control
            | GeneralCategory::Format
            | GeneralCategory::LineSeparator
            | GeneralCategory::ParagraphSeparator
    )
}

/// The characters of Unicode's `Default_Ignorable_Code_Point` property (DerivedCoreProperties.txt)
/// outside the Cf category, which `is_escaped` covers: a renderer draws them as nothing, so a
/// name with one looks like the name without.
const DRAWN_AS_NOTHING: &[std::ops::RangeInclusive<char>] = &[
    // Combining grapheme joiner.
    '\u{034f}'..='\u{034f}',
    // Hangul choseong and jungseong fillers.
    '\u{115f}'..='\u{1160}',
    // Khmer inherent vowels.
    '\u{17b4}'..='\u{17b5}',
    // Mongolian free variation selectors.
    '\u{180b}'..='\u{180d}',
    '\u{180f}'..='\u{180f}',
    // Reserved among the invisible operators.
    '\u{2065}'..='\u{2065}',
    // Hangul filler, halfwidth Hangul filler.
    '\u{3164}'..='\u{3164}',
    '\u{ffa0}'..='\u{ffa0}',
    // Variation selectors 1 to 16.
    '\u{fe00}'..='\u{fe0f}',
    // Reserved before the specials.
    '\u{fff0}'..='\u{fff8}',
    // The tags block's unassigned code points and variation selectors 17 to 256.
    '\u{e0000}'..='\u{e0fff}',
];

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
        assert!(!shown.chars().any(is_escaped));
        assert!(matches!(printable("plain é ✓ text"), Cow::Borrowed(_)));
        // Emoji, CJK, combining accents and every kind of space are drawn: kept.
        let drawn = "日本語 e\u{301} \u{1f600} a\u{a0}b\u{2003}c";
        assert!(matches!(printable(drawn), Cow::Borrowed(_)));
    }

    #[test]
    fn invisible_and_format_characters_are_escaped_so_look_alike_names_differ() {
        for (invisible, shown) in [
            ('\u{200b}', "\\u{200b}"),   // zero-width space
            ('\u{200c}', "\\u{200c}"),   // zero-width non-joiner
            ('\u{200d}', "\\u{200d}"),   // zero-width joiner
            ('\u{2060}', "\\u{2060}"),   // word joiner
            ('\u{feff}', "\\u{feff}"),   // zero-width no-break space (byte order mark)
            ('\u{ad}', "\\u{ad}"),       // soft hyphen
            ('\u{2028}', "\\u{2028}"),   // line separator
            ('\u{2029}', "\\u{2029}"),   // paragraph separator
            ('\u{e0041}', "\\u{e0041}"), // tag latin capital letter A
            ('\u{3164}', "\\u{3164}"),   // Hangul filler
            ('\u{fe0f}', "\\u{fe0f}"),   // variation selector-16
            ('\u{34f}', "\\u{34f}"),     // combining grapheme joiner
        ] {
            let name = format!("web-{invisible}1");
            assert_eq!(printable(&name), format!("web-{shown}1"), "{invisible:?}");
            assert_ne!(printable(&name), printable("web-1"));
        }
    }

    #[test]
    fn the_ascii_shortcut_escapes_what_the_unicode_tables_escape() {
        for c in (0..=0x7f).filter_map(char::from_u32) {
            assert_eq!(is_escaped(c), escaped_by_category(c), "{c:?}");
        }
    }

    #[test]
    fn every_escape_is_an_escape_sequence_that_escaping_again_leaves_alone() {
        for c in (0..=0x10ffff)
            .filter_map(char::from_u32)
            .filter(|c| is_escaped(*c))
        {
            let once = printable(c.encode_utf8(&mut [0; 4])).into_owned();
            assert!(once.starts_with('\\'), "{c:?}: {once}");
            assert_eq!(printable(&once), once, "{c:?}");
        }
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
