"""Small loop-mounted filesystems for broker log dirs, so a test can fill one up.

The image and the mount point carry the network's tag in their names, which is how
``remove_tag_mounts`` finds what a crashed run left mounted.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from tests.faults.netns import sh

FILLER = "filler"


def loop_disks_unavailable_reason() -> str | None:
    """Why loop-mounted disks cannot be made here, or None when they can."""
    if os.geteuid() != 0:
        return "loop-mounted disks need root (losetup, mount)"
    for tool in ("losetup", "mkfs.ext4", "mount", "umount"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (scripts/bootstrap.sh installs it)"
    if not os.path.exists("/dev/loop-control"):
        return "this kernel offers no loop devices (/dev/loop-control is absent)"
    return None


class SmallDisk:
    """An ext4 image of ``size_mib`` (sparse) mounted at ``mount_point``; no reserved blocks, so the
    broker (root) sees the same free space as everyone."""

    def __init__(self, tag: str, directory: Path, name: str, size_mib: int = 512) -> None:
        self.image = directory / f"{tag}-{name}.img"
        self.mount_point = directory / f"{tag}-{name}"
        self.size_mib = size_mib

    def mount(self) -> Path:
        self.mount_point.mkdir(parents=True, exist_ok=True)
        with open(self.image, "wb") as image:
            image.truncate(self.size_mib << 20)
        sh("mkfs.ext4", "-q", "-F", "-m", "0", "-E", "lazy_itable_init=1,lazy_journal_init=1", str(self.image))
        sh("mount", "-o", "loop", str(self.image), str(self.mount_point))  # autoclear: umount frees the loop
        return self.mount_point

    @property
    def filler(self) -> Path:
        return self.mount_point / FILLER

    def fill(self) -> int:
        """Take every free block; returns the bytes taken."""
        taken = 0
        with open(self.filler, "ab") as out:
            stat = os.statvfs(self.mount_point)
            try:
                os.posix_fallocate(out.fileno(), 0, stat.f_bavail * stat.f_frsize)
            except OSError:
                pass  # metadata took a few blocks of what statvfs counted; top up below
            taken = out.seek(0, os.SEEK_END)
            chunk = b"\0" * 65536
            while True:
                try:
                    written = os.write(out.fileno(), chunk)
                except OSError:
                    break
                if not written:
                    break
                taken += written
            try:
                os.fsync(out.fileno())
            except OSError:
                pass
        return taken

    def free(self) -> None:
        self.filler.unlink(missing_ok=True)

    def fail(self) -> None:
        """Abort the filesystem (ext4's ``abort`` option, what ``errors=remount-ro`` does to a failing
        disk): from now on every write, fsync and file creation on it fails with EROFS."""
        sh("mount", "-o", "remount,abort", str(self.mount_point))

    def repair(self) -> None:
        """The disk is back: unmount it (nothing may use it), check it and mount it again."""
        sh("umount", str(self.mount_point))
        sh("e2fsck", "-f", "-y", str(self.image), check=False)  # exit 1: errors were corrected
        sh("mount", "-o", "loop", str(self.image), str(self.mount_point))

    def unmount(self) -> None:
        sh("umount", "-l", str(self.mount_point), check=False)
        self.image.unlink(missing_ok=True)


def remove_tag_mounts(tag: str) -> None:
    """Unmount the tag's filesystems and detach their loop devices (after a crashed run)."""
    marker = f"/{tag}-"
    with open("/proc/self/mounts") as mounts:
        points = [line.split()[1] for line in mounts if marker in line.split()[1]]
    for point in points:
        sh("umount", "-l", point, check=False)
    for line in sh("losetup", "-l", "-n", "-O", "NAME,BACK-FILE", check=False).splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2 and marker in parts[1]:
            sh("losetup", "-d", parts[0], check=False)
