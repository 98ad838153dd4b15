//! `{{name}}`: a factbuoy gatherer plugin. Build it with `factbuoy plugin build`, run it with
//! `factbuoy plugin run "$(factbuoy plugin build)" --grant {{name}}:host-info`.

use factbuoy_guest::prelude::*;

struct Greeter;

impl Gatherer for Greeter {
    /// What the plugin is; must not touch the host (it is called to list and plan runs).
    fn describe() -> Description {
        Description::new("{{name}}", env!("CARGO_PKG_VERSION"), "Greets the host it runs on.")
            .param(Param::string("greeting").default("hello").describe("What to say to the host."))
            .capability(Capability::HostInfo, "reads the host name and kernel version")
            .writes(Artifact::facts("greeting.json", "the greeting and who received it"))
    }

    /// Gathers facts and writes them as artifacts; `params` were checked against `describe`.
    fn gather(params: &Params) -> Result<(), GatherError> {
        let os = host_info::os();
        progress::report(1, 1, "greeted the host");
        output::write_json(
            "greeting.json",
            &serde_json::json!({
                "greeting": params.string("greeting")?,
                "hostname": os.hostname,
                "kernel": os.kernel_version,
            }),
        )
    }
}

export_gatherer!(Greeter);
