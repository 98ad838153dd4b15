//! The mount table: `/proc/self/mounts` (fstab format) and `/proc/self/mountinfo`.
//!
//! Both escape space, tab, newline and backslash in names as octal (`\040`); the parsers undo it.

/// The link that names a process's mount namespace, for the factbuoy process itself.
pub const OWN_NAMESPACE: &str = "/proc/self/ns/mnt";
/// The same for process 1 of the host root.
pub const INIT_NAMESPACE: &str = "/proc/1/ns/mnt";

/// The `/proc` directory whose mount table describes the host root, given the targets of
/// [`OWN_NAMESPACE`] and [`INIT_NAMESPACE`] as read below that root (`None` where unreadable)
/// and whether `/proc/1/mounts` can be read there.
///
/// `/proc/self`, the factbuoy process, unless the root's process 1 lives in another mount
/// namespace: factbuoy in a pod, with the host mounted at `/host`, where `/host/proc/self` is
/// still the agent in its container; then `/proc/1`. Reading process 1's namespace link needs
/// privileges a pod's agent does not have, so when the namespaces cannot be compared, process
/// 1's table is taken when it can be read (on a host it is the same table as factbuoy's own).
/// The guest SDK and the host's `host-info` both decide with this.
pub fn table_dir(
    own_namespace: Option<&str>,
    init_namespace: Option<&str>,
    init_table_readable: bool,
) -> &'static str {
    match (own_namespace, init_namespace) {
        (Some(own), Some(init)) if own != init => "/proc/1",
        (Some(_), Some(_)) => "/proc/self",
        _ if init_table_readable => "/proc/1",
        _ => "/proc/self",
    }
}

/// One line of `/proc/self/mounts` (or `/etc/mtab`, `/etc/fstab`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountEntry {
    /// What is mounted: a device path, `UUID=...`, or a pseudo name such as `proc`.
    pub device: String,
    /// Where it is mounted, unescaped.
    pub mount_point: String,
    /// The file system type (`ext4`, `tmpfs`).
    pub fs_type: String,
    /// Comma-separated, as written.
    pub options: String,
    /// The fifth field, for dump(8); 0 when absent.
    pub dump: i64,
    /// The sixth field, fsck(8)'s pass number; 0 when absent.
    pub pass: i64,
}

/// Lines with fewer than four fields are skipped; missing dump and pass fields are 0.
pub fn parse_mounts(text: &str) -> Vec<MountEntry> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.len() < 4 || fields[0].starts_with('#') {
                return None;
            }
            let number = |i: usize| fields.get(i).and_then(|f| f.parse().ok()).unwrap_or(0);
            Some(MountEntry {
                device: unescape_octal(fields[0]),
                mount_point: unescape_octal(fields[1]),
                fs_type: unescape_octal(fields[2]),
                options: unescape_octal(fields[3]),
                dump: number(4),
                pass: number(5),
            })
        })
        .collect()
}

/// One line of `/proc/self/mountinfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountInfo {
    /// This mount's unique id.
    pub mount_id: u64,
    /// The id of the mount it sits on (itself for the namespace's root).
    pub parent_id: u64,
    /// Major number of the file system's device (`st_dev`).
    pub major: u32,
    /// Minor number of the file system's device (`st_dev`).
    pub minor: u32,
    /// The directory of the file system that is mounted here: `/` unless this is a bind mount
    /// of a subdirectory (or a btrfs subvolume).
    pub root: String,
    /// Where it is mounted, relative to the process's root, unescaped.
    pub mount_point: String,
    /// Per-mount options (`rw,relatime`).
    pub mount_options: String,
    /// Optional fields such as `shared:1` or `master:2`.
    pub propagation: Vec<String>,
    /// The file system type, with any subtype (`fuse.sshfs`).
    pub fs_type: String,
    /// File-system-specific source, usually a device path; `none` and the like otherwise.
    pub source: String,
    /// Per-superblock options.
    pub super_options: String,
}

/// Lines that do not follow the format (see proc(5)) are skipped.
pub fn parse_mountinfo(text: &str) -> Vec<MountInfo> {
    text.lines().filter_map(parse_mountinfo_line).collect()
}

fn parse_mountinfo_line(line: &str) -> Option<MountInfo> {
    let fields: Vec<&str> = line.split(' ').collect();
    let separator = fields.iter().position(|f| *f == "-")?;
    if separator < 6 || fields.len() < separator + 3 {
        return None;
    }
    let (major, minor) = fields[2].split_once(':')?;
    Some(MountInfo {
        mount_id: fields[0].parse().ok()?,
        parent_id: fields[1].parse().ok()?,
        major: major.parse().ok()?,
        minor: minor.parse().ok()?,
        root: unescape_octal(fields[3]),
        mount_point: unescape_octal(fields[4]),
        mount_options: fields[5].to_owned(),
        propagation: fields[6..separator].iter().map(|f| f.to_string()).collect(),
        fs_type: unescape_octal(fields[separator + 1]),
        source: unescape_octal(fields[separator + 2]),
        super_options: fields.get(separator + 3).unwrap_or(&"").to_string(),
    })
}

/// Where `path` (absolute, normalised) lives according to a mount table: the device of the file
/// system holding it and its path inside that file system. The mount is the one with the longest
/// mount point containing `path`, the last of those mounted on the same point; `None` when no
/// mount contains it. Two paths with the same answer are the same directory, whichever mount
/// namespace each table describes: that is how a pod's `/host/etc` is known to be the node's
/// `/etc` without privileges.
pub fn locate(table: &[MountInfo], path: &str) -> Option<(u32, u32, String)> {
    let below = |point: &str| -> Option<String> {
        let rest = path.strip_prefix(point.trim_end_matches('/'))?;
        (rest.is_empty() || rest.starts_with('/')).then(|| rest.to_owned())
    };
    let (mount, rest) = table
        .iter()
        .filter_map(|m| Some((m, below(&m.mount_point)?)))
        .fold(
            None,
            |best: Option<(&MountInfo, String)>, (m, rest)| match &best {
                Some((b, _)) if b.mount_point.len() > m.mount_point.len() => best,
                _ => Some((m, rest)),
            },
        )?;
    let inside = format!("{}{rest}", mount.root.trim_end_matches('/'));
    Some((
        mount.major,
        mount.minor,
        if inside.is_empty() {
            "/".into()
        } else {
            inside
        },
    ))
}

/// Replaces each `\NNN` (three octal digits) with the byte it names.
pub fn unescape_octal(text: &str) -> String {
    if !text.contains('\\') {
        return text.to_owned();
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match (bytes[i], octal) {
            (b'\\', Some(digits)) => {
                let value = digits.iter().fold(0u32, |v, d| v * 8 + u32::from(d - b'0'));
                out.push(value as u8);
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mounts_lines_with_escapes() {
        let m = parse_mounts(
            "/dev/vda / ext4 rw,relatime 0 0\nshort line\n/dev/sdb1 /mnt/my\\040disk vfat ro 0 2\n",
        );
        assert_eq!(m.len(), 2);
        assert_eq!(m[1].mount_point, "/mnt/my disk");
        assert_eq!(m[1].pass, 2);
    }

    #[test]
    fn mountinfo_lines() {
        let text = "22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw,discard\n\
                    30 22 254:0 /srv/data /data rw master:2 - ext4 /dev/vda rw\n\
                    garbage\n";
        let m = parse_mountinfo(text);
        assert_eq!(m.len(), 2);
        assert_eq!((m[0].major, m[0].minor), (254, 0));
        assert_eq!(m[0].propagation, ["shared:1"]);
        assert_eq!(m[1].root, "/srv/data");
        assert_eq!(m[1].fs_type, "ext4");
        assert_eq!(m[1].super_options, "rw");
    }

    #[test]
    fn the_table_follows_the_mount_namespace_of_process_1() {
        assert_eq!(
            table_dir(Some("mnt:[1]"), Some("mnt:[1]"), true),
            "/proc/self"
        );
        assert_eq!(table_dir(Some("mnt:[2]"), Some("mnt:[1]"), true), "/proc/1");
        // A pod's agent cannot read process 1's link, but can read its table.
        assert_eq!(table_dir(Some("mnt:[2]"), None, true), "/proc/1");
        assert_eq!(table_dir(None, None, false), "/proc/self");
    }

    #[test]
    fn a_path_is_located_in_the_file_system_of_its_innermost_mount() {
        // The node's table, and a pod's with the node's /etc bound at /host/etc.
        let node = parse_mountinfo(
            "22 1 254:0 / / rw - ext4 /dev/vda rw\n\
             23 22 0:21 / /proc rw - proc proc rw\n\
             24 22 254:0 /etc/hosts /etc/hostsx rw - ext4 /dev/vda rw\n",
        );
        let pod = parse_mountinfo(
            "500 400 0:77 / / ro - overlay overlay rw\n\
             501 500 254:0 /etc /host/etc ro - ext4 /dev/vda rw\n\
             502 500 254:0 /srv /host/etcd ro - ext4 /dev/vda rw\n",
        );
        let etc = Some((254, 0, "/etc".to_owned()));
        assert_eq!(locate(&node, "/etc"), etc);
        assert_eq!(locate(&pod, "/host/etc"), etc);
        assert_eq!(
            locate(&pod, "/host/etc/ssl"),
            Some((254, 0, "/etc/ssl".into()))
        );
        assert_eq!(locate(&pod, "/host/etcd"), Some((254, 0, "/srv".into())));
        assert_eq!(locate(&pod, "/host"), Some((0, 77, "/host".into())));
        assert_eq!(locate(&node, "/proc/1"), Some((0, 21, "/1".into())));
        assert_eq!(locate(&[], "/etc"), None);
        // Mounted over: the later mount on the same point is the one seen.
        let stacked = parse_mountinfo(
            "22 1 254:0 / / rw - ext4 /dev/vda rw\n\
             30 22 0:50 / /etc rw - tmpfs tmpfs rw\n\
             31 30 0:51 / /etc rw - tmpfs tmpfs rw\n",
        );
        assert_eq!(locate(&stacked, "/etc"), Some((0, 51, "/".into())));
    }

    #[test]
    fn octal_escapes() {
        assert_eq!(unescape_octal("a\\040b\\011c\\134d"), "a b\tc\\d");
        assert_eq!(unescape_octal("trailing\\04"), "trailing\\04");
        assert_eq!(unescape_octal("not\\999"), "not\\999");
    }
}
