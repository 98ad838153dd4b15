//! Names that arrive from plugins or over the wire, checked before anything is stored under them.
//!
//! Artifact names are relative paths chosen by plugins. The rules are strict on purpose, so that
//! a name is safe as a file path on Linux, macOS and Windows and as a tar entry: `/`-separated
//! components, none of them empty, `.` or `..`, bounded length and depth, and each component a
//! file name every system can hold ([`check_component`]). Node and plugin names follow
//! Kubernetes' DNS-subdomain rules, and are file names too.

use std::fmt;
use std::path::PathBuf;

/// Longest accepted name, in bytes.
pub const MAX_NAME_BYTES: usize = 512;
/// Longest accepted component, in bytes (most file systems allow 255).
pub const MAX_COMPONENT_BYTES: usize = MAX_FILE_NAME_BYTES;
/// Deepest accepted nesting.
pub const MAX_DEPTH: usize = 8;
/// The file that says why a result failed, beside the plugin's artifacts
/// (`plugins/<plugin>/errors/<node>/error.json`).
pub const ERROR_FILE: &str = "error.json";
/// Artifact names a plugin may not use, in any letter case: the aggregator writes them.
pub const RESERVED_ARTIFACT_NAMES: &[&str] = &[ERROR_FILE];
/// Characters Windows refuses in file names (besides `/`, `\\` and control characters).
pub const WINDOWS_FORBIDDEN: &[char] = &['<', '>', ':', '"', '|', '?', '*'];
/// Names Windows keeps for devices, whatever follows the first `.` and in any letter case.
const WINDOWS_DEVICES: &[&str] = &[
    "CON",
    "PRN",
    "AUX",
    "NUL",
    "CONIN$",
    "CONOUT$",
    "COM0",
    "COM1",
    "COM2",
    "COM3",
    "COM4",
    "COM5",
    "COM6",
    "COM7",
    "COM8",
    "COM9",
    "COM\u{b9}",
    "COM\u{b2}",
    "COM\u{b3}",
    "LPT0",
    "LPT1",
    "LPT2",
    "LPT3",
    "LPT4",
    "LPT5",
    "LPT6",
    "LPT7",
    "LPT8",
    "LPT9",
    "LPT\u{b9}",
    "LPT\u{b2}",
    "LPT\u{b3}",
];

/// Checks one file or directory name for being storable and unambiguous on Linux, macOS and
/// Windows. Refused, with the reason worded to follow the name: empty, `.` and `..`, longer than
/// [`MAX_FILE_NAME_BYTES`], `/` or `\\`, any of [`WINDOWS_FORBIDDEN`], a trailing `.` or space
/// (Windows drops them), a Windows device name (`CON`, `nul.txt`, `COM1`, ...), and invisible or
/// reordering characters: control and format characters (bidi overrides and isolates, zero-width
/// spaces and joiners, byte order marks) and line or paragraph separators.
pub fn check_component(component: &str) -> Result<(), &'static str> {
    if component.is_empty() {
        return Err("has an empty component (`//` or a trailing `/`)");
    }
    if component == "." || component == ".." {
        return Err("contains `.` or `..`");
    }
    if component.len() > MAX_FILE_NAME_BYTES {
        return Err("has a component longer than 255 bytes");
    }
    if component.contains('\\') {
        return Err("contains a backslash; separate directories with `/`");
    }
    if component.contains('/') {
        return Err("contains `/`");
    }
    if component.contains(WINDOWS_FORBIDDEN) {
        return Err("contains one of < > : \" | ? *, which Windows refuses in file names");
    }
    if component.chars().any(crate::text::is_control_or_format) {
        return Err(
            "contains a control character or an invisible one (a bidi override, a zero-width space, ...)",
        );
    }
    if component.ends_with(['.', ' ']) {
        return Err("has a component ending in `.` or a space, which Windows drops");
    }
    let stem = component.split('.').next().unwrap_or_default().trim_end();
    if WINDOWS_DEVICES
        .iter()
        .any(|device| device.eq_ignore_ascii_case(stem))
    {
        return Err(
            "has a component that is a device name on Windows (CON, PRN, AUX, NUL, COM1, LPT1, ...)",
        );
    }
    Ok(())
}

/// A name that passed the rules above.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(transparent)]
pub struct ArtifactName(String);

/// Why a name was refused; the message quotes the name and the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("artifact name {name:?} {reason}")]
pub struct InvalidName {
    /// The refused name, cut to [`MAX_NAME_BYTES`] characters.
    pub name: String,
    /// The rule it breaks, worded to follow the name (`is empty`, `contains a backslash; ...`).
    pub reason: &'static str,
}

impl ArtifactName {
    /// Checks `name` against the rules in the module documentation.
    pub fn parse(name: &str) -> Result<Self, InvalidName> {
        let refuse = |reason| {
            Err(InvalidName {
                name: name.chars().take(MAX_NAME_BYTES).collect(),
                reason,
            })
        };
        if name.is_empty() {
            return refuse("is empty");
        }
        if name.len() > MAX_NAME_BYTES {
            return refuse("is too long (at most 512 bytes)");
        }
        if name.starts_with('/') {
            return refuse("is absolute; use a relative path such as `facts.json`");
        }
        let components: Vec<&str> = name.split('/').collect();
        if components.len() > MAX_DEPTH {
            return refuse("is nested too deeply (at most 8 components)");
        }
        for component in &components {
            if let Err(reason) = check_component(component) {
                return refuse(reason);
            }
        }
        if RESERVED_ARTIFACT_NAMES
            .iter()
            .any(|reserved| reserved.eq_ignore_ascii_case(name))
        {
            return refuse(
                "is reserved: the aggregator writes `error.json` beside a failed result's artifacts",
            );
        }
        Ok(ArtifactName(name.to_owned()))
    }

    /// The name as the plugin gave it, `/`-separated.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The name as a relative path, safe to join onto a directory.
    pub fn to_relative_path(&self) -> PathBuf {
        self.0.split('/').collect()
    }
}

impl fmt::Display for ArtifactName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The artifact names of one result, as they will be unpacked: refuses a name that would land on
/// another one on a case-insensitive file system (macOS, Windows), or a file where another name
/// needs a directory (`logs` and `logs/a`). Case is folded with Unicode's lowercase mapping;
/// names that differ only in Unicode normalisation are not compared.
#[derive(Debug, Default)]
pub struct UnpackedNames {
    /// Case-folded path -> the name it came from, and whether it is a file (else a directory).
    paths: std::collections::HashMap<String, (String, bool)>,
}

/// Two names of one result that cannot both be unpacked; holds the earlier and the later one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "artifact names {0:?} and {1:?} cannot both be unpacked on a case-insensitive file system \
     (macOS, Windows), or one is a file where the other needs a directory; rename one"
)]
pub struct NameCollision(pub String, pub String);

impl UnpackedNames {
    /// Adds `name`, unless it collides with a name added before. A collision is always found
    /// before anything of `name` is added: a known path's parents are known too.
    pub fn insert(&mut self, name: &ArtifactName) -> Result<(), NameCollision> {
        let folded = name.as_str().to_lowercase();
        let collision = |other: &str| NameCollision(other.to_owned(), name.as_str().to_owned());
        let mut parts: Vec<&str> = folded.split('/').collect();
        let file = parts.pop().unwrap_or_default();
        let mut path = String::new();
        for dir in parts {
            path.push_str(dir);
            match self.paths.get(&path) {
                Some((other, true)) => return Err(collision(other)),
                Some(_) => {}
                None => {
                    self.paths
                        .insert(path.clone(), (name.as_str().to_owned(), false));
                }
            }
            path.push('/');
        }
        path.push_str(file);
        if let Some((other, _)) = self.paths.get(&path) {
            return Err(collision(other));
        }
        self.paths.insert(path, (name.as_str().to_owned(), true));
        Ok(())
    }
}

/// Longest file name (one path component) the file systems a run is kept or unpacked on hold.
pub const MAX_FILE_NAME_BYTES: usize = 255;
/// What the layout appends to a node's name to make a file name: `commits/<plugin>/<node>.json`
/// in the run directory and `meta/reports/<plugin>/<node>.json` in the bundle (factbuoy-bundle's
/// `layout`). The longest suffix decides the longest node name.
pub const NODE_FILE_SUFFIX: &str = ".json";
/// Longest node name: what a file name holds once the layout has added [`NODE_FILE_SUFFIX`].
pub const MAX_NODE_BYTES: usize = MAX_FILE_NAME_BYTES - NODE_FILE_SUFFIX.len();
/// Longest plugin or role name (a DNS subdomain); the layout uses plugin names as whole
/// directory names, with nothing appended.
pub const MAX_IDENTIFIER_BYTES: usize = 253;
/// Node names a run refuses: `global` names the result of a global plugin, stored where a node's
/// would be (`plugins/<plugin>/results/global/`).
pub const RESERVED_NODE_NAMES: &[&str] = &["global"];

/// What a checked identifier names; each kind has its own longest length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdentifierKind {
    /// A node: at most [`MAX_NODE_BYTES`], not one of [`RESERVED_NODE_NAMES`].
    Node,
    /// A plugin: at most [`MAX_IDENTIFIER_BYTES`].
    Plugin,
    /// The holder of an operator or global certificate: at most [`MAX_IDENTIFIER_BYTES`].
    Role,
}

impl IdentifierKind {
    /// The longest name of this kind, in bytes.
    pub fn max_bytes(self) -> usize {
        match self {
            IdentifierKind::Node => MAX_NODE_BYTES,
            IdentifierKind::Plugin | IdentifierKind::Role => MAX_IDENTIFIER_BYTES,
        }
    }
}

impl fmt::Display for IdentifierKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            IdentifierKind::Node => "node",
            IdentifierKind::Plugin => "plugin",
            IdentifierKind::Role => "role",
        })
    }
}

/// Why a node, plugin or role name was refused; the message quotes the name and the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} name {name:?} {reason}")]
pub struct InvalidIdentifier {
    /// What the name was for.
    pub kind: IdentifierKind,
    /// The refused name, cut to [`MAX_IDENTIFIER_BYTES`] characters.
    pub name: String,
    /// The rule it breaks, worded to follow the name.
    pub reason: String,
}

/// Checks a node, plugin or role name: lower-case letters, digits, `-` and `.`, starting and
/// ending with a letter or digit (Kubernetes node names follow the same rule), no longer than
/// its kind allows, and not reserved.
pub fn check_identifier(kind: IdentifierKind, name: &str) -> Result<(), InvalidIdentifier> {
    let refuse = |reason: String| {
        Err(InvalidIdentifier {
            kind,
            name: name.chars().take(MAX_IDENTIFIER_BYTES).collect(),
            reason,
        })
    };
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let bytes = name.as_bytes();
    let max = kind.max_bytes();
    if bytes.len() > max {
        return refuse(format!(
            "is {} bytes long; at most {max} fit in a file name once the bundle's layout adds to it",
            bytes.len()
        ));
    }
    let valid = !bytes.is_empty()
        && alnum(bytes[0])
        && alnum(bytes[bytes.len() - 1])
        && bytes.iter().all(|&b| alnum(b) || b == b'-' || b == b'.')
        && !name.contains("..");
    if !valid {
        return refuse(format!(
            "must be 1-{max} characters of a-z, 0-9, `-` and `.`, starting and ending with a letter or digit"
        ));
    }
    if let Err(reason) = check_component(name) {
        return refuse(reason.to_owned());
    }
    if kind == IdentifierKind::Node && RESERVED_NODE_NAMES.contains(&name) {
        return refuse(format!(
            "is reserved: it names the results of global plugins (reserved: {})",
            RESERVED_NODE_NAMES.join(", ")
        ));
    }
    Ok(())
}

/// Longest name a plugin gives itself in its description, in bytes (and each of its
/// parameters).
pub const MAX_PLUGIN_NAME_BYTES: usize = 63;

/// Whether `name` is a name a plugin may give itself in its description (the runtime refuses a
/// plugin whose description breaks it; `plugin new` names projects by it): lower-case `a-z`,
/// `0-9`, `-`, starting with a letter or digit, at most [`MAX_PLUGIN_NAME_BYTES`].
pub fn is_valid_plugin_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_PLUGIN_NAME_BYTES
        && !name.starts_with('-')
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// A node's name that passed [`check_identifier`]: it fits every file name the layout builds
/// from it and can never be mistaken for the `global` scope.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct NodeName(String);

/// Quoted like a string, as messages quote names (`node "a"`).
impl fmt::Debug for NodeName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl NodeName {
    /// Checks `name` as a node name.
    pub fn parse(name: &str) -> Result<Self, InvalidIdentifier> {
        check_identifier(IdentifierKind::Node, name)?;
        Ok(NodeName(name.to_owned()))
    }

    /// The node name of a machine called `host_name`: lower-case, with anything outside
    /// `a-z0-9.-` made `-`, and `localhost` for a name with nothing left.
    pub fn from_host_name(host_name: &str) -> Result<Self, InvalidIdentifier> {
        let lowered: String = host_name
            .to_lowercase()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                    c
                } else {
                    '-'
                }
            })
            .collect();
        match lowered.trim_matches(|c| c == '-' || c == '.') {
            "" => NodeName::parse("localhost"),
            trimmed => NodeName::parse(trimmed),
        }
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for NodeName {
    type Error = InvalidIdentifier;

    fn try_from(name: String) -> Result<Self, Self::Error> {
        check_identifier(IdentifierKind::Node, &name)?;
        Ok(NodeName(name))
    }
}

impl From<NodeName> for String {
    fn from(name: NodeName) -> String {
        name.0
    }
}

impl std::str::FromStr for NodeName {
    type Err = InvalidIdentifier;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        NodeName::parse(name)
    }
}

impl fmt::Display for NodeName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names_make_valid_node_names() {
        for (host, node) in [
            ("Web_01", "web-01"),
            ("host.example.com", "host.example.com"),
            ("--", "localhost"),
        ] {
            assert_eq!(NodeName::from_host_name(host).unwrap().as_str(), node);
        }
    }

    #[test]
    fn names_that_collide_when_unpacked_are_refused() {
        let insert_all = |names: &[&str]| {
            let mut set = UnpackedNames::default();
            names
                .iter()
                .try_for_each(|n| set.insert(&ArtifactName::parse(n).unwrap()))
        };
        for apart in [
            &["a.json", "b.json"][..],
            &["logs/a", "logs/b", "logs2"],
            &["x/y/z", "x/y2", "X2"],
        ] {
            assert!(insert_all(apart).is_ok(), "{apart:?}");
        }
        for colliding in [
            &["a.json", "A.json"][..],
            &["logs/a", "LOGS/b", "Logs"],
            &["logs", "logs/a"],
            &["logs/a/b", "logs/A"],
            &["Ä.txt", "ä.txt"],
        ] {
            assert!(insert_all(colliding).is_err(), "{colliding:?}");
        }
    }

    #[test]
    fn accepts_ordinary_relative_paths() {
        for name in [
            "facts.json",
            "logs/kern.json",
            "a b/ü-ñ.txt",
            "..hidden",
            "x..y",
        ] {
            assert_eq!(ArtifactName::parse(name).unwrap().as_str(), name);
        }
        assert_eq!(
            ArtifactName::parse("logs/kern.json")
                .unwrap()
                .to_relative_path(),
            PathBuf::from("logs").join("kern.json")
        );
    }

    #[test]
    fn refuses_traversal_and_odd_names_with_a_reason() {
        let cases = [
            ("", "is empty"),
            ("/etc/passwd", "is absolute"),
            ("../escape", "contains `.` or `..`"),
            ("a/../../b", "contains `.` or `..`"),
            ("./a", "contains `.` or `..`"),
            ("a\\b", "backslash"),
            ("a//b", "empty component"),
            ("dir/", "empty component"),
            ("nul\0byte", "control character"),
            ("new\nline", "control character"),
            ("a/b/c/d/e/f/g/h/i", "nested too deeply"),
        ];
        for (name, reason) in cases {
            let err = ArtifactName::parse(name).unwrap_err();
            assert!(err.to_string().contains(reason), "{name:?}: {err}");
        }
        assert!(ArtifactName::parse(&"x".repeat(256)).is_err());
        assert!(ArtifactName::parse(&"x/".repeat(300)).is_err());
    }

    #[test]
    fn names_unsafe_on_windows_or_macos_or_invisible_are_refused() {
        for bad in [
            "CON",
            "con",
            "nul.txt",
            "logs/Aux.tar.gz",
            "COM1",
            "lpt9.json",
            "COM\u{b9}",
            "conin$",
            "a.json:stream",
            "trailing.",
            "trailing ",
            "dir./a",
            "a*b",
            "a?b",
            "a<b",
            "a>b",
            "a|b",
            "a\"b",
            "evil\u{202e}nosj.exe",
            "a\u{2066}b",
            "zero\u{200b}width",
            "joiner\u{200d}",
            "bom\u{feff}",
            "line\u{2028}sep",
            "del\u{7f}",
            "error.json",
            "Error.JSON",
        ] {
            assert!(ArtifactName::parse(bad).is_err(), "{bad:?}");
        }
        for ok in [
            "console.json",
            "com10",
            "lpt",
            "nul-ish/a",
            "logs/error.json",
            ".hidden",
        ] {
            assert!(ArtifactName::parse(ok).is_ok(), "{ok:?}");
        }
        for bad in ["con", "nul.example.com", "com1", "aux"] {
            assert!(NodeName::parse(bad).is_err(), "{bad}");
            assert!(
                check_identifier(IdentifierKind::Plugin, bad).is_err(),
                "{bad}"
            );
        }
        assert!(NodeName::parse("console.example.com").is_ok());
    }

    #[test]
    fn identifiers_follow_dns_subdomain_rules() {
        for ok in [
            "node-1",
            "ip-10-0-0-1.ec2.internal",
            "a",
            "setup",
            "global-1",
        ] {
            assert!(NodeName::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "-a",
            "a-",
            "A",
            "a_b",
            "a/b",
            "..",
            "a..b",
            "ü",
            &"a".repeat(254),
        ] {
            assert!(NodeName::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn names_fit_the_file_names_built_from_them_and_global_is_no_node() {
        let longest = "a".repeat(MAX_NODE_BYTES);
        assert!(NodeName::parse(&longest).is_ok());
        assert!(format!("{longest}{NODE_FILE_SUFFIX}").len() <= MAX_FILE_NAME_BYTES);
        let error = NodeName::parse(&format!("{longest}a")).unwrap_err();
        assert!(error.to_string().contains("at most 250"), "{error}");
        let plugin = "p".repeat(MAX_IDENTIFIER_BYTES);
        assert!(check_identifier(IdentifierKind::Plugin, &plugin).is_ok());
        let error = NodeName::parse("global").unwrap_err();
        assert!(error.to_string().contains("reserved"), "{error}");
        assert!(check_identifier(IdentifierKind::Plugin, "global").is_ok());
        assert_eq!(format!("{:?}", NodeName::parse("n1").unwrap()), "\"n1\"");
        assert!(serde_json::from_str::<NodeName>("\"global\"").is_err());
        assert_eq!(
            serde_json::from_str::<NodeName>("\"n1\"").unwrap(),
            NodeName::parse("n1").unwrap()
        );
    }
}
