//! `lsb`: the Linux Standard Base release facts (Ansible's LSBFactCollector).
//!
//! Ansible runs `lsb_release -a` when it is installed, else reads `/etc/lsb-release`. The
//! sandbox cannot run programs, so when `lsb_release` is installed its output is rebuilt from
//! the files it reads: `/etc/lsb-release` (Ubuntu's implementation prefers it) or os-release
//! (Debian's `lsb-release-minimal`, which mimics the old Python tool).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::ctx::Ctx;

pub fn collect(ctx: &mut Ctx) {
    let mut lsb: BTreeMap<String, String> = BTreeMap::new();
    if let Some(output) = lsb_release_output(ctx) {
        for line in output.lines() {
            let Some((_, value)) = line.split_once(':') else {
                continue;
            };
            let value = value.trim().to_owned();
            let key = if line.contains("LSB Version:") || line.contains("Release:") {
                "release"
            } else if line.contains("Distributor ID:") {
                "id"
            } else if line.contains("Description:") {
                "description"
            } else if line.contains("Codename:") {
                "codename"
            } else {
                continue;
            };
            lsb.insert(key.into(), value);
        }
    }
    if lsb.is_empty() {
        lsb = lsb_release_file(ctx);
    }
    if let Some(release) = lsb.get("release").cloned() {
        lsb.insert(
            "major_release".into(),
            release.split('.').next().unwrap_or("").into(),
        );
    }
    let facts: Map<String, Value> = lsb
        .into_iter()
        .map(|(k, v)| {
            let v = if v.is_empty() {
                v
            } else {
                v.trim_matches(['\'', '"', '\\']).to_owned()
            };
            (k, Value::from(v))
        })
        .collect();
    ctx.set("lsb", facts);
}

/// What `lsb_release -a` would print, when it is installed.
pub fn lsb_release_output(ctx: &Ctx) -> Option<String> {
    ctx.find_bin("lsb_release")?;
    let from_lsb_file = lsb_release_file(ctx);
    let (id, description, release, codename) = if from_lsb_file.contains_key("id") {
        let get = |k: &str| {
            from_lsb_file
                .get(k)
                .map(|v| v.trim_matches('"').to_owned())
                .unwrap_or_else(|| "n/a".into())
        };
        (
            get("id"),
            get("description"),
            get("release"),
            get("codename"),
        )
    } else {
        let os = factbuoy_guest::linux::os_release::read(&ctx.fs)
            .map(|(_, vars)| vars)
            .unwrap_or_default();
        let get = |k: &str| os.get(k).filter(|v| !v.is_empty()).cloned();
        let mut id = get("ID").map(|id| capitalize_first(&id));
        if let (Some(i), Some(name)) = (&id, get("NAME"))
            && i.to_lowercase() == name.to_lowercase()
        {
            id = Some(name);
        }
        let na = || "n/a".to_owned();
        (
            id.unwrap_or_else(na),
            get("PRETTY_NAME").unwrap_or_else(na),
            get("VERSION_ID").unwrap_or_else(na),
            get("VERSION_CODENAME").unwrap_or_else(na),
        )
    };
    Some(format!(
        "Distributor ID:\t{id}\nDescription:\t{description}\nRelease:\t{release}\nCodename:\t{codename}\n"
    ))
}

/// `/etc/lsb-release`'s `DISTRIB_*` lines, as Ansible reads them.
fn lsb_release_file(ctx: &Ctx) -> BTreeMap<String, String> {
    let mut facts = BTreeMap::new();
    let Some(text) = ctx.read_raw("/etc/lsb-release") else {
        return facts;
    };
    for line in text.lines() {
        let Some((_, value)) = line.split_once('=') else {
            continue;
        };
        let value = value.trim().to_owned();
        let key = if line.contains("DISTRIB_ID") {
            "id"
        } else if line.contains("DISTRIB_RELEASE") {
            "release"
        } else if line.contains("DISTRIB_DESCRIPTION") {
            "description"
        } else if line.contains("DISTRIB_CODENAME") {
            "codename"
        } else {
            continue;
        };
        facts.insert(key.into(), value);
    }
    facts
}

/// The shell script's capitalisation: the first character upper case, the rest untouched.
fn capitalize_first(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}
