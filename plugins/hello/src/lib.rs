//! `hello`: greets the host it runs on. Copy this crate to start a plugin of your own.

use factbuoy_guest::prelude::*;

struct Hello;

impl Gatherer for Hello {
    fn describe() -> Description {
        Description::new(
            "hello",
            env!("CARGO_PKG_VERSION"),
            "Greets the host it runs on: the smallest useful plugin.",
        )
        .param(
            Param::string("greeting")
                .default("hello")
                .describe("What to say to the host."),
        )
        .capability(
            Capability::HostInfo,
            "reads the host name and kernel version",
        )
        .writes(Artifact::facts(
            "greeting.json",
            "the greeting and who received it",
        ))
    }

    fn gather(params: &Params) -> Result<(), GatherError> {
        let greeting = params.string("greeting")?;
        let os = host_info::os();
        progress::report(1, 1, "greeted the host");
        output::write_json(
            "greeting.json",
            &serde_json::json!({
                "greeting": greeting,
                "hostname": os.hostname,
                "kernel": os.kernel_version,
            }),
        )
    }
}

export_gatherer!(Hello);
