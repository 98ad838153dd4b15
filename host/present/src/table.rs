//! Tables as every command prints them: rows in aligned columns, the last column not padded;
//! on a terminal, optionally fitted to its width by cutting the widest cells. And the small
//! pieces of text tables are made of: cut cells, counted nouns, sizes in human units.
//!
//! Cells hold what others chose (node names, fact values, agent versions), so each is made
//! printable ([`factbuoy_protocol::text::printable`]) before it is measured: a control or an
//! invisible character is shown escaped, and the columns after it stay aligned.

use factbuoy_protocol::text::printable;

/// The narrowest a column is cut to when a table is fitted to the terminal.
const MIN_COLUMN_CHARS: usize = 12;

/// Rows in aligned columns, two spaces apart, each line indented by `indent` spaces.
pub fn aligned(rows: &[Vec<String>], indent: usize) -> Vec<String> {
    layout(rows, indent, false)
}

/// [`aligned`], and on a terminal the widest columns are cut (cells ending in `…`) until the
/// lines fit its width; `-o json` has every value whole.
pub fn fitted(rows: &[Vec<String>], indent: usize) -> Vec<String> {
    layout(rows, indent, true)
}

fn layout(rows: &[Vec<String>], indent: usize, fit: bool) -> Vec<String> {
    let rows: Vec<Vec<_>> = rows
        .iter()
        .map(|row| row.iter().map(|cell| printable(cell)).collect())
        .collect();
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .map(|r| r.get(c).map_or(0, |s| s.chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    if fit && let Some((_, terminal)) = console::Term::stdout().size_checked() {
        let room = usize::from(terminal).saturating_sub(indent + 2 * columns.saturating_sub(1));
        while widths.iter().sum::<usize>() > room {
            let (widest, width) = widths
                .iter()
                .copied()
                .enumerate()
                .max_by_key(|(_, w)| *w)
                .unwrap_or_default();
            if width <= MIN_COLUMN_CHARS {
                break;
            }
            widths[widest] -= 1;
        }
    }
    let margin = " ".repeat(indent);
    rows.iter()
        .map(|row| {
            let line = row
                .iter()
                .zip(&widths)
                .map(|(cell, width)| format!("{:width$}", cut(cell, *width)))
                .collect::<Vec<_>>()
                .join("  ");
            format!("{margin}{}", line.trim_end())
        })
        .collect()
}

/// `text` cut to at most `width` characters, the last of them `…` when cut.
pub fn cut(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    let kept: String = text.chars().take(width.saturating_sub(1)).collect();
    format!("{kept}…")
}

/// `1 node`, `2 nodes`.
pub fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// A byte count for people: `812 B`, `1.5 MiB`.
pub fn bytes(count: u64) -> String {
    bytesize::ByteSize::b(count).display().iec().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_and_the_last_is_not_padded() {
        let rows = vec![
            vec![
                "NAME".to_owned(),
                "LAST SEEN".to_owned(),
                "AGENT".to_owned(),
            ],
            vec![
                "a-much-longer-name".to_owned(),
                "never".to_owned(),
                "-".to_owned(),
            ],
        ];
        assert_eq!(
            aligned(&rows, 0),
            [
                "NAME                LAST SEEN  AGENT",
                "a-much-longer-name  never      -"
            ]
        );
        assert_eq!(aligned(&rows, 2)[1], "  a-much-longer-name  never      -");
    }

    #[test]
    fn cells_are_escaped_before_they_are_measured() {
        let rows = vec![
            vec!["NODE".to_owned(), "SETUP".to_owned()],
            vec!["web-1".to_owned(), "passed".to_owned()],
            vec!["web-\u{200b}1".to_owned(), "failed\u{1b}[2J".to_owned()],
        ];
        assert_eq!(
            aligned(&rows, 0),
            [
                "NODE           SETUP",
                "web-1          passed",
                "web-\\u{200b}1  failed\\u{1b}[2J",
            ]
        );
    }

    #[test]
    fn sizes_are_for_people() {
        assert_eq!(bytes(812), "812 B");
        assert_eq!(bytes(1536 * 1024), "1.5 MiB");
        assert_eq!(count(1, "node"), "1 node");
        assert_eq!(count(2, "node"), "2 nodes");
        assert_eq!(cut("abcdef", 4), "abc…");
    }
}
