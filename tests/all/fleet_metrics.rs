//! A fleet's metrics as a fleet operator reads them (docs/fleet.md, "Metrics"): a real
//! Prometheus scrapes `/metrics` with the fleet's operator certificate and loads the alert
//! rules deploy/prometheus/ gives; promtool checks and unit-tests those rules; nobody without
//! the operator's certificate reads them.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::loopback_fleet::{LoopbackFleet, text};
use crate::support::workspace;

const RULES: &str = "deploy/prometheus/factbuoy-fleet.rules.yml";

/// Prometheus on loopback, scraping the fleet every second as job `factbuoy-fleet`; killed when
/// dropped.
struct Prometheus {
    child: Child,
    address: String,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    fn scraping(fleet: &LoopbackFleet, dir: &Path) -> Prometheus {
        let operator = fleet.dir().join("operator");
        let config = format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             rule_files: [{rules}]\n\
             scrape_configs:\n  - job_name: factbuoy-fleet\n    scheme: https\n    \
             tls_config:\n      ca_file: {ca}\n      cert_file: {cert}\n      key_file: {key}\n    \
             static_configs:\n      - targets: ['{target}']\n",
            rules = workspace().join(RULES).display(),
            ca = operator.join("ca.pem").display(),
            cert = operator.join("client.pem").display(),
            key = operator.join("client.key").display(),
            target = fleet.address,
        );
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("prometheus.yml"), config).unwrap();
        // A free port, taken back a moment before Prometheus binds it.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let address = format!("127.0.0.1:{port}");
        let child = Command::new("prometheus")
            .arg(format!(
                "--config.file={}",
                dir.join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={address}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("prometheus.log")).unwrap())
            .spawn()
            .expect("running prometheus (apt-get install prometheus)");
        Prometheus { child, address }
    }

    /// The API's answer to `path`, once Prometheus answers at all.
    fn api(&self, path: &str) -> Option<Value> {
        let output = Command::new("curl")
            .args(["-sf", "--max-time", "5"])
            .arg(format!("http://{}{path}", self.address))
            .output()
            .unwrap();
        output
            .status
            .success()
            .then(|| serde_json::from_slice(&output.stdout).unwrap())
    }

    /// The value of the instant query `query`, when it has exactly one series.
    fn value(&self, query: &str) -> Option<f64> {
        let answer = self.api(&format!(
            "/api/v1/query?query={}",
            query
                .bytes()
                .map(|b| format!("%{b:02X}"))
                .collect::<String>()
        ))?;
        match answer["data"]["result"].as_array()?.as_slice() {
            [one] => one["value"][1].as_str()?.parse().ok(),
            _ => None,
        }
    }

    /// Waits until `query` has the value `expected` (Prometheus scrapes every second).
    fn wait_for(&self, query: &str, expected: f64) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let value = self.value(query);
            if value == Some(expected) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{query} is {value:?}, not {expected}, a minute on; targets: {:?}",
                self.api("/api/v1/targets")
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

#[test]
fn prometheus_scrapes_a_fleets_agents_joins_runs_and_revocations_with_the_operators_certificate() {
    let mut fleet = LoopbackFleet::start();
    let prometheus = Prometheus::scraping(&fleet, &fleet.path("prometheus"));

    prometheus.wait_for(r#"up{job="factbuoy-fleet"}"#, 1.0);
    prometheus.wait_for("factbuoy_fleet_joins_total", 1.0);
    prometheus.wait_for(r#"factbuoy_fleet_agents{state="enrolled"}"#, 1.0);
    // The member's long poll is open: it is connected.
    prometheus.wait_for("factbuoy_fleet_agents_waiting", 1.0);
    let seen = prometheus
        .value(r#"factbuoy_fleet_agent_last_seen_timestamp_seconds{node="member-1"}"#)
        .expect("member-1's last-seen time");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!((now - seen).abs() < 120.0, "last seen {seen}, now {now}");
    // The alert rules loaded, and none fires for an agent that was just seen.
    let rules = prometheus.api("/api/v1/rules").unwrap();
    assert_eq!(
        rules["data"]["groups"][0]["name"], "factbuoy-fleet",
        "{rules}"
    );
    prometheus.wait_for(
        r#"count(ALERTS{alertname="FactbuoyAgentNotSeen"}) or vector(0)"#,
        0.0,
    );

    // Without the operator's certificate, nothing; each refusal counted.
    for _ in 0..2 {
        let anonymous = Command::new("curl")
            .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "--cacert"])
            .arg(fleet.dir().join("operator/ca.pem"))
            .arg(format!("https://{}/metrics", fleet.address))
            .output()
            .unwrap();
        assert_eq!(text(&anonymous.stdout), "403");
    }
    prometheus.wait_for(r#"factbuoy_fleet_rejections_total{reason="role"}"#, 2.0);

    // A run: the member takes part, and asks for no work meanwhile.
    fleet.start_endless_run();
    prometheus.wait_for("factbuoy_fleet_runs_total", 1.0);
    prometheus.wait_for("factbuoy_fleet_runs_running", 1.0);
    prometheus.wait_for(r#"factbuoy_fleet_agent_in_run{node="member-1"}"#, 1.0);
    prometheus.wait_for("factbuoy_fleet_agents_waiting", 0.0);
    assert!(
        prometheus.value("factbuoy_fleet_polls_total").unwrap() >= 1.0,
        "the member's poll"
    );

    // Revoked, it leaves the run, which ends, and is no one to alert on.
    fleet.succeed(&["fleet", "revoke", "member-1"]);
    prometheus.wait_for("factbuoy_fleet_revocations_total", 1.0);
    prometheus.wait_for(r#"factbuoy_fleet_agents{state="revoked"}"#, 1.0);
    prometheus.wait_for(r#"factbuoy_fleet_agents{state="enrolled"}"#, 0.0);
    prometheus.wait_for("factbuoy_fleet_runs_running", 0.0);
    for gauge in [
        "factbuoy_fleet_agent_last_seen_timestamp_seconds",
        "factbuoy_fleet_agent_in_run",
    ] {
        prometheus.wait_for(&format!("count({gauge}) or vector(0)"), 0.0);
    }
}

#[test]
fn the_alert_rules_pass_promtools_check_and_their_unit_tests() {
    let dir = workspace().join("deploy/prometheus");
    for args in [
        ["check", "rules", "factbuoy-fleet.rules.yml"],
        ["test", "rules", "factbuoy-fleet.rules.test.yml"],
    ] {
        let output = Command::new("promtool")
            .args(args)
            .current_dir(&dir)
            .output()
            .expect("running promtool (apt-get install prometheus)");
        assert!(
            output.status.success(),
            "promtool {args:?}: {}{}",
            text(&output.stdout),
            text(&output.stderr)
        );
    }
}
