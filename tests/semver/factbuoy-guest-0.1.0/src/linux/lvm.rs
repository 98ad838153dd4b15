//! LVM volume groups, logical and physical volumes from LVM's text metadata: the format LVM
//! keeps in each physical volume's metadata area and writes, after every change, to
//! `/etc/lvm/backup/<vg>` (`backup = 1` in lvm.conf, the default). What `vgs`, `lvs` and `pvs`
//! report as sizes is computed from it as LVM computes it.

use std::collections::BTreeMap;

/// Where the LVM tools write each volume group's metadata after every change.
pub const BACKUP_DIR: &str = "/etc/lvm/backup";

/// Why metadata could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("LVM metadata: {0}")]
pub struct ParseError(String);

/// One value of the metadata's configuration syntax.
#[derive(Debug, Clone, PartialEq)]
enum Value {
    Int(i64),
    Str(String),
    List(Vec<Value>),
    Section(Section),
}

/// A `name { ... }` block: its entries in order.
#[derive(Debug, Clone, PartialEq, Default)]
struct Section(Vec<(String, Value)>);

impl Section {
    fn get(&self, key: &str) -> Option<&Value> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
    fn int(&self, key: &str) -> Option<i64> {
        match self.get(key)? {
            Value::Int(n) => Some(*n),
            _ => None,
        }
    }
    fn str(&self, key: &str) -> Option<&str> {
        match self.get(key)? {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }
    fn list(&self, key: &str) -> &[Value] {
        match self.get(key) {
            Some(Value::List(items)) => items,
            _ => &[],
        }
    }
    fn sections(&self) -> impl Iterator<Item = (&str, &Section)> {
        self.0.iter().filter_map(|(k, v)| match v {
            Value::Section(s) => Some((k.as_str(), s)),
            _ => None,
        })
    }
    fn section(&self, key: &str) -> Option<&Section> {
        match self.get(key)? {
            Value::Section(s) => Some(s),
            _ => None,
        }
    }
    fn has_flag(&self, key: &str, flag: &str) -> bool {
        self.list(key)
            .iter()
            .any(|v| matches!(v, Value::Str(s) if s == flag))
    }
}

/// A volume group, as `vgs` sizes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeGroup {
    pub name: String,
    /// The command whose change the metadata records (`vgcreate vg0 /dev/sdb`), from the
    /// `Created *after* executing '...'` description the tools write.
    pub written_by: String,
    /// Extent size in bytes.
    pub extent_bytes: u64,
    pub physical_volumes: Vec<PhysicalVolume>,
    pub logical_volumes: Vec<LogicalVolume>,
}

/// A physical volume of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhysicalVolume {
    /// The PV's UUID, with dashes, as udev's `ID_FS_UUID` and `lvm-pv-uuid-*` links give it.
    pub id: String,
    /// The device it was on when the metadata was written (`device = ... # Hint only`).
    pub device_hint: String,
    pub extents: u64,
    pub free_extents: u64,
}

/// A logical volume `lvs` lists (a visible one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogicalVolume {
    pub name: String,
    pub extents: u64,
}

impl VolumeGroup {
    /// Reads the volume group from one metadata text (a backup file, or a PV's metadata area).
    pub fn parse(text: &str) -> Result<Self, ParseError> {
        let root = Parser::new(text).section_body(true)?;
        let (name, vg) = root
            .sections()
            .next()
            .ok_or_else(|| ParseError("no volume group section".into()))?;
        let extent_sectors = vg
            .int("extent_size")
            .filter(|n| *n > 0)
            .ok_or_else(|| ParseError(format!("{name}: no extent_size")))?;
        let pv_sections: Vec<(&str, &Section)> = vg
            .section("physical_volumes")
            .map(|s| s.sections().collect())
            .unwrap_or_default();
        // Extents each PV gives to segments: every LV, hidden ones included (mirror legs, thin
        // pool data), maps its stripes onto PVs by the PV's key in this file (`pv0`).
        let mut used: BTreeMap<&str, u64> = BTreeMap::new();
        let mut logical_volumes = Vec::new();
        for (lv_name, lv) in vg
            .section("logical_volumes")
            .map(|s| s.sections().collect::<Vec<_>>())
            .unwrap_or_default()
        {
            let mut extents = 0u64;
            for (_, segment) in lv.sections() {
                let count = segment.int("extent_count").unwrap_or(0).max(0) as u64;
                extents += count;
                let stripes = segment.list("stripes");
                let stripe_count = (stripes.len() / 2).max(1) as u64;
                for pair in stripes.chunks(2) {
                    if let [Value::Str(pv), Value::Int(_)] = pair {
                        *used.entry(pv.as_str()).or_default() += count / stripe_count;
                    }
                }
            }
            if lv.has_flag("status", "VISIBLE") {
                logical_volumes.push(LogicalVolume {
                    name: lv_name.to_owned(),
                    extents,
                });
            }
        }
        let physical_volumes = pv_sections
            .iter()
            .map(|(key, pv)| {
                let extents = pv.int("pe_count").unwrap_or(0).max(0) as u64;
                PhysicalVolume {
                    id: pv.str("id").unwrap_or_default().to_owned(),
                    device_hint: pv.str("device").unwrap_or_default().to_owned(),
                    extents,
                    free_extents: extents.saturating_sub(used.get(key).copied().unwrap_or(0)),
                }
            })
            .collect();
        let written_by = root
            .str("description")
            .and_then(|d| d.split_once(" executing '"))
            .map(|(_, command)| command.trim_end_matches('\'').to_owned())
            .unwrap_or_default();
        Ok(VolumeGroup {
            name: name.to_owned(),
            written_by,
            extent_bytes: extent_sectors as u64 * 512,
            physical_volumes,
            logical_volumes,
        })
    }

    /// `vgremove` leaves the group's last backup behind (LVM 2.03 writes it once more after
    /// removing the logical volumes): the group is gone, its PVs are orphans.
    pub fn removed(&self) -> bool {
        self.written_by
            .split_whitespace()
            .next()
            .is_some_and(|program| program.rsplit('/').next() == Some("vgremove"))
    }

    pub fn extents(&self) -> u64 {
        self.physical_volumes.iter().map(|pv| pv.extents).sum()
    }

    pub fn free_extents(&self) -> u64 {
        self.physical_volumes.iter().map(|pv| pv.free_extents).sum()
    }
}

/// A size as `--units g --nosuffix` prints it: GiB with two decimals, rounded half to even
/// as C's `printf("%.2f")` rounds, and `0` for nothing.
pub fn gib(bytes: u64) -> String {
    if bytes == 0 {
        return "0".into();
    }
    const GIB: u128 = 1 << 30;
    let scaled = bytes as u128 * 100;
    let (mut hundredths, remainder) = (scaled / GIB, scaled % GIB);
    if remainder * 2 > GIB || (remainder * 2 == GIB && hundredths % 2 == 1) {
        hundredths += 1;
    }
    format!("{}.{:02}", hundredths / 100, hundredths % 100)
}

/// A reader of LVM's configuration syntax: `key = value`, `name { ... }`, strings in double
/// quotes with backslash escapes, integers, lists in brackets, `#` comments.
struct Parser<'a> {
    text: &'a [u8],
    at: usize,
}

impl<'a> Parser<'a> {
    fn new(text: &'a str) -> Self {
        Parser {
            text: text.as_bytes(),
            at: 0,
        }
    }

    fn error(&self, what: &str) -> ParseError {
        let line = self.text[..self.at.min(self.text.len())]
            .iter()
            .filter(|b| **b == b'\n')
            .count()
            + 1;
        ParseError(format!("line {line}: {what}"))
    }

    /// Skips blanks and comments; the next byte, if any.
    fn peek(&mut self) -> Option<u8> {
        while let Some(&b) = self.text.get(self.at) {
            if b == b'#' {
                while self.text.get(self.at).is_some_and(|b| *b != b'\n') {
                    self.at += 1;
                }
            } else if b.is_ascii_whitespace() {
                self.at += 1;
            } else {
                return Some(b);
            }
        }
        None
    }

    fn expect(&mut self, byte: u8) -> Result<(), ParseError> {
        if self.peek() == Some(byte) {
            self.at += 1;
            Ok(())
        } else {
            Err(self.error(&format!("expected `{}`", byte as char)))
        }
    }

    /// Entries up to the closing `}` (or the end of the text at the top level).
    fn section_body(&mut self, top: bool) -> Result<Section, ParseError> {
        let mut entries = Vec::new();
        loop {
            match self.peek() {
                None if top => return Ok(Section(entries)),
                None => return Err(self.error("unexpected end in a section")),
                Some(b'}') if !top => {
                    self.at += 1;
                    return Ok(Section(entries));
                }
                Some(_) => {
                    let key = self.identifier()?;
                    match self.peek() {
                        Some(b'{') => {
                            self.at += 1;
                            entries.push((key, Value::Section(self.section_body(false)?)));
                        }
                        Some(b'=') => {
                            self.at += 1;
                            entries.push((key, self.value()?));
                        }
                        _ => return Err(self.error("expected `=` or `{`")),
                    }
                }
            }
        }
    }

    fn identifier(&mut self) -> Result<String, ParseError> {
        let start = self.at;
        while self
            .text
            .get(self.at)
            .is_some_and(|b| b.is_ascii_alphanumeric() || b"_-+.".contains(b))
        {
            self.at += 1;
        }
        if start == self.at {
            return Err(self.error("expected a name"));
        }
        Ok(String::from_utf8_lossy(&self.text[start..self.at]).into_owned())
    }

    fn value(&mut self) -> Result<Value, ParseError> {
        match self.peek() {
            Some(b'"') => self.string().map(Value::Str),
            Some(b'[') => {
                self.at += 1;
                let mut items = Vec::new();
                loop {
                    if self.peek() == Some(b']') {
                        self.at += 1;
                        return Ok(Value::List(items));
                    }
                    items.push(self.value()?);
                    match self.peek() {
                        Some(b',') => self.at += 1,
                        Some(b']') => {}
                        _ => return Err(self.error("expected `,` or `]`")),
                    }
                }
            }
            Some(b) if b == b'-' || b.is_ascii_digit() => {
                let start = self.at;
                self.at += 1;
                while self
                    .text
                    .get(self.at)
                    .is_some_and(|b| b.is_ascii_digit() || *b == b'.')
                {
                    self.at += 1;
                }
                let text = String::from_utf8_lossy(&self.text[start..self.at]);
                // Floats (rare: none in volume group metadata) keep their integer part.
                let whole = text.split('.').next().unwrap_or_default();
                whole
                    .parse()
                    .map(Value::Int)
                    .map_err(|_| self.error(&format!("bad number {text:?}")))
            }
            _ => Err(self.error("expected a value")),
        }
    }

    fn string(&mut self) -> Result<String, ParseError> {
        self.expect(b'"')?;
        let mut bytes = Vec::new();
        loop {
            match self.text.get(self.at) {
                None => return Err(self.error("unterminated string")),
                Some(b'"') => {
                    self.at += 1;
                    return Ok(String::from_utf8_lossy(&bytes).into_owned());
                }
                Some(b'\\') => {
                    if let Some(b) = self.text.get(self.at + 1) {
                        bytes.push(*b);
                    }
                    self.at += 2;
                }
                Some(b) => {
                    bytes.push(*b);
                    self.at += 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The shape `vgcreate` and `lvcreate` write (LVM 2.03), trimmed.
    const BACKUP: &str = r#"# Generated by LVM2 version 2.03.16(2) (2022-05-18): Sun Nov 22 10:00:00 2026

contents = "Text Format Volume Group"
version = 1

description = "Created *after* executing 'lvcreate -L 40M -n data vg0'"

creation_host = "vm"	# Linux vm 6.1.0 #1 SMP x86_64
creation_time = 1795000000	# Sun Nov 22 10:00:00 2026

vg0 {
	id = "a1b2c3-d4e5-f6g7-h8i9-j0k1-l2m3-n4o5p6"
	seqno = 3
	format = "lvm2"			# informational
	status = ["RESIZEABLE", "READ", "WRITE"]
	flags = []
	extent_size = 8192		# 4 Megabytes
	max_lv = 0
	max_pv = 0
	metadata_copies = 0

	physical_volumes {

		pv0 {
			id = "Qx1Yz2-aaaa-bbbb-cccc-dddd-eeee-ffffff"
			device = "/dev/loop0"	# Hint only

			status = ["ALLOCATABLE"]
			flags = []
			dev_size = 204800	# 100 Megabytes
			pe_start = 2048
			pe_count = 24	# 96 Megabytes
		}
	}

	logical_volumes {

		data {
			id = "lvid-1"
			status = ["READ", "WRITE", "VISIBLE"]
			flags = []
			creation_time = 1795000000	# 2026-11-22 10:00:00 +0000
			creation_host = "vm"
			segment_count = 1

			segment1 {
				start_extent = 0
				extent_count = 10	# 40 Megabytes

				type = "striped"
				stripe_count = 1	# linear

				stripes = [
					"pv0", 0
				]
			}
		}

		hidden_tmeta {
			id = "lvid-2"
			status = ["READ", "WRITE"]
			flags = []
			segment_count = 1

			segment1 {
				start_extent = 0
				extent_count = 1

				type = "striped"
				stripe_count = 1

				stripes = [
					"pv0", 10
				]
			}
		}
	}

}
"#;

    #[test]
    fn sizes_as_the_lvm_tools_count_them() {
        let vg = VolumeGroup::parse(BACKUP).unwrap();
        assert_eq!(vg.name, "vg0");
        assert_eq!(vg.written_by, "lvcreate -L 40M -n data vg0");
        assert!(!vg.removed());
        let removed = BACKUP.replace("'lvcreate -L 40M -n data vg0'", "'vgremove -y vg0'");
        assert!(VolumeGroup::parse(&removed).unwrap().removed());
        assert_eq!(vg.extent_bytes, 4 << 20);
        assert_eq!(vg.extents(), 24);
        assert_eq!(vg.free_extents(), 13);
        assert_eq!(
            vg.logical_volumes,
            [LogicalVolume {
                name: "data".into(),
                extents: 10
            }]
        );
        let pv = &vg.physical_volumes[0];
        assert_eq!(pv.device_hint, "/dev/loop0");
        assert_eq!(pv.id, "Qx1Yz2-aaaa-bbbb-cccc-dddd-eeee-ffffff");
        assert_eq!((pv.extents, pv.free_extents), (24, 13));
    }

    /// Made by the real LVM tools (`testdata/lvm/make.sh`): the metadata and what `vgs`, `lvs`
    /// and `pvs` printed for it.
    #[test]
    fn sizes_equal_what_the_lvm_tools_printed() {
        let testdata = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/lvm");
        let read = |name: &str| std::fs::read_to_string(format!("{testdata}/{name}")).unwrap();
        let rows = |name: &str| -> Vec<Vec<String>> {
            read(name)
                .lines()
                .map(|l| l.trim().split(',').map(str::to_owned).collect())
                .collect()
        };
        let vg = VolumeGroup::parse(&read("fixture.vg")).unwrap();
        let size = |extents: u64| gib(extents * vg.extent_bytes);

        let vgs = &rows("fixture.vgs")[0];
        let counts = (
            vg.physical_volumes.len().to_string(),
            vg.logical_volumes.len().to_string(),
        );
        assert_eq!(
            (vgs[0].as_str(), &counts.0, &counts.1),
            ("fixture", &vgs[1], &vgs[2])
        );
        assert_eq!(
            (size(vg.extents()), size(vg.free_extents())),
            (vgs[5].clone(), vgs[6].clone())
        );

        let mut lvs: Vec<(String, String)> = vg
            .logical_volumes
            .iter()
            .map(|lv| (lv.name.clone(), size(lv.extents)))
            .collect();
        lvs.sort();
        let printed: Vec<(String, String)> = rows("fixture.lvs")
            .into_iter()
            .map(|r| (r[0].clone(), r[3].clone()))
            .collect();
        assert_eq!(lvs, printed);

        for row in rows("fixture.pvs") {
            let pv = vg
                .physical_volumes
                .iter()
                .find(|pv| pv.id == row[6])
                .unwrap();
            assert_eq!(
                (size(pv.extents), size(pv.free_extents)),
                (row[4].clone(), row[5].clone())
            );
        }
    }

    #[test]
    fn gib_rounds_like_printf() {
        assert_eq!(gib(0), "0");
        assert_eq!(gib(96 << 20), "0.09");
        assert_eq!(gib(40 << 20), "0.04");
        // 0.125 is a tie: to even.
        assert_eq!(gib(128 << 20), "0.12");
        assert_eq!(gib(3 << 27), "0.38");
        assert_eq!(gib(10 << 30), "10.00");
    }

    #[test]
    fn broken_metadata_is_an_error_naming_the_line() {
        let error = VolumeGroup::parse("vg0 {\n extent_size = \n}").unwrap_err();
        assert!(error.to_string().contains("line 3"), "{error}");
        assert!(VolumeGroup::parse("# nothing\n").is_err());
    }
}
