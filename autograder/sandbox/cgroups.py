"""One cgroup per kernel: the memory, processes and CPU of everything a kernel starts, together.

Resource limits (`setrlimit`) are per process: a kernel could hold memory in memfds or shared
memory, spread it over children, or run children on every CPU. A cgroup counts all of that against
one budget (memory of every kind, processes and threads, one CPU's time by default); the rlimits
stay as a second layer.

Both hierarchies are supported, chosen at run time (`hierarchy`):

- cgroup v2, when a unified hierarchy offers memory, pids and cpu: one folder per kernel,
  `<mount>/encdec-sandbox/<slot>-<grader pid>-<random>` (`memory.max`, `memory.swap.max`,
  `pids.max`, `cpu.max`; killed with `cgroup.kill`);
- cgroup v1 otherwise, one folder per controller hierarchy (`memory.limit_in_bytes`,
  `memory.memsw.limit_in_bytes`, `pids.max`, `cpu.cfs_quota_us`; `freezer` where mounted).

The course parent sits at the top of each hierarchy as this machine mounts it (on v2 a cgroup
that holds processes, such as the grader's own, cannot hand controllers to children). The
kernel joins its cgroup before any student code runs: on the bwrap path the launcher moves
itself in before it starts `bwrap`; on the zygote path the launcher opens the cgroup's
`cgroup.procs` files and passes them to the zygote, whose supervisor writes itself in before it
forks the kernel (see launch.py, zygote.py). Without a usable cgroup (no write access, missing
controllers) grading goes on with the rlimits alone, after one loud warning (`probe`).
"""

from __future__ import annotations

import dataclasses
import os
import pwd
import secrets
import signal
import sys
import time
from pathlib import Path

PARENT = "encdec-sandbox"
CONTROLLERS = ("memory", "pids", "cpu")
# v1 hierarchies used where mounted: freezer (every process stopped at once before the kill), and
# cpuacct where it is not mounted with cpu (`Cgroup.cpu_seconds`)
OPTIONAL_V1 = ("freezer", "cpuacct")
CPU_PERIOD_US = 100_000
FALLBACK = "grading sandbox: no cgroup ({why}): falling back to per-process limits; memfds, shared memory uncapped"


@dataclasses.dataclass(frozen=True)
class Hierarchy:
    """Where the cgroups of kernels are made: v2, one folder; v1, one folder per controller."""

    version: int
    mounts: dict[str, Path]  # controller -> mount point (v2: every controller -> the one mount)

    def parents(self) -> list[Path]:
        return [m / parent_name() for m in dict.fromkeys(self.mounts.values())]


def parent_name(uid: int | None = None) -> str:
    """The course parent of a grader's kernel cgroups: root's, or one delegated to a plain user
    (`delegate`), since a plain user cannot make folders in the hierarchy's top."""
    uid = os.geteuid() if uid is None else uid
    return PARENT if uid == 0 else f"{PARENT}-u{uid}"


def _mountinfo() -> list[tuple[str, str, list[str]]]:
    """(mount point, filesystem type, super options) of every mount this process sees."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields, rest = left.split(), right.split()
            if len(fields) >= 5 and len(rest) >= 3:
                point = fields[4].replace("\\040", " ")
                out.append((point, rest[0], rest[2].split(",")))
    return out


def find_hierarchy() -> tuple[Hierarchy | None, str]:
    """The hierarchy to use (v2 if it has every controller, else v1), or None and why not."""
    mounts = _mountinfo()
    for point, fstype, _ in mounts:
        if fstype == "cgroup2":
            try:
                offered = (Path(point) / "cgroup.controllers").read_text().split()
            except OSError:
                continue
            if set(CONTROLLERS) <= set(offered):
                return Hierarchy(2, {c: Path(point) for c in CONTROLLERS}), ""
    v1 = {}
    for point, fstype, opts in mounts:
        if fstype == "cgroup":
            for c in (*CONTROLLERS, *OPTIONAL_V1):
                if c in opts:
                    v1.setdefault(c, Path(point))
    missing = [c for c in CONTROLLERS if c not in v1]
    if not missing:
        return Hierarchy(1, v1), ""
    return None, f"no cgroup v2 with {', '.join(CONTROLLERS)} and no cgroup v1 {', '.join(missing)}"


@dataclasses.dataclass
class Cgroup:
    """One kernel's cgroup: its folders (one per v1 hierarchy, one on v2)."""

    version: int
    dirs: list[Path]

    @property
    def procs(self) -> list[Path]:
        return [d / "cgroup.procs" for d in self.dirs]

    def join(self, pid: int = 0) -> None:
        """Move `pid` (0: the calling process) in; its children are born inside."""
        for p in self.procs:
            p.write_text(str(pid))

    def open_procs(self) -> list[int]:
        """Write-only descriptors of the `cgroup.procs` files, for a process that cannot see them.

        Whoever writes "0" through them moves itself in, with the rights of the opener (root):
        they must reach the zygote's supervisor only, never a kernel.
        """
        return [os.open(p, os.O_WRONLY | os.O_CLOEXEC) for p in self.procs]

    def pids(self) -> set[int]:
        out: set[int] = set()
        for p in self.procs:
            try:
                out |= {int(x) for x in p.read_text().split()}
            except OSError:
                pass
        return out

    def _file(self, name: str) -> Path | None:
        for d in self.dirs:
            if (d / name).exists():
                return d / name
        return None

    def _freeze(self, frozen: bool) -> bool:
        v2 = self.version == 2
        state = self._file("cgroup.freeze" if v2 else "freezer.state")
        try:
            return state is not None and state.write_text((("0", "1") if v2 else ("THAWED", "FROZEN"))[frozen]) > 0
        except OSError:
            return False

    def kill(self, timeout: float = 5.0) -> bool:
        """SIGKILL everything in the cgroup (v2: `cgroup.kill`; v1: freeze, kill, thaw); True once empty."""
        deadline = time.monotonic() + timeout
        kill_file = self._file("cgroup.kill") if self.version == 2 else None
        while True:
            pids = self.pids()
            if not pids:
                return True
            if time.monotonic() > deadline:
                return False
            if kill_file is not None:
                try:
                    kill_file.write_text("1")
                except OSError:
                    kill_file = None
            if kill_file is None:
                frozen = self._freeze(True)  # a frozen process cannot fork while its siblings die
                if frozen:
                    time.sleep(0.01)
                for pid in self.pids():
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
                if frozen:
                    self._freeze(False)  # killed processes must run to die
            time.sleep(0.02)

    def remove(self, timeout: float = 5.0) -> bool:
        """Remove the folders (retried while dying processes leave); True when all are gone."""
        deadline, left = time.monotonic() + timeout, list(self.dirs)
        while True:
            for d in list(left):
                try:
                    d.rmdir()
                except FileNotFoundError:
                    pass
                except OSError:  # not empty yet
                    continue
                left.remove(d)
            if not left or time.monotonic() > deadline:
                return not left
            time.sleep(0.02)

    def close(self) -> bool:
        """Kill what is left and remove the cgroup, whatever the kill achieved."""
        try:
            killed = self.kill()
        finally:
            removed = self.remove()
        return killed and removed

    def cpu_seconds(self) -> float | None:
        """CPU time used by the cgroup so far (v2 `cpu.stat`; v1 `cpuacct.usage` when co-mounted)."""
        stat = self._file("cpu.stat")
        if self.version == 2 and stat is not None:
            for line in stat.read_text().splitlines():
                if line.startswith("usage_usec "):
                    return int(line.split()[1]) / 1e6
        usage = self._file("cpuacct.usage")
        return int(usage.read_text()) / 1e9 if usage is not None else None

    def to_json(self) -> dict:
        return {"version": self.version, "dirs": [str(d) for d in self.dirs]}

    @classmethod
    def from_json(cls, data: dict) -> Cgroup:
        return cls(int(data["version"]), [Path(d) for d in data["dirs"]])


def _write_limits(version: int, dirs: dict[str, Path], memory_bytes: int, pids: int, cpus: float) -> None:
    quota = max(1000, round(cpus * CPU_PERIOD_US))
    if version == 2:
        d = dirs["memory"]
        (d / "memory.max").write_text(str(memory_bytes))
        if (d / "memory.swap.max").exists():
            (d / "memory.swap.max").write_text("0")
        (d / "pids.max").write_text(str(pids))
        (d / "cpu.max").write_text(f"{quota} {CPU_PERIOD_US}")
        return
    mem = dirs["memory"]
    (mem / "memory.limit_in_bytes").write_text(str(memory_bytes))
    if (mem / "memory.memsw.limit_in_bytes").exists():  # swap accounting: memory + swap, same cap
        (mem / "memory.memsw.limit_in_bytes").write_text(str(memory_bytes))
    (dirs["pids"] / "pids.max").write_text(str(pids))
    (dirs["cpu"] / "cpu.cfs_period_us").write_text(str(CPU_PERIOD_US))
    (dirs["cpu"] / "cpu.cfs_quota_us").write_text(str(quota))


def _enable_controllers(h: Hierarchy, parent: Path) -> None:
    """v2: let ``parent`` (a course parent, made if missing) and its children have the controllers
    (no-op on v1)."""
    if h.version != 2:
        return
    for d in (h.mounts["memory"], parent):
        d.mkdir(exist_ok=True)
        enabled = (d / "cgroup.subtree_control").read_text().split()
        wanted = [c for c in CONTROLLERS if c not in enabled]
        if wanted:
            (d / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in wanted))


def create(h: Hierarchy, slot: int, memory_bytes: int, pids: int, cpus: float) -> Cgroup:
    """A new, empty cgroup with these limits under the course parent (removed again on failure)."""
    _enable_controllers(h, h.mounts["memory"] / parent_name())
    name = f"{slot}-{os.getpid()}-{secrets.token_hex(4)}"
    dirs: dict[str, Path] = {}
    made: list[Path] = []
    try:
        for controller, mount in h.mounts.items():
            d = mount / parent_name() / name
            if d not in made:
                d.mkdir(parents=True)
                made.append(d)
            dirs[controller] = d
        _write_limits(h.version, dirs, memory_bytes, pids, cpus)
    except BaseException:
        Cgroup(h.version, made).remove(timeout=1.0)
        raise
    return Cgroup(h.version, made)


SERVERS = "encdec-servers"  # the hub's parent of its students' servers (deploy/hub/jupyterhub_config.py)


def server(h: Hierarchy, user: str, memory_bytes: int, pids: int, cpus: float) -> Cgroup:
    """As root: the cgroup of ``user``'s hub server, ``SERVERS/<user>``, made if missing, with these
    limits (set again at every start: hub.env may have changed). Everything the server starts, its
    kernels and terminals, is born inside and counted against them."""
    _enable_controllers(h, h.mounts["memory"] / SERVERS)
    dirs = {c: mount / SERVERS / user for c, mount in h.mounts.items()}
    for d in dict.fromkeys(dirs.values()):
        d.mkdir(parents=True, exist_ok=True)
    _write_limits(h.version, dirs, memory_bytes, pids, cpus)
    return Cgroup(h.version, list(dict.fromkeys(dirs.values())))


def leftovers(h: Hierarchy) -> list[Path]:
    """Kernel cgroups under the course parent (of every grader on this machine)."""
    return sorted(d for p in h.parents() if p.is_dir() for d in p.iterdir() if d.is_dir())


def sweep(h: Hierarchy, min_age_s: float = 60.0) -> list[Path]:
    """Remove the empty cgroups of graders that are gone (killed before their clean-up; their
    kernels died with them). A cgroup with processes in it is left alone: its grader may live in
    another pid namespace."""
    removed = []
    for d in leftovers(h):
        parts = d.name.split("-")
        try:
            stale = (
                len(parts) == 3
                and parts[1].isdigit()
                and not Path(f"/proc/{parts[1]}").exists()
                and d.stat().st_mtime < time.time() - min_age_s
            )
            if stale:
                d.rmdir()
                removed.append(d)
        except OSError:
            pass
    return removed


_probed: tuple[Hierarchy | None, str] | None = None


def probe(memory_bytes: int, pids: int, cpus: float) -> Hierarchy | None:
    """The hierarchy kernels get cgroups in, tried once per process (a cgroup made, limited and
    removed); None after one loud warning line when there is none to use."""
    global _probed  # noqa: PLW0603 (the probe is once per process, whatever the limits asked)
    if _probed is None:
        h, why = find_hierarchy()
        if h is not None and os.geteuid() != 0 and not all(p.is_dir() for p in h.parents()):
            h, why = None, f"no cgroup delegated to uid {os.geteuid()} ({h.parents()[0]} is missing)"
        if h is not None:
            try:
                sweep(h)
                create(h, 0, memory_bytes, pids, cpus).close()
            except OSError as err:
                h, why = None, f"cgroup v{h.version}: {err.strerror or err}: {getattr(err, 'filename', '')}"
        _probed = (h, why)
        if h is None:
            print(FALLBACK.format(why=why), file=sys.stderr, flush=True)
    return _probed[0]


def _user_parents(user: str) -> tuple[Hierarchy, pwd.struct_passwd, list[Path]]:
    """As root: the hierarchy, the user's passwd entry and its course parent in each hierarchy."""

    if os.geteuid() != 0:
        raise PermissionError("only root can delegate a cgroup")
    entry = pwd.getpwnam(user)
    h, why = find_hierarchy()
    if h is None:
        raise OSError(why)
    return h, entry, [m / parent_name(entry.pw_uid) for m in dict.fromkeys(h.mounts.values())]


def delegate(user: str) -> list[Path]:
    """As root: give the plain user ``user`` a course parent of its own in each hierarchy
    (`parent_name` of its uid), where an unprivileged grader makes its kernels' cgroups.

    v1: the folder is the user's; cgroups it makes there are its own, and it moves its own
    processes into them. v2: the folder, its `cgroup.procs`, `cgroup.threads` and
    `cgroup.subtree_control` are the user's, with the controllers enabled; v2 also asks that the
    grader itself run inside the delegated folder (moving a process needs write access to the
    common ancestor), which only a service manager can arrange (systemd's `Delegate=yes`).
    """
    h, entry, parents = _user_parents(user)
    for d in parents:
        d.mkdir(exist_ok=True)
        _enable_controllers(h, d)  # v2: the top and the user's parent hand memory, pids, cpu down
        files = ["cgroup.procs", "cgroup.threads", "cgroup.subtree_control"] if h.version == 2 else []
        for path in [d, *(d / f for f in files if (d / f).exists())]:
            os.chown(path, entry.pw_uid, entry.pw_gid)
    return parents


def undelegate(user: str) -> list[Path]:
    """As root: kill and remove what the user's graders left in its course parents, then those."""
    h, _, parents = _user_parents(user)
    for d in parents:
        if not d.is_dir():
            continue
        for child in [c for c in d.iterdir() if c.is_dir()]:
            Cgroup(h.version, [child]).close()
        d.rmdir()
    return parents


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m autograder.sandbox.cgroups",
        description="Delegate kernel cgroups to a plain user who grades (run as root).",
    )
    parser.add_argument("action", choices=["delegate", "undelegate"])
    parser.add_argument("user")
    args = parser.parse_args(argv)
    try:
        folders = (undelegate if args.action == "undelegate" else delegate)(args.user)
    except (OSError, KeyError) as err:
        print(f"cgroups {args.action}: {err}", file=sys.stderr)
        return 1
    verb = "removed" if args.action == "undelegate" else "delegated to " + args.user
    print("\n".join(f"{verb}: {d}" for d in folders))
    return 0


if __name__ == "__main__":
    sys.exit(main())
