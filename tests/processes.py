"""Processes a test started, found through Linux ``/proc``: what the session checks is left."""

from __future__ import annotations

from pathlib import Path


def descendants(pid: int) -> dict[int, str]:
    """Live descendants of ``pid`` and their command lines (Linux ``/proc``; empty elsewhere).

    Zombies are left out (their parent reaps them), and so are the interpreter's own helpers
    (multiprocessing's resource tracker and fork server), which end with the interpreter.
    """
    children: dict[int, list[int]] = {}
    proc = Path("/proc")
    if not proc.is_dir():
        return {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        state, ppid = stat[stat.rfind(")") + 2 :].split()[:2]
        if state != "Z":
            children.setdefault(int(ppid), []).append(int(entry.name))
    found: dict[int, str] = {}
    stack = [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            try:
                cmd = (proc / str(child) / "cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                continue
            text = cmd.decode(errors="replace").strip()
            if "resource_tracker" in text or "forkserver" in text:
                continue
            found[child] = text
            stack.append(child)
    return found
