"""What every multi-host program shares: start-up from the documented variables, and one result line."""
import ipaddress
import json

import meshax


def init(**kwargs) -> None:
    """Join the job from MESHAX_COORDINATOR_ADDRESS, MESHAX_NUM_PROCESSES, MESHAX_PROCESS_ID (the documented
    start-up); `kwargs` go to initialize (e.g. heartbeat_timeout_seconds)."""
    meshax.distributed.initialize(**kwargs)


def report(**values) -> None:
    """Print one line `RESULT {json}` for the test to read."""
    print("RESULT " + json.dumps(values), flush=True)


def say(text: str) -> None:
    print(text, flush=True)


def listening_sockets() -> list[tuple[str, int]]:
    """(address, port) of every TCP socket listening in this network namespace, from /proc/net/tcp{,6}."""
    found = []
    for path, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        try:
            lines = open(path).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "0A":  # TCP_LISTEN
                address, port = fields[1].split(":")
                found.append((_address(address, width), int(port, 16)))
    return found


def _address(hex_address: str, width: int) -> str:
    """/proc/net/tcp's little-endian hex address as text."""
    if width == 8:
        return ".".join(str(int(hex_address[i:i + 2], 16)) for i in (6, 4, 2, 0))
    words = [hex_address[i:i + 8] for i in range(0, 32, 8)]
    raw = b"".join(bytes.fromhex(w)[::-1] for w in words)
    return str(ipaddress.IPv6Address(raw))
