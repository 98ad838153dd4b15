//! `distribution`: which Linux distribution and version, ported from Ansible's
//! `DistributionFiles` and the `distro` library it vendors, so the answers match on every
//! distribution Ansible knows.
//!
//! First a guess from `distro` (os-release, `lsb_release`, `/etc/*-release`), then Ansible's
//! list of release files, each with its own parser; the first that parses settles the name.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use crate::ctx::Ctx;

/// Ansible's release files, in its order: path, name, and whether an empty file counts.
const OSDIST_LIST: &[(&str, &str, bool)] = &[
    ("/etc/altlinux-release", "Altlinux", false),
    ("/etc/oracle-release", "OracleLinux", false),
    ("/etc/slackware-version", "Slackware", false),
    ("/etc/centos-release", "CentOS", false),
    ("/etc/redhat-release", "RedHat", false),
    ("/etc/vmware-release", "VMwareESX", true),
    ("/etc/openwrt_release", "OpenWrt", false),
    ("/etc/os-release", "Amazon", false),
    ("/etc/system-release", "Amazon", false),
    ("/etc/alpine-release", "Alpine", false),
    ("/etc/arch-release", "Archlinux", true),
    ("/etc/os-release", "Archlinux", false),
    ("/etc/os-release", "SUSE", false),
    ("/etc/SuSE-release", "SUSE", false),
    ("/etc/gentoo-release", "Gentoo", false),
    ("/etc/os-release", "Debian", false),
    ("/etc/lsb-release", "Debian", false),
    ("/etc/lsb-release", "Mandriva", false),
    ("/etc/sourcemage-release", "SMGL", false),
    ("/usr/lib/os-release", "ClearLinux", false),
    ("/etc/coreos/update.conf", "Coreos", false),
    ("/etc/os-release", "Flatcar", false),
    ("/etc/os-release", "NA", false),
];

const OS_FAMILY_MAP: &[(&str, &[&str])] = &[
    (
        "RedHat",
        &[
            "RedHat",
            "RHEL",
            "Fedora",
            "CentOS",
            "Scientific",
            "SLC",
            "Ascendos",
            "CloudLinux",
            "PSBM",
            "OracleLinux",
            "OVS",
            "OEL",
            "Amazon",
            "Amzn",
            "Virtuozzo",
            "XenServer",
            "Alibaba",
            "EulerOS",
            "openEuler",
            "AlmaLinux",
            "Rocky",
            "TencentOS",
            "EuroLinux",
            "Kylin Linux Advanced Server",
            "MIRACLE",
        ],
    ),
    (
        "Debian",
        &[
            "Debian",
            "Ubuntu",
            "Raspbian",
            "Neon",
            "KDE neon",
            "Linux Mint",
            "SteamOS",
            "Devuan",
            "Kali",
            "Cumulus Linux",
            "Pop!_OS",
            "Parrot",
            "Pardus GNU/Linux",
            "Uos",
            "Deepin",
            "OSMC",
            "Linux Mint Debian Edition",
        ],
    ),
    (
        "Suse",
        &[
            "SuSE",
            "SLES",
            "SLED",
            "openSUSE",
            "openSUSE Tumbleweed",
            "SLES_SAP",
            "SUSE_LINUX",
            "openSUSE Leap",
            "ALP-Dolomite",
            "SL-Micro",
            "openSUSE MicroOS",
        ],
    ),
    ("Archlinux", &["Archlinux", "Antergos", "Manjaro"]),
    ("Mandrake", &["Mandrake", "Mandriva"]),
    (
        "Solaris",
        &["Solaris", "Nexenta", "OmniOS", "OpenIndiana", "SmartOS"],
    ),
    ("Slackware", &["Slackware"]),
    ("Altlinux", &["Altlinux"]),
    ("SMGL", &["SMGL"]),
    ("Gentoo", &["Gentoo", "Funtoo"]),
    ("Alpine", &["Alpine"]),
    ("AIX", &["AIX"]),
    ("HP-UX", &["HPUX"]),
    ("Darwin", &["MacOSX"]),
    ("FreeBSD", &["FreeBSD", "TrueOS"]),
    ("ClearLinux", &["Clear Linux OS", "Clear Linux Mix"]),
    (
        "DragonFly",
        &[
            "DragonflyBSD",
            "DragonFlyBSD",
            "Gentoo/DragonflyBSD",
            "Gentoo/DragonFlyBSD",
        ],
    ),
    ("NetBSD", &["NetBSD"]),
];

/// Characters Ansible strips from both ends of a release file.
const STRIP_QUOTES: &[char] = &['\'', '"', '\\'];

type Facts = BTreeMap<String, Value>;

// The patterns every run uses, compiled once.
/// `distro`'s pattern for a release file's first line, which it matches reversed.
static RELEASE_CONTENT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:[^)]*\)(.*)\()? *(?:STL )?([\d.+\-a-z]*\d) *(?:esaeler *)?(.+)")
        .expect("valid regex")
});
/// The codename in os-release's `VERSION`: `22.04.4 LTS (Jammy Jellyfish)`.
static VERSION_CODENAME: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\((\D+)\)|,\s*(\D+)").expect("valid regex"));
/// Release file names in /etc: `redhat-release`, `slackware-version`.
static RELEASE_FILE_NAME: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(\w+)[-_](release|version)$").expect("valid regex"));

pub fn collect(ctx: &mut Ctx) {
    let kernel_release = ctx.fact_str("kernel").unwrap_or("").to_owned();
    let kernel_version = ctx.fact_str("kernel_version").unwrap_or("").to_owned();
    let mut facts = Facts::new();
    facts.insert("distribution".into(), "Linux".into());
    facts.insert("distribution_release".into(), kernel_release.into());
    facts.insert("distribution_version".into(), kernel_version.into());

    let distro = Distro::read(ctx);
    let files = DistributionFiles {
        ctx,
        distro: &distro,
    };
    facts.extend(files.process_dist_files());

    let name = facts
        .get("distribution")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    facts.insert("os_family".into(), os_family(&name).into());
    for (key, value) in facts {
        ctx.set(key, value);
    }
}

fn os_family(distribution: &str) -> String {
    OS_FAMILY_MAP
        .iter()
        .find(|(_, names)| names.contains(&distribution))
        .map(|(family, _)| family.to_string())
        .unwrap_or_else(|| distribution.to_owned())
}

/// What the `distro` library reads: os-release, `lsb_release -a`, a distro release file.
struct Distro {
    os_release: BTreeMap<String, String>,
    lsb_release: BTreeMap<String, String>,
    distro_release: BTreeMap<String, String>,
    debian_version: String,
}

impl Distro {
    fn read(ctx: &Ctx) -> Self {
        let os_release_path = if ctx.fs.is_file("/etc/os-release") {
            "/etc/os-release"
        } else {
            "/usr/lib/os-release"
        };
        let os_release = ctx
            .read_raw(os_release_path)
            .map(|text| parse_os_release(&text))
            .unwrap_or_default();
        let lsb_release = super::lsb::lsb_release_output(ctx)
            .map(|text| parse_lsb_release(&text))
            .unwrap_or_default();
        Distro {
            distro_release: distro_release_info(ctx),
            debian_version: ctx
                .read_raw("/etc/debian_version")
                .and_then(|t| t.lines().next().map(|l| l.trim_end().to_owned()))
                .unwrap_or_default(),
            os_release,
            lsb_release,
        }
    }

    fn os(&self, key: &str) -> &str {
        self.os_release.get(key).map(String::as_str).unwrap_or("")
    }
    fn lsb(&self, key: &str) -> &str {
        self.lsb_release.get(key).map(String::as_str).unwrap_or("")
    }
    fn release(&self, key: &str) -> &str {
        self.distro_release
            .get(key)
            .map(String::as_str)
            .unwrap_or("")
    }

    /// `distro.id()`.
    fn id(&self) -> String {
        let normalize = |id: &str, table: &[(&str, &str)]| {
            let id = id.to_lowercase().replace(' ', "_");
            table
                .iter()
                .find(|(from, _)| *from == id)
                .map(|(_, to)| to.to_string())
                .unwrap_or(id)
        };
        if !self.os("id").is_empty() {
            return normalize(
                self.os("id"),
                &[("ol", "oracle"), ("opensuse-leap", "opensuse")],
            );
        }
        if !self.lsb("distributor_id").is_empty() {
            return normalize(
                self.lsb("distributor_id"),
                &[
                    ("enterpriseenterpriseas", "oracle"),
                    ("enterpriseenterpriseserver", "oracle"),
                    ("redhatenterpriseworkstation", "rhel"),
                    ("redhatenterpriseserver", "rhel"),
                    ("redhatenterprisecomputenode", "rhel"),
                ],
            );
        }
        if !self.release("id").is_empty() {
            return normalize(self.release("id"), &[("redhat", "rhel")]);
        }
        String::new()
    }

    /// `distro.version(best=...)`.
    fn version(&self, best: bool) -> String {
        let mut versions = vec![
            self.os("version_id").to_owned(),
            self.lsb("release").to_owned(),
            self.release("version_id").to_owned(),
            release_content_version(self.os("pretty_name")),
            release_content_version(self.lsb("description")),
        ];
        let id = self.id();
        if id == "debian" || self.os("id_like").split_whitespace().any(|l| l == "debian") {
            versions.push(self.debian_version.clone());
        }
        let mut version = String::new();
        for v in versions {
            if best {
                if v.matches('.').count() > version.matches('.').count() || version.is_empty() {
                    version = v;
                }
            } else if !v.is_empty() {
                return v;
            }
        }
        version
    }

    /// `distro.codename()`.
    fn codename(&self) -> String {
        if let Some(codename) = self.os_release.get("codename") {
            return codename.clone();
        }
        [self.lsb("codename"), self.release("codename")]
            .into_iter()
            .find(|c| !c.is_empty())
            .unwrap_or("")
            .to_owned()
    }
}

/// The `version_id` `distro` finds in a line such as `CentOS Linux release 7.9.2009 (Core)`.
fn release_content_version(line: &str) -> String {
    parse_distro_release_content(line)
        .remove("version_id")
        .unwrap_or_default()
}

/// `distro`'s parser of a release file's first line, which matches the line reversed.
fn parse_distro_release_content(line: &str) -> BTreeMap<String, String> {
    let reversed: String = line.trim().chars().rev().collect();
    let pattern = &*RELEASE_CONTENT;
    let unreverse = |s: &str| s.chars().rev().collect::<String>();
    let mut info = BTreeMap::new();
    if let Some(captures) = pattern.captures(&reversed) {
        if let Some(name) = captures.get(3) {
            info.insert("name".into(), unreverse(name.as_str()));
        }
        if let Some(version) = captures.get(2).filter(|m| !m.as_str().is_empty()) {
            info.insert("version_id".into(), unreverse(version.as_str()));
        }
        if let Some(codename) = captures.get(1).filter(|m| !m.as_str().is_empty()) {
            info.insert("codename".into(), unreverse(codename.as_str()));
        }
    } else if !line.is_empty() {
        info.insert("name".into(), line.trim().to_owned());
    }
    info
}

/// `distro`'s os-release reader: keys lower-cased, plus its `codename` and `release_codename`.
fn parse_os_release(text: &str) -> BTreeMap<String, String> {
    let mut props: BTreeMap<String, String> = factbuoy_guest::linux::os_release::parse(text)
        .into_iter()
        .map(|(k, v)| (k.to_lowercase(), v))
        .collect();
    if let Some(version) = props.get("version") {
        let pattern = &*VERSION_CODENAME;
        if let Some(c) = pattern.captures(version)
            && let Some(codename) = c.get(1).or(c.get(2)).map(|m| m.as_str().to_owned())
        {
            props.insert("codename".into(), codename.clone());
            props.insert("release_codename".into(), codename);
        }
    }
    let codename = props
        .get("version_codename")
        .or(props.get("ubuntu_codename"))
        .cloned();
    if let Some(codename) = codename {
        props.insert("codename".into(), codename);
    }
    props
}

/// `distro`'s parser of `lsb_release -a`: `Key: value` lines, keys lower-cased with `_`.
fn parse_lsb_release(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|line| {
            let (key, value) = line.split_once(':')?;
            Some((
                key.replace(' ', "_").to_lowercase(),
                value.trim().to_owned(),
            ))
        })
        .collect()
}

/// `distro`'s release file: the first `/etc/<id>[-_](release|version)` (sorted, some ignored)
/// whose first line names a distribution.
fn distro_release_info(ctx: &Ctx) -> BTreeMap<String, String> {
    const IGNORED: &[&str] = &[
        "debian_version",
        "lsb-release",
        "oem-release",
        "os-release",
        "system-release",
        "plesk-release",
        "iredmail-release",
        "board-release",
        "ec2_version",
    ];
    let pattern = &*RELEASE_FILE_NAME;
    let mut names: Vec<String> = ctx
        .list("/etc")
        .unwrap_or_default()
        .into_iter()
        .filter(|name| !IGNORED.contains(&name.as_str()))
        .filter(|name| pattern.is_match(name))
        .filter(|name| ctx.fs.is_file(&format!("/etc/{name}")))
        .collect();
    names.sort();
    for name in names {
        let first_line = ctx
            .read_raw(&format!("/etc/{name}"))
            .and_then(|t| t.lines().next().map(str::to_owned))
            .unwrap_or_default();
        let mut info = parse_distro_release_content(&first_line);
        if !info.contains_key("name") {
            continue;
        }
        if let Some(c) = pattern.captures(&name) {
            info.insert("id".into(), c[1].to_owned());
        }
        if info
            .get("name")
            .is_some_and(|n| n.to_lowercase().contains("cloudlinux"))
        {
            info.insert("id".into(), "cloudlinux".into());
        }
        return info;
    }
    BTreeMap::new()
}

/// Ansible's `DistributionFiles`.
struct DistributionFiles<'a> {
    ctx: &'a Ctx,
    distro: &'a Distro,
}

impl DistributionFiles<'_> {
    /// Ansible's `_guess_distribution`, from `distro`.
    fn guess(&self) -> Facts {
        let id = self.distro.id();
        let mut name = capitalize(&id);
        match name.as_str() {
            "Amzn" => name = "Amazon".into(),
            "Rhel" => name = "Redhat".into(),
            "" => name = "OtherLinux".into(),
            _ => {}
        }
        let mut version = self.distro.version(false);
        if id == "centos" {
            let best = self.distro.version(true);
            version = best.split('.').take(2).collect::<Vec<_>>().join(".");
        } else if id == "debian" {
            version = self.distro.version(true);
        }
        let codename = self.codename(&id);
        let version = if version.is_empty() {
            "NA".to_owned()
        } else {
            version
        };
        let major = version
            .split('.')
            .next()
            .filter(|m| !m.is_empty())
            .unwrap_or("NA")
            .to_owned();
        let mut facts = Facts::new();
        facts.insert("distribution".into(), name.into());
        facts.insert("distribution_version".into(), version.into());
        facts.insert(
            "distribution_release".into(),
            codename.unwrap_or_else(|| "NA".into()).into(),
        );
        facts.insert("distribution_major_version".into(), major.into());
        facts
    }

    /// Ansible's `get_distribution_codename`.
    fn codename(&self, id: &str) -> Option<String> {
        let os = &self.distro.os_release;
        os.get("version_codename")
            .or(os.get("ubuntu_codename"))
            .cloned()
            .or_else(|| {
                (id == "ubuntu")
                    .then(|| self.distro.lsb_release.get("codename").cloned())
                    .flatten()
            })
            .or_else(|| Some(self.distro.codename()).filter(|c| !c.is_empty()))
    }

    fn process_dist_files(&self) -> Facts {
        let mut facts = self.guess();
        // /etc/os-release is tried by several parsers: look at each file once.
        let mut seen: BTreeMap<(&str, bool), Option<String>> = BTreeMap::new();
        for (path, name, allow_empty) in OSDIST_LIST {
            let content = seen
                .entry((path, *allow_empty))
                .or_insert_with(|| self.dist_file_content(path, *allow_empty))
                .clone();
            let Some(content) = content else {
                continue;
            };
            if *allow_empty {
                facts.insert("distribution".into(), (*name).into());
                facts.insert("distribution_file_path".into(), (*path).into());
                facts.insert("distribution_file_variety".into(), (*name).into());
                break;
            }
            if let Some(parsed) = self.parse_dist_file(name, &content, path, &facts) {
                facts.insert("distribution".into(), (*name).into());
                facts.insert("distribution_file_path".into(), (*path).into());
                facts.insert("distribution_file_variety".into(), (*name).into());
                facts.insert("distribution_file_parsed".into(), true.into());
                facts.extend(parsed);
                break;
            }
        }
        facts
    }

    /// The stripped content of a release file that exists (and is not empty, unless allowed).
    fn dist_file_content(&self, path: &str, allow_empty: bool) -> Option<String> {
        let meta = self.ctx.fs.metadata(path).ok().filter(|m| m.is_file())?;
        if !allow_empty && meta.len() == 0 {
            return None;
        }
        Some(self.ctx.read(path).unwrap_or_default())
    }

    fn parse_dist_file(
        &self,
        name: &str,
        content: &str,
        path: &str,
        facts: &Facts,
    ) -> Option<Facts> {
        let content = content.trim_matches(STRIP_QUOTES);
        let search = match name {
            "OracleLinux" => Some("Oracle Linux"),
            "RedHat" => Some("Red Hat"),
            "Altlinux" => Some("ALT"),
            "SMGL" => Some("Source Mage GNU/Linux"),
            _ => None,
        };
        if let Some(search) = search {
            let mut out = Facts::new();
            if content.contains(search) {
                out.insert("distribution".into(), name.into());
                out.insert("distribution_file_search_string".into(), search.into());
            } else {
                let first = content.split_whitespace().next().unwrap_or("");
                out.insert("distribution".into(), first.into());
            }
            return Some(out);
        }
        if name == "Archlinux" {
            return content
                .contains("Arch Linux")
                .then(|| Facts::from([("distribution".to_owned(), Value::from(name))]));
        }
        match name {
            "Slackware" => parse_slackware(content),
            "Amazon" => parse_amazon(content, path),
            "OpenWrt" => parse_openwrt(content),
            "Alpine" => Some(Facts::from([
                ("distribution".to_owned(), Value::from("Alpine")),
                ("distribution_version".to_owned(), Value::from(content)),
            ])),
            "SUSE" => self.parse_suse(content, path, facts),
            "Debian" => parse_debian(self.ctx, content, path, facts),
            "Mandriva" => parse_mandriva(content),
            "NA" => Some(parse_na(content, name, facts)),
            "Coreos" => self.parse_coreos(content),
            "Flatcar" => self.parse_flatcar(content),
            "ClearLinux" => parse_clearlinux(content, name),
            "CentOS" => parse_centos(content),
            // Gentoo, VMwareESX and the like have no parser: Ansible moves on.
            _ => None,
        }
    }

    fn parse_suse(&self, data: &str, path: &str, facts: &Facts) -> Option<Facts> {
        let lower = data.to_lowercase();
        if !lower.contains("suse") {
            return None;
        }
        let mut out = Facts::new();
        if path == "/etc/os-release" {
            let name_re = Regex::new(r"^NAME=(.*)").expect("valid regex");
            let version_re =
                Regex::new(r#"^VERSION_ID="?([0-9]+\.?[0-9]*)"?"#).expect("valid regex");
            let release_re =
                Regex::new(r#"^VERSION_ID="?[0-9]+\.?([0-9]*)"?"#).expect("valid regex");
            for line in data.lines() {
                if let Some(c) = name_re.captures(line) {
                    out.insert("distribution".into(), c[1].trim_matches('"').into());
                }
                if let Some(c) = version_re.captures(line) {
                    out.insert("distribution_version".into(), c[1].into());
                    let major = c[1].split('.').next().unwrap_or("");
                    out.insert("distribution_major_version".into(), major.into());
                }
                if lower.contains("open") {
                    if let Some(c) = release_re.captures(line) {
                        out.insert("distribution_release".into(), c[1].into());
                    }
                } else if lower.contains("enterprise")
                    && line.contains("VERSION_ID")
                    && let Some(c) = release_re.captures(line)
                {
                    let release = if c[1].is_empty() { "0" } else { &c[1] };
                    out.insert("distribution_release".into(), release.into());
                }
            }
        } else if path == "/etc/SuSE-release" {
            if lower.contains("open") {
                let first = data.lines().next().unwrap_or("").split_whitespace().next();
                out.insert("distribution".into(), first.unwrap_or("").into());
                let codename_re = Regex::new(r"CODENAME *= *([^\n]+)").expect("valid regex");
                for line in data.lines() {
                    if let Some(c) = codename_re.captures(line) {
                        out.insert("distribution_release".into(), c[1].trim().into());
                    }
                }
            } else if lower.contains("enterprise") {
                if data.contains("Server") {
                    out.insert("distribution".into(), "SLES".into());
                } else if data.contains("Desktop") {
                    out.insert("distribution".into(), "SLED".into());
                }
                let patch_re = Regex::new(r"PATCHLEVEL = ([0-9]+)").expect("valid regex");
                for line in data.lines() {
                    if let Some(c) = patch_re.captures(line) {
                        out.insert("distribution_release".into(), c[1].into());
                        let base = facts
                            .get("distribution_version")
                            .and_then(Value::as_str)
                            .unwrap_or("");
                        out.insert(
                            "distribution_version".into(),
                            format!("{base}.{}", &c[1]).into(),
                        );
                    }
                }
            }
        }
        let variant_re = Regex::new(r#"(?m)^VARIANT_ID="?([^"\n]*)"?"#).expect("valid regex");
        if let Some(c) = variant_re.captures(data) {
            match &c[1] {
                "server-sap" | "sles-sap" => {
                    out.insert("distribution".into(), "SLES_SAP".into());
                }
                "transactional" => {
                    out.insert("distribution".into(), "SL-Micro".into());
                }
                _ => {}
            }
        } else if self.ctx.fs.is_symlink("/etc/products.d/baseproduct") {
            let resolved = self
                .ctx
                .fs
                .canonicalize("/etc/products.d/baseproduct")
                .unwrap_or_default();
            if resolved.ends_with("SLES_SAP.prod") {
                out.insert("distribution".into(), "SLES_SAP".into());
            } else if resolved.ends_with("SL-Micro.prod") {
                out.insert("distribution".into(), "SL-Micro".into());
            }
        }
        Some(out)
    }

    fn parse_coreos(&self, data: &str) -> Option<Facts> {
        if self.distro.id() != "coreos" || data.is_empty() {
            return None;
        }
        let mut out = Facts::new();
        if let Some(c) = Regex::new(r"^GROUP=(.*)")
            .expect("valid regex")
            .captures(data)
        {
            out.insert("distribution_release".into(), c[1].trim_matches('"').into());
        }
        Some(out)
    }

    fn parse_flatcar(&self, data: &str) -> Option<Facts> {
        if self.distro.id() != "flatcar" || data.is_empty() {
            return None;
        }
        let mut out = Facts::new();
        if let Some(c) = Regex::new(r"VERSION=(.*)")
            .expect("valid regex")
            .captures(data)
        {
            let version = c[1].trim_matches('"');
            out.insert(
                "distribution_major_version".into(),
                version.split('.').next().unwrap_or("").into(),
            );
            out.insert("distribution_version".into(), version.into());
        }
        Some(out)
    }
}

/// Python's `str.capitalize`: first character upper case, the rest lower case.
fn capitalize(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first
            .to_uppercase()
            .chain(chars.flat_map(char::to_lowercase))
            .collect(),
        None => String::new(),
    }
}

fn capture(pattern: &str, data: &str) -> Option<String> {
    Regex::new(pattern)
        .expect("valid regex")
        .captures(data)
        .and_then(|c| c.get(1).map(|m| m.as_str().to_owned()))
}

fn parse_slackware(data: &str) -> Option<Facts> {
    if !data.contains("Slackware") {
        return None;
    }
    let mut out = Facts::from([("distribution".to_owned(), Value::from("Slackware"))]);
    if let Some(m) = Regex::new(r"\w+[.]\w+\+?").expect("valid regex").find(data) {
        out.insert("distribution_version".into(), m.as_str().into());
    }
    Some(out)
}

fn parse_amazon(data: &str, path: &str) -> Option<Facts> {
    if !data.contains("Amazon") {
        return None;
    }
    let mut out = Facts::from([("distribution".to_owned(), Value::from("Amazon"))]);
    if path == "/etc/os-release" {
        if let Some(version) = capture(r#"VERSION_ID="(.*)""#, data) {
            let parts: Vec<&str> = version.split('.').collect();
            let (major, minor) = match parts.as_slice() {
                [major, minor] => (major.to_string(), minor.to_string()),
                [major] => (major.to_string(), "NA".to_owned()),
                // Ansible's unpacking fails on more parts; keep the version only.
                _ => {
                    out.insert("distribution_version".into(), version.into());
                    return Some(out);
                }
            };
            out.insert("distribution_version".into(), version.into());
            out.insert("distribution_major_version".into(), major.into());
            out.insert("distribution_minor_version".into(), minor.into());
        }
    } else {
        let version = data
            .split_whitespace()
            .find(|w| w.chars().all(|c| c.is_ascii_digit()))
            .unwrap_or("NA");
        out.insert("distribution_version".into(), version.into());
    }
    Some(out)
}

/// What Ansible's `dpkg --status tzdata|grep Provides|cut -f2 -d'-'` prints (`bookworm` from
/// `Provides: tzdata-bookworm`), from the status database dpkg reads; `None` without dpkg.
/// The pipeline's status is `cut`'s, so a missing package or line gives an empty release.
fn tzdata_release(ctx: &Ctx) -> Option<String> {
    ctx.find_bin("dpkg")?;
    let status = ctx.read_raw(DPKG_STATUS).unwrap_or_default();
    let stanza = status
        .split("\n\n")
        .find(|stanza| stanza.lines().any(|line| line == "Package: tzdata"))
        .unwrap_or_default();
    let lines: Vec<&str> = stanza
        .lines()
        .filter(|line| line.contains("Provides"))
        // cut prints a line without the delimiter whole.
        .map(|line| line.split('-').nth(1).unwrap_or(line))
        .collect();
    Some(lines.join("\n").trim().to_owned())
}

/// dpkg's database of installed packages.
const DPKG_STATUS: &str = "/var/lib/dpkg/status";

fn parse_openwrt(data: &str) -> Option<Facts> {
    if !data.contains("OpenWrt") {
        return None;
    }
    let mut out = Facts::from([("distribution".to_owned(), Value::from("OpenWrt"))]);
    if let Some(v) = capture(r#"DISTRIB_RELEASE="(.*)""#, data) {
        out.insert("distribution_version".into(), v.into());
    }
    if let Some(r) = capture(r#"DISTRIB_CODENAME="(.*)""#, data) {
        out.insert("distribution_release".into(), r.into());
    }
    Some(out)
}

fn parse_debian(ctx: &Ctx, data: &str, path: &str, collected: &Facts) -> Option<Facts> {
    let mut out = Facts::new();
    let set = |out: &mut Facts, key: &str, value: String| {
        out.insert(key.to_owned(), value.into());
    };
    if data.contains("Debian") || data.contains("Raspbian") {
        set(&mut out, "distribution", "Debian".into());
        if let Some(release) = capture(r"PRETTY_NAME=[^(]+ \(?([^)]+?)\)", data) {
            set(&mut out, "distribution_release", release);
        }
        // The last resort, for testing and sid, whose os-release names no release.
        let guessed = collected
            .get("distribution_release")
            .and_then(Value::as_str);
        if guessed == Some("NA")
            && data.contains("Debian")
            && let Some(release) = tzdata_release(ctx)
        {
            set(&mut out, "distribution_release", release);
        }
        let minor = Regex::new(r"(\d+)\.(\d+)").expect("valid regex");
        for line in ctx
            .read_raw("/etc/debian_version")
            .unwrap_or_default()
            .lines()
        {
            if let Some(c) = minor.captures(line.trim()) {
                set(&mut out, "distribution_minor_version", c[2].to_owned());
            }
        }
    } else if data.contains("Ubuntu") {
        set(&mut out, "distribution", "Ubuntu".into());
    } else if data.contains("SteamOS") {
        set(&mut out, "distribution", "SteamOS".into());
    } else if (path == "/etc/lsb-release" || path == "/etc/os-release")
        && (data.contains("Kali") || data.contains("Parrot"))
    {
        let name = if data.contains("Kali") {
            "Kali"
        } else {
            "Parrot"
        };
        set(&mut out, "distribution", name.into());
        if let Some(release) = capture(r"DISTRIB_RELEASE=(.*)", data) {
            set(&mut out, "distribution_release", release);
        }
    } else if data.contains("Devuan") {
        set(&mut out, "distribution", "Devuan".into());
        if let Some(release) = capture(r#"PRETTY_NAME="?[^("]+ \(?([^) "]+)\)?"#, data) {
            set(&mut out, "distribution_release", release);
        }
        if let Some(version) = capture(r#"VERSION_ID="(.*)""#, data) {
            set(&mut out, "distribution_version", version.clone());
            set(&mut out, "distribution_major_version", version);
        }
    } else if data.contains("Cumulus") {
        set(&mut out, "distribution", "Cumulus Linux".into());
        if let Some(version) = capture(r"VERSION_ID=(.*)", data)
            && let [major, _, _] = version.split('.').collect::<Vec<_>>().as_slice()
        {
            let major = major.to_string();
            set(&mut out, "distribution_version", version.clone());
            set(&mut out, "distribution_major_version", major);
        }
        if let Some(release) = capture(r#"VERSION="(.*)""#, data) {
            set(&mut out, "distribution_release", release);
        }
    } else if data.contains("Mint") {
        set(&mut out, "distribution", "Linux Mint".into());
        if let Some(version) = capture(r#"VERSION_ID="(.*)""#, data) {
            let major = version.split('.').next().unwrap_or("").to_owned();
            set(&mut out, "distribution_version", version);
            set(&mut out, "distribution_major_version", major);
        }
    } else if data.contains("UOS")
        || data.contains("Uos")
        || data.contains("uos")
        || data.contains("Deepin")
        || data.contains("deepin")
    {
        let name = if data.contains("UOS") || data.contains("Uos") || data.contains("uos") {
            "Uos"
        } else {
            "Deepin"
        };
        set(&mut out, "distribution", name.into());
        if let Some(release) = capture(r#"VERSION_CODENAME="?([^"]+)"?"#, data) {
            set(&mut out, "distribution_release", release);
        }
        if let Some(version) = capture(r#"VERSION_ID="(.*)""#, data) {
            let major = version.split('.').next().unwrap_or("").to_owned();
            set(&mut out, "distribution_version", version);
            set(&mut out, "distribution_major_version", major);
        }
    } else if data.contains("LMDE") {
        set(&mut out, "distribution", "Linux Mint Debian Edition".into());
    } else {
        return None;
    }
    Some(out)
}

fn parse_mandriva(data: &str) -> Option<Facts> {
    if !data.contains("Mandriva") {
        return None;
    }
    let mut out = Facts::from([("distribution".to_owned(), Value::from("Mandriva"))]);
    if let Some(v) = capture(r#"DISTRIB_RELEASE="(.*)""#, data) {
        out.insert("distribution_version".into(), v.into());
    }
    if let Some(r) = capture(r#"DISTRIB_CODENAME="(.*)""#, data) {
        out.insert("distribution_release".into(), r.into());
    }
    Some(out)
}

fn parse_na(data: &str, name: &str, facts: &Facts) -> Facts {
    let mut out = Facts::new();
    for line in data.lines() {
        if let Some(distribution) = line.strip_prefix("NAME=")
            && name == "NA"
        {
            out.insert("distribution".into(), distribution.trim_matches('"').into());
        }
        if let Some(version) = line.strip_prefix("VERSION=")
            && facts.get("distribution_version").and_then(Value::as_str) == Some("NA")
        {
            out.insert(
                "distribution_version".into(),
                version.trim_matches('"').into(),
            );
        }
    }
    out
}

fn parse_clearlinux(data: &str, name: &str) -> Option<Facts> {
    if !name.to_lowercase().contains("clearlinux") {
        return None;
    }
    let mut out = Facts::new();
    if let Some(pname) = capture(r#"NAME="(.*)""#, data) {
        if !pname.contains("Clear Linux") {
            return None;
        }
        out.insert("distribution".into(), pname.into());
    }
    if let Some(version) = capture(r"VERSION_ID=(.*)", data) {
        out.insert("distribution_major_version".into(), version.clone().into());
        out.insert("distribution_version".into(), version.into());
    }
    if let Some(release) = capture(r"ID=(.*)", data) {
        out.insert("distribution_release".into(), release.into());
    }
    Some(out)
}

fn parse_centos(data: &str) -> Option<Facts> {
    if data.contains("CentOS Stream") {
        return Some(Facts::from([(
            "distribution_release".to_owned(),
            Value::from("Stream"),
        )]));
    }
    if data.contains("TencentOS Server") {
        return Some(Facts::from([(
            "distribution".to_owned(),
            Value::from("TencentOS"),
        )]));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_file_lines() {
        let info = parse_distro_release_content("CentOS Linux release 7.9.2009 (Core)");
        assert_eq!(info["name"], "CentOS Linux");
        assert_eq!(info["version_id"], "7.9.2009");
        assert_eq!(info["codename"], "Core");
        let info = parse_distro_release_content("Debian GNU/Linux 12 (bookworm)");
        assert_eq!(info["version_id"], "12");
        assert_eq!(info["codename"], "bookworm");
        let info = parse_distro_release_content("no version here");
        assert_eq!(info["name"], "no version here");
    }

    #[test]
    fn os_release_codenames() {
        let props = parse_os_release(
            "ID=ubuntu\nVERSION=\"22.04.4 LTS (Jammy Jellyfish)\"\nUBUNTU_CODENAME=jammy\n",
        );
        assert_eq!(props["codename"], "jammy");
        assert_eq!(props["release_codename"], "Jammy Jellyfish");
        let props = parse_os_release("ID=rhel\nVERSION=\"9.3 (Plow)\"\n");
        assert_eq!(props["codename"], "Plow");
    }

    #[test]
    fn families_and_capitalize() {
        assert_eq!(os_family("Ubuntu"), "Debian");
        assert_eq!(os_family("Rocky"), "RedHat");
        assert_eq!(os_family("Unheard"), "Unheard");
        assert_eq!(capitalize("opensuse-leap"), "Opensuse-leap");
        assert_eq!(capitalize("DEBIAN"), "Debian");
    }

    #[test]
    fn debian_like_file_parsers() {
        let na = parse_na(
            "NAME=\"Foo OS\"\nVERSION=\"3 (x)\"\n",
            "NA",
            &Facts::from([("distribution_version".to_owned(), Value::from("NA"))]),
        );
        assert_eq!(na["distribution"], "Foo OS");
        assert_eq!(na["distribution_version"], "3 (x)");
        let amazon = parse_amazon(
            "NAME=\"Amazon Linux\"\nVERSION_ID=\"2023\"\n",
            "/etc/os-release",
        )
        .unwrap();
        assert_eq!(amazon["distribution_major_version"], "2023");
        assert_eq!(amazon["distribution_minor_version"], "NA");
        assert!(parse_centos("Rocky Linux").is_none());
    }
}
