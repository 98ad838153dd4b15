//! Resolving a path below a host root as if that root were `/`: the rule both sides use to
//! follow symlinks (`/etc/os-release -> /usr/lib/os-release`) without ever leaving the root.

use std::io;

/// Symlinks followed while resolving one path, as Linux's `MAXSYMLINKS`.
pub const MAX_SYMLINKS: usize = 40;

/// Resolves the absolute path `path` the way a chroot at the root would: every symlink is
/// followed, an absolute target starts again at the root, and `..` never climbs above it.
///
/// `read_link` is asked about each prefix (an absolute path, `/a`, `/a/b`, ...) and answers
/// `Some(target)` for a symlink, `None` for anything else; its errors end the resolution. The
/// result is absolute, normalised and free of symlinks as far as `read_link` could tell.
pub fn resolve(
    path: &str,
    mut read_link: impl FnMut(&str) -> io::Result<Option<String>>,
) -> io::Result<String> {
    if !path.starts_with('/') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{path}: host paths must be absolute"),
        ));
    }
    let mut pending: Vec<String> = components(path).rev().map(str::to_owned).collect();
    let mut resolved: Vec<String> = Vec::new();
    let mut links = 0;
    while let Some(part) = pending.pop() {
        match part.as_str() {
            "." => continue,
            ".." => {
                resolved.pop();
                continue;
            }
            _ => resolved.push(part),
        }
        let Some(target) = read_link(&join(&resolved))? else {
            continue;
        };
        links += 1;
        if links > MAX_SYMLINKS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{path}: more than {MAX_SYMLINKS} symlinks; is there a loop?"),
            ));
        }
        resolved.pop();
        if target.starts_with('/') {
            resolved.clear();
        }
        pending.extend(components(&target).rev().map(str::to_owned));
    }
    Ok(join(&resolved))
}

/// An absolute path with `.` and `..` applied lexically (`..` stops at `/`), as components;
/// `None` for a relative path.
pub fn normalize(path: &str) -> Option<Vec<&str>> {
    if !path.starts_with('/') {
        return None;
    }
    let mut parts = Vec::new();
    for part in components(path) {
        match part {
            "." => {}
            ".." => {
                parts.pop();
            }
            part => parts.push(part),
        }
    }
    Some(parts)
}

fn components(path: &str) -> impl DoubleEndedIterator<Item = &str> {
    path.split('/').filter(|p| !p.is_empty())
}

fn join(parts: &[String]) -> String {
    format!("/{}", parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn links(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
            .collect()
    }

    fn resolve_in(table: &HashMap<String, String>, path: &str) -> io::Result<String> {
        resolve(path, |p| Ok(table.get(p).cloned()))
    }

    #[test]
    fn absolute_targets_restart_at_the_root_and_dots_stop_there() {
        let table = links(&[
            ("/etc/os-release", "/usr/lib/os-release"),
            ("/usr/lib/up", "../../.."),
            ("/etc/localtime", "../usr/share/zoneinfo/UTC"),
        ]);
        assert_eq!(
            resolve_in(&table, "/etc/os-release").unwrap(),
            "/usr/lib/os-release"
        );
        assert_eq!(resolve_in(&table, "/usr/lib/up/../../etc").unwrap(), "/etc");
        assert_eq!(
            resolve_in(&table, "/etc/./localtime").unwrap(),
            "/usr/share/zoneinfo/UTC"
        );
        assert_eq!(resolve_in(&table, "/").unwrap(), "/");
    }

    #[test]
    fn loops_relative_paths_and_errors_are_refused() {
        let table = links(&[("/a", "/b"), ("/b", "/a")]);
        let looped = resolve_in(&table, "/a/x").unwrap_err();
        assert!(looped.to_string().contains("symlinks"), "{looped}");
        assert_eq!(
            resolve_in(&table, "a").unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
        let failing = resolve("/x/y", |_| Err(io::Error::from(io::ErrorKind::NotFound)));
        assert_eq!(failing.unwrap_err().kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn normalizes_lexically() {
        assert_eq!(normalize("/etc/../root/./x"), Some(vec!["root", "x"]));
        assert_eq!(normalize("/.."), Some(vec![]));
        assert_eq!(normalize("etc"), None);
    }
}
