//! Cluster resources saved into the bundle's `resources/` folder, as Sonobuoy saves them: the
//! server's version and, by default, every Node and Namespace, so a bundle opened months later
//! says what the cluster was.
//!
//! Lists are read a page at a time and each page's items are copied into the file without being
//! decoded into a tree, so memory stays at about one page whatever the cluster's size, and
//! objects from any Kubernetes version are kept whole, fields this build does not know included.

use std::fmt;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use kube::Client;
use kube::api::ListParams;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// Objects asked for per page: a page of Node objects is a few MiB at most.
pub const PAGE_SIZE: u32 = 100;

/// A kind of object `resources/` can hold: how to list it and who may.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResourceKind {
    /// The name `--resources` takes, and the file's stem.
    pub name: &'static str,
    /// The API group (`""` for the core group), for RBAC rules.
    pub group: &'static str,
    /// The list path, across every namespace for namespaced kinds.
    pub path: &'static str,
}

/// Every kind `--resources` can name.
pub const KINDS: &[ResourceKind] = &[
    ResourceKind {
        name: "nodes",
        group: "",
        path: "/api/v1/nodes",
    },
    ResourceKind {
        name: "namespaces",
        group: "",
        path: "/api/v1/namespaces",
    },
    ResourceKind {
        name: "pods",
        group: "",
        path: "/api/v1/pods",
    },
    ResourceKind {
        name: "services",
        group: "",
        path: "/api/v1/services",
    },
    ResourceKind {
        name: "persistentvolumes",
        group: "",
        path: "/api/v1/persistentvolumes",
    },
    ResourceKind {
        name: "daemonsets",
        group: "apps",
        path: "/apis/apps/v1/daemonsets",
    },
    ResourceKind {
        name: "deployments",
        group: "apps",
        path: "/apis/apps/v1/deployments",
    },
    ResourceKind {
        name: "storageclasses",
        group: "storage.k8s.io",
        path: "/apis/storage.k8s.io/v1/storageclasses",
    },
];

/// What `resources/` holds unless the run names other kinds.
pub const DEFAULT_KINDS: &[&str] = &["nodes", "namespaces"];

/// [`DEFAULT_KINDS`], as kinds.
pub fn default_kinds() -> Vec<&'static ResourceKind> {
    DEFAULT_KINDS
        .iter()
        .map(|name| kind(name).expect("the default kinds are known"))
        .collect()
}

/// The kind `name` names.
pub fn kind(name: &str) -> Result<&'static ResourceKind, ResourceError> {
    KINDS
        .iter()
        .find(|k| k.name == name)
        .ok_or_else(|| ResourceError::UnknownKind(name.to_owned()))
}

fn kind_names() -> String {
    KINDS.iter().map(|k| k.name).collect::<Vec<_>>().join(", ")
}

/// Why a kind could not be saved.
#[derive(Debug, thiserror::Error)]
pub enum ResourceError {
    /// `--resources` named a kind this build cannot list.
    #[error("no resource kind {0:?}; choose from {choices}", choices = kind_names())]
    UnknownKind(String),
    /// The API server refused or failed the list.
    #[error("listing {kind}: {error}")]
    Api {
        /// The kind.
        kind: &'static str,
        /// What kube said.
        error: kube::Error,
    },
    /// A page was not a Kubernetes list.
    #[error("listing {kind}: the API server's answer is not a list: {error}")]
    Decode {
        /// The kind.
        kind: &'static str,
        /// Where decoding stopped.
        error: serde_json::Error,
    },
    /// The file could not be written.
    #[error("writing {path}: {error}")]
    Write {
        /// The file.
        path: PathBuf,
        /// What the write returned.
        error: std::io::Error,
    },
}

/// Saves the server's version as `<dir>/version.json`.
pub async fn save_version(client: &Client, dir: &Path) -> Result<PathBuf, ResourceError> {
    let version = client
        .apiserver_version()
        .await
        .map_err(|source| ResourceError::Api {
            kind: "version",
            error: source,
        })?;
    let path = dir.join("version.json");
    let json = serde_json::to_vec_pretty(&version).expect("a version serialises");
    std::fs::write(&path, json).map_err(|source| ResourceError::Write {
        path: path.clone(),
        error: source,
    })?;
    Ok(path)
}

/// Saves every object of `kind` as one `{"kind":"List","items":[...]}` document in
/// `<dir>/<name>.json`, reading `page_size` objects at a time ([`PAGE_SIZE`] unless testing),
/// and returns how many objects it holds.
pub async fn save_kind(
    client: &Client,
    kind: &'static ResourceKind,
    dir: &Path,
    page_size: u32,
) -> Result<u64, ResourceError> {
    let path = dir.join(format!("{}.json", kind.name));
    let write_error = |source| ResourceError::Write {
        path: path.clone(),
        error: source,
    };
    let mut out = BufWriter::new(File::create(&path).map_err(write_error)?);
    out.write_all(br#"{"apiVersion":"v1","kind":"List","items":["#)
        .map_err(write_error)?;
    let mut count = 0;
    let mut next: Option<String> = None;
    loop {
        let mut params = ListParams::default().limit(page_size);
        if let Some(token) = &next {
            params = params.continue_token(token);
        }
        let request = kube::core::Request::new(kind.path)
            .list(&params)
            .map_err(|e| ResourceError::Api {
                kind: kind.name,
                error: kube::Error::BuildRequest(e),
            })?;
        let page = client
            .request_text(request)
            .await
            .map_err(|source| ResourceError::Api {
                kind: kind.name,
                error: source,
            })?;
        let copied = copy_items(&page, &mut out, count == 0).map_err(|e| match e {
            CopyError::Decode(source) => ResourceError::Decode {
                kind: kind.name,
                error: source,
            },
            CopyError::Write(source) => write_error(source),
        })?;
        count += copied.items;
        match copied.next.filter(|token| !token.is_empty()) {
            Some(token) => next = Some(token),
            None => break,
        }
    }
    out.write_all(b"]}\n").map_err(write_error)?;
    out.into_inner()
        .map_err(|e| write_error(e.into_error()))?
        .sync_all()
        .map_err(write_error)?;
    Ok(count)
}

/// One page copied.
struct Copied {
    items: u64,
    next: Option<String>,
}

enum CopyError {
    Decode(serde_json::Error),
    Write(std::io::Error),
}

/// Copies `page`'s items into `out`, comma-separated (with a comma first unless `first`), and
/// returns the page's continue token.
fn copy_items<W: Write>(page: &str, out: &mut W, first: bool) -> Result<Copied, CopyError> {
    let mut write_error = None;
    let mut deserializer = serde_json::Deserializer::from_str(page);
    let copied = ListSeed {
        out,
        first,
        write_error: &mut write_error,
    }
    .deserialize(&mut deserializer)
    .and_then(|copied| deserializer.end().map(|()| copied));
    match (copied, write_error) {
        (_, Some(e)) => Err(CopyError::Write(e)),
        (Ok(copied), None) => Ok(copied),
        (Err(e), None) => Err(CopyError::Decode(e)),
    }
}

/// Reads a list object, copying its `items` and keeping `metadata.continue`.
struct ListSeed<'a, W> {
    out: &'a mut W,
    first: bool,
    /// A write failure, kept apart from decode errors (serde's errors are strings).
    write_error: &'a mut Option<std::io::Error>,
}

impl<'de, W: Write> DeserializeSeed<'de> for ListSeed<'_, W> {
    type Value = Copied;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Copied, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de, W: Write> Visitor<'de> for ListSeed<'_, W> {
    type Value = Copied;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a Kubernetes list")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Copied, A::Error> {
        let mut copied = Copied {
            items: 0,
            next: None,
        };
        let mut items_seen = false;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match key.as_ref() {
                "items" => {
                    copied.items = map.next_value_seed(ItemsSeed {
                        out: &mut *self.out,
                        first: self.first,
                        write_error: &mut *self.write_error,
                    })?;
                    items_seen = true;
                }
                "metadata" => copied.next = map.next_value::<ListMeta>()?.r#continue,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        if !items_seen {
            return Err(de::Error::missing_field("items"));
        }
        Ok(copied)
    }
}

#[derive(serde::Deserialize)]
struct ListMeta {
    #[serde(default)]
    r#continue: Option<String>,
}

/// Copies each element of the `items` array into the output as it is read.
struct ItemsSeed<'a, W> {
    out: &'a mut W,
    first: bool,
    write_error: &'a mut Option<std::io::Error>,
}

impl<'de, W: Write> DeserializeSeed<'de> for ItemsSeed<'_, W> {
    type Value = u64;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<u64, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de, W: Write> Visitor<'de> for ItemsSeed<'_, W> {
    type Value = u64;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list's items")
    }

    // A list with no items may say `"items": null`.
    fn visit_unit<E: de::Error>(self) -> Result<u64, E> {
        Ok(0)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<u64, A::Error> {
        let mut count = 0;
        let mut first = self.first;
        loop {
            let item = ItemSeed {
                out: &mut *self.out,
                comma: !first,
                write_error: &mut *self.write_error,
            };
            match seq.next_element_seed(item)? {
                Some(()) => {
                    count += 1;
                    first = false;
                }
                None => return Ok(count),
            }
        }
    }
}

/// Copies one object.
struct ItemSeed<'a, W> {
    out: &'a mut W,
    comma: bool,
    write_error: &'a mut Option<std::io::Error>,
}

impl<'de, W: Write> DeserializeSeed<'de> for ItemSeed<'_, W> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        let mut out = Recording {
            inner: self.out,
            error: self.write_error,
        };
        if self.comma && out.write_all(b",").is_err() {
            return Err(de::Error::custom("write failed"));
        }
        let mut serializer = serde_json::Serializer::new(&mut out);
        serde_transcode::transcode(deserializer, &mut serializer).map_err(de::Error::custom)
    }
}

/// Passes writes on and keeps the first failure: serde turns it into a message, and a full
/// disk must not be reported as a malformed list.
struct Recording<'a, W> {
    inner: &'a mut W,
    error: &'a mut Option<std::io::Error>,
}

impl<W: Write> Write for Recording<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.inner.write(buf).inspect_err(|e| self.keep(e))
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush().inspect_err(|e| self.keep(e))
    }
}

impl<W> Recording<'_, W> {
    fn keep(&mut self, e: &std::io::Error) {
        self.error
            .get_or_insert_with(|| std::io::Error::new(e.kind(), e.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn copy_pages(pages: &[&str]) -> (String, u64) {
        let mut out = b"[".to_vec();
        let mut total = 0;
        for (i, page) in pages.iter().enumerate() {
            let copied = copy_items(page, &mut out, i == 0).ok().expect("a list");
            total += copied.items;
        }
        out.push(b']');
        (String::from_utf8(out).unwrap(), total)
    }

    #[test]
    fn items_of_every_page_are_copied_whole_into_one_array() {
        let first = r#"{"kind":"NodeList","apiVersion":"v1","metadata":{"continue":"abc","resourceVersion":"7"},
            "items":[{"metadata":{"name":"a"},"status":{"new-field":[1,2,{"x":null}]}},{"metadata":{"name":"b"}}]}"#;
        let last = r#"{"kind":"NodeList","metadata":{"resourceVersion":"7"},"items":[{"metadata":{"name":"c"}}]}"#;
        let (json, count) = copy_pages(&[first, last]);
        assert_eq!(count, 3);
        let items: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(
            items[0]["status"]["new-field"][2]["x"],
            serde_json::Value::Null
        );
        assert_eq!(items[2]["metadata"]["name"], "c");
    }

    #[test]
    fn the_continue_token_comes_from_the_lists_metadata() {
        let page = r#"{"items":[],"metadata":{"continue":"next-page"}}"#;
        let copied = copy_items(page, &mut Vec::new(), true).ok().unwrap();
        assert_eq!(copied.next.as_deref(), Some("next-page"));
        assert_eq!(copied.items, 0);
        let null = copy_items(r#"{"items":null,"metadata":{}}"#, &mut Vec::new(), true)
            .ok()
            .unwrap();
        assert_eq!((null.items, null.next), (0, None));
    }

    #[test]
    fn an_answer_that_is_not_a_list_is_a_decode_error() {
        for page in [
            r#"{"kind":"Status","metadata":{}}"#,
            "[1,2]",
            r#"{"items":[1"#,
            r#"{"items":[]} trailing"#,
        ] {
            assert!(
                matches!(
                    copy_items(page, &mut Vec::new(), true),
                    Err(CopyError::Decode(_))
                ),
                "{page}"
            );
        }
    }

    #[test]
    fn a_failed_write_is_a_write_error_not_a_decode_error() {
        struct Full;
        impl Write for Full {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Err(std::io::Error::from_raw_os_error(28))
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let page = r#"{"items":[{"a":1}]}"#;
        assert!(matches!(
            copy_items(page, &mut Full, true),
            Err(CopyError::Write(_))
        ));
    }

    #[test]
    fn every_kind_name_is_found_and_an_unknown_one_lists_the_choices() {
        for k in KINDS {
            assert_eq!(kind(k.name).unwrap(), k);
        }
        for name in DEFAULT_KINDS {
            kind(name).unwrap();
        }
        let message = kind("secrets").unwrap_err().to_string();
        assert!(message.contains("nodes, namespaces"), "{message}");
    }
}
