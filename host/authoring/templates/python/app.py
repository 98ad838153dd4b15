"""`{{name}}`: a factbuoy gatherer plugin in Python.

Build it with `factbuoy plugin build`, run it with
`factbuoy plugin run target/{{name}}.wasm --grant {{name}}:host-info`.
"""

from factbuoy_plugin import Artifact, Capability, Description, Gatherer, Param, Params, export
from factbuoy_plugin import host_info, output, progress


class Greeter(Gatherer):
    def describe(self) -> Description:
        # What the plugin is; must not touch the host (it is called to list and plan runs).
        return (
            Description("{{name}}", "0.1.0", "Greets the host it runs on.")
            .param(Param.string("greeting").default("hello").describe("What to say to the host."))
            .capability(Capability.HOST_INFO, "reads the host name and kernel version")
            .artifact(Artifact.facts("greeting.json", "the greeting and who received it"))
        )

    def gather(self, params: Params) -> None:
        # Gathers facts and writes them as artifacts; params were checked against describe.
        os = host_info.os()
        progress.report(1, 1, "greeted the host")
        output.write_json(
            "greeting.json",
            {
                "greeting": params.string("greeting"),
                "hostname": os.hostname,
                "kernel": os.kernel_version,
            },
        )


# componentize-py finds the plugin's entry points by this name.
Plugin = export(Greeter)
