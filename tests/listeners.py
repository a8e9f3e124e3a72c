"""Which TCP ports a process tree listens on, read from /proc (what ``ss -ltnp`` reads): the
exposure tests check that every listener of ``memlane serve`` and ``memlane backfill`` is on
loopback."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path


def _tcp_listeners() -> dict[int, tuple[str, int]]:
    """socket inode -> (address, port) of every listening TCP socket on the machine."""
    out: dict[int, tuple[str, int]] = {}
    for table, width in (("/proc/net/tcp", 4), ("/proc/net/tcp6", 16)):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if f[3] != "0A":  # TCP_LISTEN
                continue
            hex_addr, hex_port = f[1].split(":")
            raw = bytes.fromhex(hex_addr)
            # the kernel prints each 32-bit word in host (little-endian) order
            words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
            addr = ipaddress.ip_address(words) if width == 4 else ipaddress.IPv6Address(words)
            out[int(f[9])] = (str(addr), int(hex_port, 16))
    return out


def _socket_inodes(pid: int) -> set[int]:
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(int(target[8:-1]))
    except OSError:
        pass
    return inodes


def session_pids(sid: int) -> list[int]:
    """The live processes of session ``sid`` (a process started with start_new_session and
    everything it starts, Ray's daemons and workers included)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.getsid(int(entry)) == sid:
                    pids.append(int(entry))
            except OSError:
                continue
    return pids


def process_tree(root: int) -> list[int]:
    """``root``, its descendants, and every process of their sessions: what a command started,
    including children it put in sessions of their own (the Milvus Lite server) and Ray's
    workers."""
    parent: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parent[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    tree, frontier = {root}, [root]
    while frontier:
        children = [p for p, pp in parent.items() if pp in frontier and p not in tree]
        tree.update(children)
        frontier = children
    sessions = set()
    for pid in tree:
        try:
            sessions.add(os.getsid(pid))
        except OSError:
            continue
    for sid in sessions:
        tree.update(session_pids(sid))
    return sorted(tree)


def listeners_of(pids: list[int]) -> list[tuple[int, str, int]]:
    """(pid, address, port) of each listening TCP socket the processes hold."""
    table = _tcp_listeners()
    return sorted({(pid, *table[inode]) for pid in pids for inode in _socket_inodes(pid) if inode in table})


def is_loopback(address: str) -> bool:
    """127.0.0.0/8, ::1, or an IPv4-mapped loopback (::ffff:127.0.0.1)."""
    ip = ipaddress.ip_address(address)
    mapped = getattr(ip, "ipv4_mapped", None)
    return (mapped or ip).is_loopback
