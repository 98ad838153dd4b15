//! Test fixture: how long this host has been up (needs host-info), in the fewest lines the SDK
//! allows; used wherever a test needs a small plugin from a file.

use factbuoy_guest::prelude::*;

struct Uptime;

impl Gatherer for Uptime {
    fn describe() -> Description {
        Description::new(
            "uptime",
            env!("CARGO_PKG_VERSION"),
            "How long this host has been up.",
        )
        .capability(Capability::HostInfo, "reads the uptime")
        .writes(Artifact::facts("uptime.json", "seconds since boot"))
    }

    fn gather(_params: &Params) -> Result<(), GatherError> {
        output::write_json(
            "uptime.json",
            &serde_json::json!({ "seconds": host_info::uptime_seconds() }),
        )
    }
}

export_gatherer!(Uptime);
