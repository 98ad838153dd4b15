"""Facts the host gathers for the plugin (needs ``Capability.HOST_INFO``): ``os()``, ``cpus()``,
``memory()``, ``disks()``, ``network_interfaces()``, ``uptime_seconds()`` and the rest of the
WIT ``host-info`` interface, with snake_case names."""

from wit_world.imports.host_info import *  # noqa: F401,F403
