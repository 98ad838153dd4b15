//! A facts document read field by field, and checked only where its bytes are new: each
//! document is handed over unchecked, the fields whose bytes were seen lately were checked
//! then, and the others are checked as they are parsed. What is accepted and refused is what
//! parsing the document whole accepts and refuses; a document not accepted so is read whole,
//! which refuses it with the same error as before.

use serde_json::Value;

use crate::raw::{maps_keep_document_order, top_level_fields_known};

/// The top-level fields of a facts document that is an object of distinct plain keys (not
/// empty: an empty document is one fact), in the order a parsed document's fields come, each
/// with whether `known` knew it (`top_level_fields_known`). Its keys are checked as parsing
/// checks them (`top_level_fields` checks UTF-8 and refuses escapes; a control character is
/// refused here), and the bytes between its fields by `top_level_fields`.
pub(super) fn fields_in_map_order(
    doc: &[u8],
    known: impl FnMut(&str, &[u8]) -> Option<usize>,
) -> Option<Vec<(&str, &[u8], bool)>> {
    let mut fields = top_level_fields_known(doc, known).filter(|fields| !fields.is_empty())?;
    if fields
        .iter()
        .any(|(key, _, _)| key.bytes().any(|b| b < 0x20))
    {
        return None;
    }
    if !maps_keep_document_order() {
        fields.sort_unstable_by_key(|(key, _, _)| *key);
    }
    Some(fields)
}

/// A top-level field's value, parsed alone, when it is accepted there as it is in its
/// document; `None` when it is not. It is parsed as the one item of a list, copied into
/// `wrapped`: serde_json limits how deeply values nest, and a field is one level down in its
/// document as in the list.
pub(super) fn field_value(bytes: &[u8], wrapped: &mut Vec<u8>) -> Option<Value> {
    wrapped.clear();
    wrapped.push(b'[');
    wrapped.extend_from_slice(bytes);
    wrapped.push(b']');
    match serde_json::from_slice(wrapped).ok()? {
        Value::Array(mut items) if items.len() == 1 => items.pop(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A document whose fields are all found and accepted alone is one parsing accepts whole;
    /// any other is read whole, so every hostile document is refused as before.
    #[test]
    fn fields_accepted_alone_make_a_document_accepted_whole() {
        let docs = crate::raw::hostile_documents();
        let mut wrapped = Vec::new();
        let mut accepted_whole = 0;
        for doc in &docs {
            let text = String::from_utf8_lossy(doc);
            let whole = serde_json::from_slice::<Value>(doc);
            let alone = fields_in_map_order(doc, |_, _| None).and_then(|fields| {
                fields
                    .iter()
                    .map(|(key, bytes, _)| {
                        Some(((*key).to_owned(), field_value(bytes, &mut wrapped)?))
                    })
                    .collect::<Option<serde_json::Map<String, Value>>>()
            });
            match alone {
                Some(alone) => assert_eq!(whole.ok(), Some(Value::Object(alone)), "{text}"),
                None => accepted_whole += whole.is_ok() as usize,
            }
        }
        // Read whole though good: only the empty document, a key twice and a list.
        assert_eq!(accepted_whole, 3);
        // The deepest field a document accepts is accepted alone, one deeper is not.
        let field = |doc: &[u8]| field_value(&doc[14..doc.len() - 1], &mut Vec::new());
        assert!(field(&crate::raw::nested_document(126)).is_some());
        assert!(field(&crate::raw::nested_document(127)).is_none());
    }
}
