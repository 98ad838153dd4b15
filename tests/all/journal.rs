//! `systemd-logs` against `journalctl`: the real `factbuoy` binary runs the bundled plugin on
//! journal files that systemd's own writer made, and its output must be what journalctl 's
//! output is for the same files, entry by entry and field by field, with the same filters.
//!
//! Needs `journalctl` (package systemd), `systemd-journal-remote` and `zstd`; `tests/prerequisites.sh` installs
//! them. The committed fixtures come from `tests/fixtures/journal/generate.sh`; other tests
//! write fresh journal files with systemd-journal-remote as they run.

use crate::support;

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::Value;

const MACHINE: &str = "3f2b7c1e9d8a4b6c8e0f1a2b3c4d5e6f";
use crate::support::JOURNAL_REMOTE;
const BOOT_A: &str = "a1a1a1a1a1a14a1a8a1a1a1a1a1a1a02";

/// A host root with journal files below `var/log/journal`.
struct Root {
    dir: tempfile::TempDir,
}

impl Root {
    fn empty() -> Root {
        let root = Root {
            dir: tempfile::tempdir().unwrap(),
        };
        std::fs::create_dir_all(root.journal()).unwrap();
        root
    }

    /// The committed fixtures, or those whose path (below the fixture directory) passes `keep`.
    fn fixtures(keep: impl Fn(&str) -> bool) -> Root {
        let root = Root::empty();
        support::unpack_journal_fixtures(&root.journal(), keep);
        root
    }

    fn journal(&self) -> PathBuf {
        self.dir.path().join("var/log/journal")
    }

    fn file(&self, relative: &str) -> PathBuf {
        self.journal().join(relative)
    }

    /// Writes export-format `stream` as a new journal file with systemd-journal-remote.
    fn write_journal(&self, relative: &str, stream: &[u8], env: &[(&str, &str)]) {
        let path = self.file(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        support::write_journal(&path, stream, env);
    }
}

/// What one run of the plugin produced.
struct Run {
    report: Value,
    artifact: Vec<u8>,
}

impl Run {
    fn succeeded(&self) -> bool {
        self.report["succeeded"] == true
    }

    fn warnings(&self) -> Vec<String> {
        self.report["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w.as_str().unwrap().to_owned())
            .collect()
    }

    fn entries(&self) -> Vec<Value> {
        json_lines(&self.artifact)
    }
}

/// Runs `factbuoy plugin run systemd-logs --root ROOT` with `params` (`name=value`).
fn plugin(root: &Root, params: &[&str]) -> Run {
    let out = tempfile::tempdir().unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_factbuoy"));
    command
        .args(["plugin", "run", "systemd-logs", "-o", "json", "--root"])
        .arg(root.dir.path())
        .arg("--out")
        .arg(out.path())
        .env("FACTBUOY_CACHE_DIR", support::cache_dir());
    for param in params {
        command.args(["-p", param]);
    }
    let output = command.output().expect("running factbuoy");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "factbuoy printed no report ({e}); stderr:\n{}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    let artifact = ["journal.jsonl", "journal.export"]
        .iter()
        .find_map(|name| std::fs::read(out.path().join(name)).ok())
        .unwrap_or_default();
    Run { report, artifact }
}

/// `journalctl -D ROOT/var/log/journal ARGS --no-pager`, in UTC, its stdout.
fn journalctl_raw(root: &Root, args: &[&str]) -> Vec<u8> {
    let output = Command::new("journalctl")
        .arg("-D")
        .arg(root.journal())
        .args(args)
        .arg("--no-pager")
        .env("TZ", "UTC")
        .output()
        .expect("running journalctl (apt-get install systemd)");
    assert!(
        output.status.success(),
        "journalctl {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

fn journalctl(root: &Root, args: &[&str]) -> Vec<Value> {
    let mut args = args.to_vec();
    if !args.contains(&"--all") {
        args.extend(["-o", "json"]);
    }
    json_lines(&journalctl_raw(root, &args))
}

fn json_lines(bytes: &[u8]) -> Vec<Value> {
    bytes
        .split(|&b| b == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| {
            serde_json::from_slice(line).unwrap_or_else(|e| {
                panic!("not a JSON line ({e}): {}", String::from_utf8_lossy(line))
            })
        })
        .collect()
}

/// Compares entry lists; on a difference, says where and which fields differ.
fn assert_same_entries(ours: &[Value], theirs: &[Value], what: &str) {
    for (at, (a, b)) in ours.iter().zip(theirs).enumerate() {
        if a != b {
            let (a, b) = (a.as_object().unwrap(), b.as_object().unwrap());
            let mut differences = Vec::new();
            for key in a.keys().chain(b.keys()) {
                if a.get(key) != b.get(key) && !differences.iter().any(|(k, _, _)| k == key) {
                    differences.push((key.clone(), a.get(key).cloned(), b.get(key).cloned()));
                }
            }
            panic!(
                "{what}: entry {at} differs (ours, journalctl's): {differences:#?}\ncursors: {} / {}",
                a["__CURSOR"], b["__CURSOR"]
            );
        }
    }
    assert_eq!(
        ours.len(),
        theirs.len(),
        "{what}: {} entries, journalctl has {}",
        ours.len(),
        theirs.len()
    );
}

/// The plugin with `params` against journalctl with `args`, on `root`.
fn assert_matches_journalctl(root: &Root, params: &[&str], args: &[&str]) -> Vec<Value> {
    let mut params = params.to_vec();
    if !params.iter().any(|p| p.starts_with("since=")) {
        params.push("since=all");
    }
    let run = plugin(root, &params);
    assert!(run.succeeded(), "{params:?}: {:#}", run.report);
    assert!(
        run.warnings().is_empty(),
        "{params:?}: {:?}",
        run.warnings()
    );
    let theirs = journalctl(root, args);
    assert_same_entries(&run.entries(), &theirs, &format!("{params:?} vs {args:?}"));
    theirs
}

#[test]
fn the_fixture_journal_reads_as_journalctl_reads_it() {
    let root = Root::fixtures(|_| true);
    let entries = assert_matches_journalctl(&root, &[], &[]);
    // The fixtures hold what makes the format interesting; make sure the comparison saw it.
    let has = |test: &dyn Fn(&Value) -> bool| entries.iter().any(test);
    assert!(
        has(&|e| e["MESSAGE"].is_null()),
        "a field at the 4096-byte threshold"
    );
    assert!(has(&|e| e["MESSAGE"].is_array()), "a binary field");
    assert!(has(&|e| e["TAG"].is_array()), "a field with several values");
    assert!(
        has(&|e| e["COREDUMP_STACK"].is_array()),
        "a compressed binary field"
    );
    assert!(has(&|e| e["MESSAGE"]
        .as_str()
        .is_some_and(|m| m.len() > 2000)));
    let boots: std::collections::HashSet<_> = entries.iter().map(|e| &e["_BOOT_ID"]).collect();
    assert_eq!(boots.len(), 3);
    // 800 entries are stored, 40 of them twice: journalctl shows those once.
    assert_eq!(entries.len(), 760);
}

#[test]
fn each_kind_of_file_reads_alone() {
    for file in [
        "system.journal",
        "user-1000.journal",
        "system@0b0b0b0b0b0b4b0b8b0b0b0b0b0b0b01-0000000000000001-000609fa8b5a1c3e.journal",
        "system@b2b2b2b2b2b24b2b8b2b2b2b2b2b2b03-0000000000000001-00060a24a2b5c000.journal",
        "system@0000000000000000-dup.journal~",
    ] {
        let root = Root::fixtures(|path| path.ends_with(file));
        let entries = assert_matches_journalctl(&root, &[], &[]);
        assert!(!entries.is_empty(), "{file}");
    }
}

#[test]
fn filters_match_journalctls() {
    let root = Root::fixtures(|_| true);
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["since=2023-11-14 22:15:00"],
            &["--since", "2023-11-14 22:15:00"],
        ),
        (
            &["until=2023-11-14 22:15:00"],
            &["--until", "2023-11-14 22:15:00"],
        ),
        (
            &["since=@1700000100", "until=2023-11-14 23:30"],
            &["--since", "@1700000100", "--until", "2023-11-14 23:30"],
        ),
        (&["units=unit-07.service"], &["-u", "unit-07.service"]),
        (&["units=sshd"], &["-u", "sshd"]),
        (&["units=unit-1*,cron"], &["-u", "unit-1*", "-u", "cron"]),
        (&["units=user-1000.slice"], &["-u", "user-1000.slice"]),
        (&["units=data.mount"], &["-u", "data.mount"]),
        (&["priority=3"], &["-p", "3"]),
        (&["priority=warning..info"], &["-p", "warning..info"]),
        (
            &["priority=err", "units=unit-2*"],
            &["-p", "err", "-u", "unit-2*"],
        ),
        (&[&format!("boot={BOOT_A}")], &["-b", BOOT_A]),
        (
            &[
                &format!("boot={BOOT_A}"),
                "since=2023-11-14 22:14",
                "priority=6",
            ],
            &["-b", BOOT_A, "--since", "2023-11-14 22:14", "-p", "6"],
        ),
    ];
    for (params, args) in cases {
        let entries = assert_matches_journalctl(&root, params, args);
        assert!(
            !entries.is_empty(),
            "{params:?} matched nothing: a weak test"
        );
    }
}

#[test]
fn export_format_is_byte_for_byte_journalctls() {
    let root = Root::fixtures(|_| true);
    for (params, args) in [
        (vec!["output=export", "since=all"], vec!["-o", "export"]),
        (
            vec!["output=export", "since=all", "units=unit-3*"],
            vec!["-o", "export", "-u", "unit-3*"],
        ),
    ] {
        let run = plugin(&root, &params);
        assert!(run.succeeded(), "{:#}", run.report);
        let theirs = journalctl_raw(&root, &args);
        assert!(theirs.len() > 10_000);
        assert!(
            run.artifact == theirs,
            "{params:?}: export differs from journalctl {args:?}"
        );
    }
}

#[test]
fn all_writes_long_fields_as_journalctl_all() {
    let root = Root::fixtures(|_| true);
    let entries = assert_matches_journalctl(&root, &["all=true"], &["-o", "json", "--all"]);
    assert!(entries.iter().all(|e| !e["MESSAGE"].is_null()));
}

#[test]
fn max_entries_stops_early_and_says_so() {
    let root = Root::fixtures(|_| true);
    let run = plugin(&root, &["since=all", "max_entries=25"]);
    assert!(run.succeeded());
    assert_same_entries(&run.entries(), &journalctl(&root, &[])[..25], "first 25");
    assert!(
        run.warnings().iter().any(|w| w.contains("max_entries=25")),
        "{:?}",
        run.warnings()
    );
}

#[test]
fn since_defaults_to_the_last_hour() {
    let root = Root::fixtures(|_| true);
    // The fixture entries are from 2023: nothing in the last hour.
    let run = plugin(&root, &[]);
    assert!(run.succeeded(), "{:#}", run.report);
    assert!(run.entries().is_empty());
    assert_eq!(run.report["progress"]["completed"], 6);
    assert_eq!(run.report["progress"]["total"], 6);
}

#[test]
fn current_boot_comes_from_the_hosts_proc() {
    let root = Root::fixtures(|_| true);
    let run = plugin(&root, &["boot=current"]);
    assert!(!run.succeeded());
    assert!(
        run.report["failure"].to_string().contains("boot_id"),
        "{:#}",
        run.report
    );
    let random = root.dir.path().join("proc/sys/kernel/random");
    std::fs::create_dir_all(&random).unwrap();
    std::fs::write(
        random.join("boot_id"),
        "a1a1a1a1-a1a1-4a1a-8a1a-1a1a1a1a1a02\n",
    )
    .unwrap();
    assert_matches_journalctl(&root, &["boot=current"], &["-b", BOOT_A]);
}

#[test]
fn a_missing_journal_is_unavailable() {
    let root = Root {
        dir: tempfile::tempdir().unwrap(),
    };
    let run = plugin(&root, &["since=all"]);
    assert!(!run.succeeded());
    let failure = run.report["failure"].to_string();
    assert!(failure.contains("no journal here"), "{failure}");
}

/// A file systemd-journal-remote is still writing (its header says online) reads as journalctl
/// reads it, next to closed files.
#[test]
fn a_file_still_being_written_reads_as_journalctl_reads_it() {
    let root = Root::fixtures(|path| path.contains("user-1000"));
    let path = root.file(&format!("{MACHINE}/live.journal"));
    let mut writer = Command::new(JOURNAL_REMOTE)
        .arg(format!("--output={}", path.display()))
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("running systemd-journal-remote");
    let mut stdin = writer.stdin.take().unwrap();
    let mut stream = String::new();
    for n in 0..200u64 {
        stream += &format!(
            "__REALTIME_TIMESTAMP={}\n__MONOTONIC_TIMESTAMP={}\n_BOOT_ID={BOOT_A}\n\
             MESSAGE=live entry {n}\n_SYSTEMD_UNIT=live.service\n\n",
            1_700_000_000_500_000 + n * 1_000_000,
            50_500_000 + n * 1_000_000
        );
    }
    stdin.write_all(stream.as_bytes()).unwrap();
    stdin.flush().unwrap();
    // journal-remote writes each entry as it reads it: wait until all are there.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while journalctl(&root, &["-u", "live"]).len() < 200 {
        assert!(
            std::time::Instant::now() < deadline,
            "journal-remote wrote too little"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(std::fs::read(&path).unwrap()[16], 1, "the file is online");
    assert_matches_journalctl(&root, &[], &[]);
    drop(stdin);
    assert!(writer.wait().unwrap().success());
}

/// The objects of a journal file: (offset, type, size), walked from the header.
fn objects(bytes: &[u8]) -> Vec<(usize, u8, usize)> {
    let le64 = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()) as usize;
    let end = le64(136) + 16; // tail object offset, plus its header
    let mut at = le64(88); // header size
    let mut found = Vec::new();
    while at < end {
        let size = le64(at + 8);
        found.push((at, bytes[at], size));
        at += size.div_ceil(8) * 8;
    }
    found
}

const OBJECT_DATA: u8 = 1;
const OBJECT_ENTRY: u8 = 3;

/// The offsets of the file's chain of entry arrays (data objects have chains of their own).
fn entry_array_chain(bytes: &[u8]) -> Vec<usize> {
    let le64 = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()) as usize;
    let mut chain = Vec::new();
    let mut at = le64(176);
    while at != 0 {
        chain.push(at);
        at = le64(at + 16);
    }
    chain
}

#[test]
fn a_truncated_file_gives_the_entries_before_the_cut_and_a_warning() {
    let name = format!("{MACHINE}/system.journal");
    let full = Root::fixtures(|path| path == name);
    let all = journalctl(&full, &[]);
    let bytes = std::fs::read(full.file(&name)).unwrap();
    let objects = objects(&bytes);
    // Entries and their data follow the hash tables.
    let start = objects.iter().find(|o| o.1 == OBJECT_DATA).unwrap().0;
    let used = objects.last().map(|&(at, _, size)| at + size).unwrap();
    let span = used - start;
    for cut in [
        start + span / 4,
        start + span / 2,
        start + span * 3 / 4 + 5,
        used - 3,
        start - 1000,
        300,
        100,
    ] {
        let root = Root::fixtures(|path| path == name);
        std::fs::write(root.file(&name), &bytes[..cut]).unwrap();
        let run = plugin(&root, &["since=all"]);
        assert!(run.succeeded(), "cut at {cut}: {:#}", run.report);
        let warnings = run.warnings().join("\n");
        assert!(
            warnings.contains("truncated")
                || warnings.contains("shorter than a journal file header"),
            "cut at {cut}: {warnings}"
        );
        let ours = run.entries();
        assert!(ours.len() < all.len(), "cut at {cut}");
        // The entries written before the cut, all of them.
        let before_cut = objects
            .iter()
            .filter(|&&(at, kind, size)| kind == OBJECT_ENTRY && at + size <= cut)
            .count();
        assert_eq!(ours.len(), before_cut, "cut at {cut}");
        assert_same_entries(&ours, &all[..ours.len()], &format!("cut at {cut}"));
    }
}

/// Overwrites `len` bytes at `at` with a deterministic mess.
fn damage(bytes: &mut [u8], at: usize, len: usize) {
    for (n, byte) in bytes[at..at + len].iter_mut().enumerate() {
        *byte ^= (n as u8).wrapping_mul(151).wrapping_add(77);
    }
}

/// The plugin on a damaged copy of system.journal: it must succeed with a warning, and every
/// entry it writes must be one journalctl writes for the undamaged file, in the same order.
fn run_damaged(change: impl Fn(&mut Vec<u8>, &[(usize, u8, usize)])) -> (Run, Vec<Value>, Root) {
    let name = format!("{MACHINE}/system.journal");
    let root = Root::fixtures(|path| path == name);
    let all = journalctl(&root, &[]);
    let mut bytes = std::fs::read(root.file(&name)).unwrap();
    let objects = objects(&bytes);
    change(&mut bytes, &objects);
    std::fs::write(root.file(&name), &bytes).unwrap();
    let run = plugin(&root, &["since=all"]);
    assert!(run.succeeded(), "{:#}", run.report);
    assert!(!run.warnings().is_empty(), "no warning about the damage");
    let by_cursor: HashMap<&Value, usize> = all
        .iter()
        .enumerate()
        .map(|(n, e)| (&e["__CURSOR"], n))
        .collect();
    let mut last = None;
    for entry in run.entries() {
        let Some(&index) = by_cursor.get(&entry["__CURSOR"]) else {
            panic!("an entry journalctl does not have: {entry}");
        };
        assert!(last < Some(index), "entries out of order");
        last = Some(index);
    }
    (run, all, root)
}

#[test]
fn a_damaged_entry_is_skipped_and_the_rest_come_out() {
    let (run, all, root) = run_damaged(|bytes, objects| {
        let entries: Vec<_> = objects.iter().filter(|o| o.1 == OBJECT_ENTRY).collect();
        for &&(at, _, _) in entries.iter().skip(20).step_by(50) {
            damage(bytes, at, 24);
        }
    });
    let ours = run.entries();
    assert_eq!(ours.len(), all.len() - 6, "{:?}", run.warnings());
    assert!(
        run.warnings()
            .iter()
            .any(|w| w.contains("skipped an entry"))
    );
    // journalctl skips them too.
    assert_same_entries(&ours, &journalctl(&root, &[]), "damaged entries");
}

#[test]
fn a_damaged_field_is_left_out_as_journalctl_leaves_it() {
    let (run, _all, root) = run_damaged(|bytes, objects| {
        // The payloads of some big (so compressed) fields, and of some small ones.
        let data: Vec<_> = objects.iter().filter(|o| o.1 == OBJECT_DATA).collect();
        for &&(at, _, size) in data.iter().filter(|o| o.2 > 600).step_by(7) {
            damage(bytes, at + 72, (size - 72).min(64));
        }
        for &&(at, _, _) in data.iter().skip(100).step_by(60) {
            damage(bytes, at, 8);
        }
    });
    assert!(
        run.warnings()
            .iter()
            .any(|w| w.contains("left out a field"))
    );
    // journalctl reads the damaged file too: the same entries, the same fields.
    assert_same_entries(&run.entries(), &journalctl(&root, &[]), "damaged fields");
}

#[test]
fn a_damaged_entry_list_is_recovered_by_scanning() {
    let (run, all, _root) = run_damaged(|bytes, _| {
        let chain = entry_array_chain(bytes);
        assert!(chain.len() >= 3, "want a chain of entry arrays");
        damage(bytes, chain[1], 40);
    });
    assert_eq!(run.entries().len(), all.len(), "{:?}", run.warnings());
    assert!(
        run.warnings()
            .iter()
            .any(|w| w.contains("object by object"))
    );
}

#[test]
fn a_looping_entry_list_ends() {
    let (run, all, _root) = run_damaged(|bytes, _| {
        // The second array's "next" points back at the first.
        let chain = entry_array_chain(bytes);
        bytes[chain[1] + 16..chain[1] + 24].copy_from_slice(&(chain[0] as u64).to_le_bytes());
    });
    assert_eq!(run.entries().len(), all.len(), "{:?}", run.warnings());
}

#[test]
fn garbage_and_empty_files_are_reported_and_the_rest_read() {
    let root = Root::fixtures(|path| path.starts_with(MACHINE) && path.contains("user-1000"));
    std::fs::write(
        root.file(&format!("{MACHINE}/garbage.journal")),
        vec![0x5au8; 70_000],
    )
    .unwrap();
    std::fs::write(root.file(&format!("{MACHINE}/empty.journal")), b"").unwrap();
    let run = plugin(&root, &["since=all"]);
    assert!(run.succeeded(), "{:#}", run.report);
    let warnings = run.warnings().join("\n");
    assert!(
        warnings.contains("garbage.journal: skipped: not a journal file"),
        "{warnings}"
    );
    assert!(warnings.contains("empty.journal: skipped"), "{warnings}");
    std::fs::remove_file(root.file(&format!("{MACHINE}/garbage.journal"))).unwrap();
    std::fs::remove_file(root.file(&format!("{MACHINE}/empty.journal"))).unwrap();
    assert_same_entries(&run.entries(), &journalctl(&root, &[]), "next to garbage");
}

/// Fresh files, written now, whose clocks disagree in the ways that decide journalctl's order:
/// several files of one boot, boots that overlap in wall-clock time, a clock stepped back, and
/// entries stored twice.
#[test]
fn fresh_files_with_disagreeing_clocks_merge_as_journalctl_merges_them() {
    let root = Root::empty();
    let mut random = Lcg(42);
    let boots = [
        "11111111111141118111111111111111",
        "22222222222242228222222222222222",
    ];
    let mut copies = Vec::new();
    for file in 0..6u64 {
        let boot = boots[(file % 2) as usize];
        let mut stream = Vec::new();
        let mut monotonic = 1_000_000 + file * 333;
        // Each file's wall clock is off by up to a minute, one of them steps back midway.
        let mut offset = 1_700_000_000_000_000 + random.below(60_000_000);
        for n in 0..300u64 {
            monotonic += 1 + random.below(400_000);
            if file == 3 && n == 150 {
                offset -= 30_000_000;
            }
            let mut entry = format!(
                "__REALTIME_TIMESTAMP={}\n__MONOTONIC_TIMESTAMP={monotonic}\n_BOOT_ID={boot}\n\
                 MESSAGE=file {file} entry {n}\nPRIORITY={}\n_SYSTEMD_UNIT=u{}.service\n\n",
                offset + monotonic,
                random.below(8),
                random.below(5)
            );
            if n % 37 == 0 {
                entry = entry.replace("\n\n", &format!("\nBIG={}\n\n", "z".repeat(700)));
            }
            if file < 2 && n % 10 == 0 {
                copies.push(entry.clone());
            }
            stream.extend_from_slice(entry.as_bytes());
        }
        let env: &[(&str, &str)] = if file == 4 {
            &[
                ("SYSTEMD_JOURNAL_COMPACT", "0"),
                ("SYSTEMD_JOURNAL_KEYED_HASH", "0"),
            ]
        } else {
            &[]
        };
        root.write_journal(&format!("{MACHINE}/f{file}.journal"), &stream, env);
    }
    // Entries stored in two files are shown once.
    root.write_journal(
        &format!("{MACHINE}/copies.journal"),
        copies.concat().as_bytes(),
        &[],
    );
    let entries = assert_matches_journalctl(&root, &[], &[]);
    assert!(entries.len() <= 6 * 300, "copies shown twice");
    assert_matches_journalctl(
        &root,
        &["since=2023-11-14 22:13:30"],
        &["--since", "2023-11-14 22:13:30"],
    );
    assert_matches_journalctl(
        &root,
        &["units=u1,u3", "priority=4"],
        &["-u", "u1", "-u", "u3", "-p", "4"],
    );
}

/// A small deterministic random number generator.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

/// The plugin's memory is its page cache (96 MiB) and an output buffer, whatever the journal's
/// size (docs/systemd-logs.md): a journal larger than the cache, turned into more JSON than
/// that, keeps the process below both.
#[test]
fn a_journal_larger_than_the_cache_streams_through_the_plugin_in_bounded_memory() {
    const ENTRIES: &str = "300000";
    // The 96 MiB cache and the (debug) host around it; the journal and its JSON are larger.
    const MAX_PEAK_RSS: u64 = 160 << 20;
    let root = Root::empty();
    let file = root.file("0123456789abcdef0123456789abcdef/system.journal");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let stream = Command::new("python3")
        .arg(support::workspace().join("bench/journal_stream.py"))
        .args(["0", "1", ENTRIES])
        .output()
        .expect("running python3");
    assert!(stream.status.success());
    support::write_journal(&file, &stream.stdout, &[]);
    drop(stream);
    // journal-remote rotates: the journal is every file it wrote.
    let journal: u64 = std::fs::read_dir(file.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    // Compiled once beforehand (and cached), so what is measured is the reading.
    let describe = support::factbuoy()
        .args(["plugin", "info", "systemd-logs"])
        .output()
        .unwrap();
    assert!(describe.status.success());

    let out = tempfile::tempdir().unwrap();
    let mut command = support::factbuoy();
    command
        .args(["plugin", "run", "systemd-logs", "-p", "since=all", "--root"])
        .arg(root.dir.path())
        .arg("--out")
        .arg(out.path());
    let measured = support::measure::measure(&command);
    assert_eq!(measured.code, 0, "{}", measured.stderr());
    let written = std::fs::metadata(out.path().join("journal.jsonl"))
        .unwrap()
        .len();
    eprintln!(
        "systemd-logs: {} MiB journal -> {} MiB of JSON, peak RSS {} MiB in {:?}",
        journal >> 20,
        written >> 20,
        measured.peak_rss >> 20,
        measured.elapsed
    );
    assert!(
        journal > MAX_PEAK_RSS - (16 << 20) && written > MAX_PEAK_RSS + (64 << 20),
        "too small to tell: {journal} bytes of journal, {written} of JSON"
    );
    assert!(
        measured.peak_rss < MAX_PEAK_RSS,
        "peak RSS {} MiB",
        measured.peak_rss >> 20
    );
}
