//! `cmdline`: the kernel command line, as a map (`cmdline`) and with repeated keys kept as
//! lists (`proc_cmdline`).

use serde_json::{Map, Value};

use crate::ctx::Ctx;

pub fn collect(ctx: &mut Ctx) {
    let Some(data) = ctx.read("/proc/cmdline").filter(|d| !d.is_empty()) else {
        return;
    };
    let words = split_non_posix(&data);
    let mut cmdline = Map::new();
    let mut proc_cmdline = Map::new();
    for word in &words {
        match word.split_once('=') {
            None => {
                cmdline.insert(word.clone(), true.into());
                proc_cmdline.insert(word.clone(), true.into());
            }
            Some((key, value)) => {
                cmdline.insert(key.into(), value.into());
                match proc_cmdline.get_mut(key) {
                    Some(Value::Array(values)) => values.push(value.into()),
                    Some(existing) => {
                        let first = existing.take();
                        *existing = Value::Array(vec![first, value.into()]);
                    }
                    None => {
                        proc_cmdline.insert(key.into(), value.into());
                    }
                }
            }
        }
    }
    ctx.set("cmdline", cmdline);
    ctx.set("proc_cmdline", proc_cmdline);
}

/// Python's `shlex.split(data, posix=False)`: whitespace-separated words; a word that starts
/// with a quote runs to the closing quote and keeps the quotes. An unclosed quote makes shlex
/// fail, and Ansible then reports no words at all.
fn split_non_posix(data: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut chars = data.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let Some(first) = chars.next() else {
            return words;
        };
        let mut word = String::from(first);
        if first == '"' || first == '\'' {
            loop {
                match chars.next() {
                    Some(c) => {
                        word.push(c);
                        if c == first {
                            break;
                        }
                    }
                    None => return Vec::new(),
                }
            }
        } else {
            while let Some(c) = chars.peek().copied() {
                if c.is_whitespace() {
                    break;
                }
                word.push(c);
                chars.next();
            }
        }
        words.push(word);
    }
}

#[cfg(test)]
mod tests {
    use super::split_non_posix;

    #[test]
    fn splits_like_shlex_non_posix() {
        assert_eq!(
            split_non_posix("a=1 b  c=\"x y\""),
            ["a=1", "b", "c=\"x", "y\""]
        );
        assert_eq!(
            split_non_posix("\"quoted word\"tail"),
            ["\"quoted word\"", "tail"]
        );
        assert!(split_non_posix("a 'unclosed").is_empty());
    }
}
