"""`listening-sockets`: the TCP and UDP sockets this host listens on, from /proc/net.

A Python plugin written with the factbuoy_plugin SDK (guest-sdk/python). Build and run:

    factbuoy plugin build
    factbuoy plugin run target/listening-sockets.wasm --grant listening-sockets:read:/proc
"""

import ipaddress

from factbuoy_plugin import Artifact, Capability, Description, Gatherer, InvalidParameters, Param, Unavailable
from factbuoy_plugin import export
from factbuoy_plugin import output, progress

# The kernel's socket states (include/net/tcp_states.h) that mean "accepting": LISTEN for TCP;
# for UDP a bound socket without a peer shows as CLOSE.
TCP_LISTEN = 0x0A
UDP_UNCONNECTED = 0x07

TABLES = [
    ("tcp", "/proc/net/tcp", 4, TCP_LISTEN),
    ("tcp6", "/proc/net/tcp6", 6, TCP_LISTEN),
    ("udp", "/proc/net/udp", 4, UDP_UNCONNECTED),
    ("udp6", "/proc/net/udp6", 6, UDP_UNCONNECTED),
]


def decode_address(text: str, family: int) -> str:
    """`0100007F` or 32 hex digits: the address as 32-bit words in the kernel's byte order,
    little-endian on every architecture factbuoy ships for (x86_64, aarch64)."""
    raw = bytes.fromhex(text)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return str(ipaddress.IPv4Address(words) if family == 4 else ipaddress.IPv6Address(words))


def parse_table(protocol: str, text: str, family: int, state: int) -> list:
    """The sockets of one /proc/net table in `state`, in the kernel's order."""
    sockets = []
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10 or int(fields[3], 16) != state:
            continue
        address, port = fields[1].split(":")
        sockets.append(
            {
                "protocol": protocol,
                "address": decode_address(address, family),
                "port": int(port, 16),
                "uid": int(fields[7]),
                "inode": int(fields[9]),
            }
        )
    return sockets


class ListeningSockets(Gatherer):
    def describe(self):
        return (
            Description(
                "listening-sockets",
                "0.1.0",
                "The TCP and UDP sockets this host listens on, from /proc/net.",
            )
            .param(
                Param.string_list("protocols")
                .default("tcp,tcp6,udp,udp6")
                .describe("Which tables to read: tcp, tcp6, udp, udp6.")
            )
            .capability(Capability.read("/proc"), "reads /proc/net/tcp, tcp6, udp and udp6")
            .artifact(
                Artifact.table(
                    "sockets.jsonl",
                    "one row per listening socket: protocol, address, port, owner uid and inode",
                ).row_keys("protocol", "address", "port")
            )
        )

    def gather(self, params):
        wanted = params.string_list("protocols")
        known = [name for name, *_ in TABLES]
        unknown = [name for name in wanted if name not in known]
        if unknown:
            raise InvalidParameters(
                f"unknown protocols {', '.join(unknown)}; choose among {', '.join(known)}"
            )
        tables = [table for table in TABLES if table[0] in wanted]
        sockets = []
        read = 0
        for done, (protocol, path, family, state) in enumerate(tables, 1):
            try:
                with open(path) as table:
                    sockets += parse_table(protocol, table.read(), family, state)
                read += 1
            except FileNotFoundError:
                # No IPv6 in this kernel, for example: the other tables still count.
                progress.warn(f"{path} does not exist")
            except PermissionError as error:
                raise Unavailable(f"reading {path}: {error}; grant read:/proc") from None
            progress.report(done, len(tables), f"read {path}")
        if tables and read == 0:
            raise Unavailable("none of the /proc/net socket tables exists here")
        output.write_json_lines("sockets.jsonl", sockets)


Plugin = export(ListeningSockets)
