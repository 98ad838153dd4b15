//! The systemd units in deploy/systemd/ (docs/fleet.md, "systemd"): systemd's own checker
//! accepts them with this build's binary in place of /usr/local/bin/factbuoy, and they are
//! sandboxed: systemd-analyze rates their exposure "OK" or better (below 5 of 10).

use std::path::Path;
use std::process::Command;

fn units() -> Vec<std::path::PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/systemd");
    let mut units: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "service"))
        .collect();
    units.sort();
    units
}

#[test]
fn the_systemd_units_verify_and_are_sandboxed() {
    let units = units();
    assert_eq!(units.len(), 2, "{units:?}");
    let work = tempfile::tempdir().unwrap();
    for unit in units {
        let text = std::fs::read_to_string(&unit).unwrap();
        assert!(
            text.contains("ExecStart=/usr/local/bin/factbuoy "),
            "{}",
            unit.display()
        );
        let here = work.path().join(unit.file_name().unwrap());
        std::fs::write(
            &here,
            text.replace("/usr/local/bin/factbuoy", env!("CARGO_BIN_EXE_factbuoy")),
        )
        .unwrap();
        let verify = Command::new("systemd-analyze")
            .arg("verify")
            .arg(&here)
            .output()
            .expect("running systemd-analyze (apt-get install systemd)");
        let said = String::from_utf8_lossy(&verify.stderr).into_owned()
            + &String::from_utf8_lossy(&verify.stdout);
        assert!(
            verify.status.success() && said.trim().is_empty(),
            "{}: {said}",
            unit.display()
        );
        let security = Command::new("systemd-analyze")
            .args(["security", "--offline=yes"])
            .arg(&here)
            .output()
            .unwrap();
        let report = String::from_utf8_lossy(&security.stdout);
        let level: f64 = report
            .lines()
            .find_map(|l| l.split("Overall exposure level for ").nth(1))
            .and_then(|rest| rest.split_whitespace().nth(1))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no exposure level in: {report}"));
        assert!(
            level < 5.0,
            "{}: exposure {level}: {report}",
            unit.display()
        );
    }
}
