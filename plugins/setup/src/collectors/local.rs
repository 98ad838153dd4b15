//! `local`: custom facts from `/etc/ansible/facts.d/*.fact` (JSON or INI files).
//!
//! Ansible runs executable fact files; the sandbox cannot run programs, so an executable fact
//! gets the message Ansible gives for a fact script it could not run.

use serde_json::{Map, Value};

use crate::ctx::Ctx;

const FACT_PATH: &str = "/etc/ansible/facts.d";

pub fn collect(ctx: &mut Ctx) {
    let mut local = Map::new();
    let mut names: Vec<String> = ctx
        .list(FACT_PATH)
        .unwrap_or_default()
        .into_iter()
        .filter(|n| n.ends_with(".fact"))
        .collect();
    names.sort();
    for name in names {
        let path = format!("{FACT_PATH}/{name}");
        let base = name.replace(".fact", "");
        let value = match ctx.fs.metadata(&path) {
            Err(e) => Value::from(format!("Could not stat fact ({path}): {e}")),
            Ok(_) if is_executable(ctx, &path) => {
                let message = format!(
                    "Could not execute fact script ({path}): the factbuoy sandbox does not run programs"
                );
                ctx.warn(message.clone());
                message.into()
            }
            Ok(_) => parse_fact(ctx, &path),
        };
        local.insert(base, value);
    }
    ctx.set("local", local);
}

/// WASI does not report permission bits; an executable fact script starts with `#!`.
fn is_executable(ctx: &Ctx, path: &str) -> bool {
    ctx.read_bytes(path).is_some_and(|b| b.starts_with(b"#!"))
}

fn parse_fact(ctx: &Ctx, path: &str) -> Value {
    let bytes = ctx.read_bytes(path).unwrap_or_default();
    let Ok(text) = String::from_utf8(bytes) else {
        let message = format!("error loading fact - output of running \"{path}\" was not utf-8");
        ctx.warn(message.clone());
        return message.into();
    };
    if let Ok(json) = serde_json::from_str::<Value>(text.trim()) {
        return json;
    }
    match parse_ini(&text) {
        Some(ini) => ini,
        None => {
            let message =
                format!("error loading facts as JSON or ini - please check content: {path}");
            ctx.warn(message.clone());
            message.into()
        }
    }
}

/// INI as Python's configparser reads it for facts: `[section]` headers, `key = value` or
/// `key: value` lines (keys lower-cased), `#`/`;` comments. `None` when a line fits nothing.
fn parse_ini(text: &str) -> Option<Value> {
    let mut sections = Map::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with(';') {
            continue;
        }
        if let Some(name) = trimmed.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
            sections
                .entry(name)
                .or_insert_with(|| Value::Object(Map::new()));
            current = Some(name.to_owned());
            continue;
        }
        let section = current.as_ref()?;
        let split = trimmed.find(['=', ':'])?;
        let (key, value) = (trimmed[..split].trim(), trimmed[split + 1..].trim());
        if let Some(Value::Object(options)) = sections.get_mut(section) {
            options.insert(key.to_lowercase(), value.into());
        }
    }
    Some(Value::Object(sections))
}

#[cfg(test)]
mod tests {
    use super::parse_ini;

    #[test]
    fn ini_facts() {
        let v = parse_ini("[general]\nAsdf = 1\nbar: x y\n; c\n").unwrap();
        assert_eq!(v["general"]["asdf"], "1");
        assert_eq!(v["general"]["bar"], "x y");
        assert!(parse_ini("key=outside a section\n").is_none());
    }
}
