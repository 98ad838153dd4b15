//! Facts about the process that gathers: its environment and user, and the load average.
//!
//! Ansible reports the process running its module; here that is the factbuoy process, whose
//! `/proc/self/status` the sandbox shows, and the part of its environment the host passes on.

use serde_json::{Map, Value, json};

use crate::ctx::Ctx;

/// `env`: the environment of the gathering process.
pub fn env(ctx: &mut Ctx) {
    let env: Map<String, Value> = ctx
        .process_environ()
        .into_iter()
        .map(|(name, value)| (name, value.into()))
        .collect();
    ctx.set("env", env);
}

/// `loadavg`: 1, 5 and 15 minute load averages.
pub fn loadavg(ctx: &mut Ctx) {
    let Some(text) = ctx.read("/proc/loadavg") else {
        return;
    };
    let values: Vec<f64> = text
        .split_whitespace()
        .take(3)
        .filter_map(|v| v.parse().ok())
        .collect();
    if let [one, five, fifteen] = values[..] {
        ctx.set("loadavg", json!({ "1m": one, "5m": five, "15m": fifteen }));
    }
}

/// `user`: who the gathering process runs as, with its entry in the host root's passwd file.
///
/// The ids are the process's. The rest comes from the host root's `/etc/passwd`, the host's
/// name for that uid; a uid it does not list gets no name, no home and no shell, and no warning:
/// that is how a Kubernetes agent runs (uid 65532 of factbuoy's image, which no node knows), by
/// design (docs/setup.md).
pub fn user(ctx: &mut Ctx) {
    let Some(status) = ctx.read_raw("/proc/self/status") else {
        return;
    };
    let ids = |field: &str| -> Vec<u64> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .map(|v| {
                v.split_whitespace()
                    .filter_map(|n| n.parse().ok())
                    .collect()
            })
            .unwrap_or_default()
    };
    let (uids, gids) = (ids("Uid:"), ids("Gid:"));
    let (Some(&real_uid), Some(&effective_uid), Some(&real_gid)) =
        (uids.first(), uids.get(1), gids.first())
    else {
        ctx.warn("user: /proc/self/status has no Uid or Gid line");
        return;
    };
    let passwd = ctx.read_raw("/etc/passwd").unwrap_or_default();
    let entries: Vec<Vec<&str>> = passwd
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .filter(|f| f.len() >= 7)
        .collect();
    // getpass.getuser(): the login name from the environment, else the passwd name of the uid.
    let login = ["LOGNAME", "USER", "LNAME", "USERNAME"]
        .iter()
        .find_map(|name| ctx.process_env(name).filter(|v| !v.is_empty()));
    let by_uid = entries.iter().find(|f| f[2].parse() == Ok(real_uid));
    let entry = login
        .as_deref()
        .and_then(|name| entries.iter().find(|f| f[0] == name))
        .or(by_uid);
    let user_id = login.or_else(|| by_uid.map(|f| f[0].to_owned()));
    if let Some(user_id) = user_id {
        ctx.set("user_id", user_id);
    }
    if let Some(f) = entry {
        let number = |s: &str| s.parse::<u64>().map(Value::from).unwrap_or(Value::Null);
        ctx.set("user_uid", number(f[2]));
        ctx.set("user_gid", number(f[3]));
        ctx.set("user_gecos", f[4]);
        ctx.set("user_dir", f[5]);
        ctx.set("user_shell", f[6]);
    }
    ctx.set("real_user_id", real_uid);
    ctx.set("effective_user_id", effective_uid);
    ctx.set("real_group_id", real_gid);
    // Ansible reports the real group id as the effective one (os.getgid()).
    ctx.set("effective_group_id", real_gid);
}
