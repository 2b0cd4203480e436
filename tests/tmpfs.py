"""A small tmpfs for the tests of full and read-only file systems (root only): mounted on
a directory for the length of a `with`, filled up on demand."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from pathlib import Path
from typing import Iterator

import pytest


def system(*argv: str) -> str | None:
    """Run mount/umount: None when it worked, else why not (one line)."""
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    return None if r.returncode == 0 else " ".join((r.stderr or f"exit {r.returncode}").split())


@contextlib.contextmanager
def tmpfs(d: Path, size: str, needed_for: str = "a full file system") -> Iterator[Path]:
    """`d` (made) on a tmpfs of `size` ("8m", "64k"), unmounted (lazily if busy) after the
    `with`. Skips, saying why, when not root or when the mount fails."""
    if os.geteuid() != 0:
        pytest.skip(f"{needed_for} needs root (a small tmpfs)")
    d.mkdir(parents=True, exist_ok=True)
    why = system("mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(d))
    if why:
        pytest.skip(f"root, but cannot mount a tmpfs: {why}")
    try:
        yield d
    finally:
        if system("umount", str(d)):
            system("umount", "-l", str(d))


def fill(d: Path) -> Path:
    """`d`'s file system filled up by one file (returned: remove it to make room)."""
    filler = d / "filler"
    try:
        with open(filler, "wb", buffering=0) as f:
            while True:
                f.write(b"\0" * 65536)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC, exc
    return filler
