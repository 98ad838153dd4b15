//! A row of a table artifact read for SQLite: fields and values borrowed from the line where
//! JSON allows it, instead of a map of owned strings and values made for each row and dropped;
//! and batches of such rows, handed from the thread reading the bundle to the one writing.

use std::borrow::Cow;
use std::fmt;

use rusqlite::types::{ToSql, ToSqlOutput, ValueRef};
use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{
    self, Deserialize, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor,
};
use serde_json::Value;

/// One row: its fields in name order, the last of a field given twice winning, as in a
/// `serde_json::Map` read from the same line (so the columns come out as they always have).
pub(super) struct Row<'a>(Vec<(Cow<'a, str>, Cell<'a>)>);

impl Row<'_> {
    /// The fields, in name order.
    pub(super) fn fields(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(field, _)| field.as_ref())
    }
}

/// A JSON value as SQLite holds it: numbers as integers or reals, booleans as 0 and 1, text as
/// text, objects and arrays as their JSON text (as `serde_json::Value` writes them).
#[derive(Debug, PartialEq)]
pub(super) enum Cell<'a> {
    Null,
    Integer(i64),
    Real(f64),
    Text(Cow<'a, str>),
}

impl ToSql for Cell<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match self {
            Cell::Null => ValueRef::Null,
            Cell::Integer(i) => ValueRef::Integer(*i),
            Cell::Real(r) => ValueRef::Real(*r),
            Cell::Text(text) => ValueRef::Text(text.as_bytes()),
        }))
    }
}

impl<'de> Deserialize<'de> for Row<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> Visitor<'de> for Fields {
            type Value = Row<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                // As `serde_json::Map` says it.
                f.write_str("a map")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Row<'de>, A::Error> {
                // Room for most rows' fields: one allocation a row.
                let mut fields = Vec::with_capacity(16);
                while let Some((Text(field), cell)) = map.next_entry()? {
                    fields.push((field, cell));
                }
                if !fields.is_sorted_by(|(a, _), (b, _)| a < b) {
                    // Stable: of a field given twice, the later stays later.
                    fields.sort_by(|(a, _), (b, _)| a.cmp(b));
                    fields.dedup_by(|later, kept| {
                        let twice = later.0 == kept.0;
                        if twice {
                            std::mem::swap(later, kept);
                        }
                        twice
                    });
                }
                Ok(Row(fields))
            }
        }
        deserializer.deserialize_map(Fields)
    }
}

/// [`Batch::reader`].
struct Reader<'b>(&'b mut Batch);

impl<'de> DeserializeSeed<'de> for Reader<'_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Reader<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        // As `serde_json::Map` says it.
        f.write_str("a map")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        let batch = self.0;
        let (cells, text) = (batch.cells.len(), batch.text.len());
        let mut read = 0;
        let mut same = true;
        while let Some(Text(field)) = map.next_key()? {
            if same && batch.fields.get(read).is_some_and(|f| *f == field) {
                read += 1;
                let cell: Cell<'de> = map.next_value()?;
                batch.push_cell(cell);
            } else {
                // Read on all the same: an error further on is the line's error.
                same = false;
                map.next_value::<IgnoredAny>()?;
            }
        }
        if same && read == batch.fields.len() {
            batch.rows += 1;
            Ok(true)
        } else {
            batch.cells.truncate(cells);
            batch.text.truncate(text);
            Ok(false)
        }
    }
}

/// A string, borrowed from the input unless it had escapes.
struct Text<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Chars;
        impl<'de> Visitor<'de> for Chars {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, text: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(text)))
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(text.to_owned())))
            }
            fn visit_string<E: de::Error>(self, text: String) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(text)))
            }
        }
        deserializer.deserialize_str(Chars)
    }
}

impl<'de> Deserialize<'de> for Cell<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Any;
        impl<'de> Visitor<'de> for Any {
            type Value = Cell<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_unit<E: de::Error>(self) -> Result<Cell<'de>, E> {
                Ok(Cell::Null)
            }
            fn visit_bool<E: de::Error>(self, b: bool) -> Result<Cell<'de>, E> {
                Ok(Cell::Integer(i64::from(b)))
            }
            fn visit_i64<E: de::Error>(self, i: i64) -> Result<Cell<'de>, E> {
                Ok(Cell::Integer(i))
            }
            fn visit_u64<E: de::Error>(self, u: u64) -> Result<Cell<'de>, E> {
                // Beyond SQLite's integers: a real, as `serde_json::Value::as_f64` gives it.
                Ok(i64::try_from(u).map_or(Cell::Real(u as f64), Cell::Integer))
            }
            fn visit_f64<E: de::Error>(self, r: f64) -> Result<Cell<'de>, E> {
                Ok(Cell::Real(r))
            }
            fn visit_borrowed_str<E: de::Error>(self, text: &'de str) -> Result<Cell<'de>, E> {
                Ok(Cell::Text(Cow::Borrowed(text)))
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Cell<'de>, E> {
                Ok(Cell::Text(Cow::Owned(text.to_owned())))
            }
            fn visit_string<E: de::Error>(self, text: String) -> Result<Cell<'de>, E> {
                Ok(Cell::Text(Cow::Owned(text)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, items: A) -> Result<Cell<'de>, A::Error> {
                let value = Value::deserialize(SeqAccessDeserializer::new(items))?;
                Ok(Cell::Text(Cow::Owned(value.to_string())))
            }
            fn visit_map<A: MapAccess<'de>>(self, fields: A) -> Result<Cell<'de>, A::Error> {
                let value = Value::deserialize(MapAccessDeserializer::new(fields))?;
                Ok(Cell::Text(Cow::Owned(value.to_string())))
            }
        }
        deserializer.deserialize_any(Any)
    }
}

/// Rows with the same fields, read on the thread that reads the bundle and written on the
/// other: every text in one string, the values one row after another.
pub(super) struct Batch {
    fields: Vec<String>,
    rows: usize,
    cells: Vec<Stored>,
    text: String,
}

/// A [`Cell`] in a [`Batch`]: text as its bounds in the batch's string.
enum Stored {
    Null,
    Integer(i64),
    Real(f64),
    Text(usize, usize),
}

/// How much a batch holds before it is handed over: a few hundred kilobytes.
const BATCH_TEXT_BYTES: usize = 256 * 1024;
const BATCH_CELLS: usize = 16 * 1024;

impl Batch {
    /// A batch of `row` and the rows with its fields that follow.
    pub(super) fn of(row: Row<'_>) -> Batch {
        let mut batch = Batch {
            fields: row.fields().map(str::to_owned).collect(),
            rows: 0,
            cells: Vec::new(),
            text: String::new(),
        };
        batch.push(row);
        batch
    }

    /// Adds `row`, which has this batch's fields.
    fn push(&mut self, row: Row<'_>) {
        debug_assert!(row.fields().eq(self.fields.iter().map(String::as_str)));
        for (_, cell) in row.0 {
            self.push_cell(cell);
        }
        self.rows += 1;
    }

    fn push_cell(&mut self, cell: Cell<'_>) {
        self.cells.push(match cell {
            Cell::Null => Stored::Null,
            Cell::Integer(i) => Stored::Integer(i),
            Cell::Real(r) => Stored::Real(r),
            Cell::Text(text) => {
                let start = self.text.len();
                self.text.push_str(&text);
                Stored::Text(start, self.text.len())
            }
        });
    }

    /// Reads a row (a JSON object) into the batch when it has the batch's fields, in name
    /// order and each once, as a row the batch was made of does: true. False, and nothing
    /// added, when it has others (read it as a [`Row`] then).
    pub(super) fn reader(&mut self) -> impl for<'de> DeserializeSeed<'de, Value = bool> + '_ {
        Reader(self)
    }

    /// Whether the batch is as large as it should grow.
    pub(super) fn is_full(&self) -> bool {
        self.text.len() >= BATCH_TEXT_BYTES || self.cells.len() >= BATCH_CELLS
    }

    /// How many rows the batch holds.
    pub(super) fn row_count(&self) -> usize {
        self.rows
    }

    /// The fields of every row, in name order.
    pub(super) fn fields(&self) -> &[String] {
        &self.fields
    }

    /// The rows, each its values in the order of [`Batch::fields`].
    pub(super) fn rows(&self) -> impl Iterator<Item = impl Iterator<Item = Cell<'_>>> {
        let width = self.fields.len();
        (0..self.rows).map(move |row| {
            self.cells[row * width..(row + 1) * width]
                .iter()
                .map(|stored| match *stored {
                    Stored::Null => Cell::Null,
                    Stored::Integer(i) => Cell::Integer(i),
                    Stored::Real(r) => Cell::Real(r),
                    Stored::Text(start, end) => Cell::Text(Cow::Borrowed(&self.text[start..end])),
                })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A line read as a row gives the fields and values a `serde_json::Map` of it gives.
    #[test]
    fn a_row_reads_as_a_json_object_of_it_does() {
        let line = br#"{"z": 1, "a": "x\ny", "m": [1, {"b": 2, "a": null}], "a": true,
            "big": 18446744073709551615, "r": 1.5, "n": null, "o": {"k": "v"}, "e": -3}"#;
        let row: Row<'_> = serde_json::from_slice(line).unwrap();
        let map: serde_json::Map<String, Value> = serde_json::from_slice(line).unwrap();
        assert!(row.fields().eq(map.keys().map(String::as_str)));
        let expected: Vec<Cell<'_>> = map
            .values()
            .map(|value| match value {
                Value::Null => Cell::Null,
                Value::Bool(b) => Cell::Integer(i64::from(*b)),
                Value::Number(n) => n
                    .as_i64()
                    .map_or(Cell::Real(n.as_f64().unwrap()), Cell::Integer),
                Value::String(s) => Cell::Text(s.clone().into()),
                other => Cell::Text(other.to_string().into()),
            })
            .collect();
        let batch = Batch::of(row);
        let cells: Vec<Vec<Cell<'_>>> = batch.rows().map(Iterator::collect).collect();
        assert_eq!(cells, [expected]);
        assert_eq!(
            serde_json::from_slice::<Row<'_>>(b"5")
                .err()
                .unwrap()
                .to_string(),
            serde_json::from_slice::<serde_json::Map<String, Value>>(b"5")
                .err()
                .unwrap()
                .to_string()
        );
    }

    /// A row is read straight into a batch only when its fields are the batch's, in name
    /// order and each once; any other leaves the batch as it was.
    #[test]
    fn a_batch_takes_only_rows_of_its_own_fields() {
        let first = br#"{"a": 1, "b": "x"}"#;
        let mut batch = Batch::of(serde_json::from_slice(first).unwrap());
        let mut read = |line: &[u8]| {
            let mut json = serde_json::Deserializer::from_slice(line);
            batch.reader().deserialize(&mut json).unwrap()
        };
        assert!(read(br#"{"a": 2, "b": "y\"z"}"#));
        for other in [
            &br#"{"b": "x", "a": 1}"#[..],
            br#"{"a": 1, "a": 2, "b": "x"}"#,
            br#"{"a": 1}"#,
            br#"{"a": 1, "b": "x", "c": 3}"#,
            br#"{}"#,
        ] {
            assert!(!read(other), "{}", String::from_utf8_lossy(other));
        }
        let rows: Vec<Vec<Cell<'_>>> = batch.rows().map(Iterator::collect).collect();
        assert_eq!(
            rows,
            [
                [Cell::Integer(1), Cell::Text("x".into())],
                [Cell::Integer(2), Cell::Text("y\"z".into())]
            ]
        );
    }
}
