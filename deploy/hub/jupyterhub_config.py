"""JupyterHub for one class of this course: PAM login, one server per Linux user (LocalProcessSpawner).

Start it as root (PAM reads /etc/shadow; the spawner starts each server as its user), with the
settings of hub.env beside this file:

    /opt/encdec-hub/env/bin/jupyterhub -f deploy/hub/jupyterhub_config.py

Students (group ENCDEC_STUDENTS_GROUP) get a server from the shared environment that setup-hub.sh
builds from the student wheel: the course package, nbgrader and JupyterLab, no solutions, no
grader, no repository. Instructors (group ENCDEC_INSTRUCTORS_GROUP) get a server from their own
checkout's virtual environment (~/encdec/.venv), so the formgrader grades with the course's grader.
The instructor guide (book/instructor_guide.md, "A class on one JupyterHub") says what each step is.
"""

import os
from pathlib import Path

HERE = Path(__file__).resolve().parent


def settings(path: Path = HERE / "hub.env") -> dict[str, str]:
    """hub.env's KEY=VALUE lines, each overridden by an environment variable of the same name."""
    found = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, value = line.split("=", 1)
            found[key.strip()] = os.environ.get(key.strip(), value.strip())
    return found


S = settings()
PREFIX = Path(S["ENCDEC_HUB_PREFIX"])
STATE = Path(S["ENCDEC_HUB_STATE"])

c = get_config()  # noqa: F821 (provided by traitlets when JupyterHub loads this file)

# Where it listens: the public side on ENCDEC_HUB_IP (loopback by default), the rest on loopback.
c.JupyterHub.ip = S["ENCDEC_HUB_IP"]
c.JupyterHub.port = int(S["ENCDEC_HUB_PORT"])
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = int(S["ENCDEC_HUB_API_PORT"])
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{S['ENCDEC_PROXY_API_PORT']}"
c.ConfigurableHTTPProxy.command = [str(PREFIX / "proxy" / "node_modules" / ".bin" / "configurable-http-proxy")]
c.JupyterHub.db_url = f"sqlite:///{STATE / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(STATE / "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = str(STATE / "jupyterhub.pid")

# Who: Linux accounts (PAM), members of the course's two groups; instructors are the hub's admins.
c.JupyterHub.authenticator_class = "pam"
c.PAMAuthenticator.allowed_groups = {S["ENCDEC_STUDENTS_GROUP"], S["ENCDEC_INSTRUCTORS_GROUP"]}
c.PAMAuthenticator.admin_groups = {S["ENCDEC_INSTRUCTORS_GROUP"]}

# One server per Linux user, started as that user in its home folder; a student's server, and all
# it starts, in a cgroup of its own with hub.env's limits (memory, CPU share, processes), so one
# runaway cell cannot starve the class or the grader.
from jupyterhub.spawner import LocalProcessSpawner  # noqa: E402 (after the settings it needs)


def limit_server(user: str, pid: int, log) -> None:
    """As root: move the server ``pid`` into ``user``'s cgroup (root's own copy of the cgroups
    module, installed by ``setup-hub.sh config``; the instructor's checkout is never imported)."""
    import importlib.util
    import sys

    cgroups = sys.modules.get("encdec_root_cgroups")
    if cgroups is None:  # loaded once per hub, not at every spawn
        spec = importlib.util.spec_from_file_location("encdec_root_cgroups", PREFIX / "system" / "cgroups.py")
        cgroups = sys.modules[spec.name] = importlib.util.module_from_spec(spec)  # dataclasses look it up
        try:
            spec.loader.exec_module(cgroups)
        except BaseException:
            del sys.modules[spec.name]  # the next spawn tries again
            raise
    h, why = cgroups.find_hierarchy()
    if h is None:
        log.error("encdec: %s's server runs without limits: %s", user, why)
        return
    group = cgroups.server(
        h, user, int(S["ENCDEC_SERVER_MEMORY_MB"]) * 2**20, int(S["ENCDEC_SERVER_PIDS"]), float(S["ENCDEC_SERVER_CPUS"])
    )
    group.join(pid)


class CourseSpawner(LocalProcessSpawner):
    """LocalProcessSpawner, a student's server limited (``limit_server``) as soon as it starts."""

    async def start(self):
        started = await super().start()
        if not in_group(self.user.name, S["ENCDEC_INSTRUCTORS_GROUP"]):
            try:
                limit_server(self.user.name, self.pid, self.log)
            except Exception as err:
                self.log.error("encdec: %s's server runs without limits: %r", self.user.name, err)
        return started


c.JupyterHub.spawner_class = CourseSpawner
c.Spawner.default_url = "/lab"
c.Spawner.cmd = [str(PREFIX / "env" / "bin" / "jupyterhub-singleuser")]
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 120
# the hub-wide Jupyter configuration is /etc/jupyter; a hub told otherwise passes it on
c.Spawner.env_keep = ["PATH", "LANG", "LC_ALL", "JUPYTER_CONFIG_PATH"]


def in_group(username: str, group: str) -> bool:
    import grp
    import pwd

    try:
        entry, gid = pwd.getpwnam(username), grp.getgrnam(group).gr_gid
    except KeyError:
        return False
    return gid in os.getgrouplist(username, entry.pw_gid)


def course_server(spawner) -> None:
    """An instructor's server runs from the checkout's environment (the formgrader and the grader);
    everyone else's from the shared student environment, with the student environment first on PATH."""
    name = spawner.user.name
    if in_group(name, S["ENCDEC_INSTRUCTORS_GROUP"]):
        import pwd

        venv = Path(pwd.getpwnam(name).pw_dir) / S["ENCDEC_CHECKOUT"] / ".venv" / "bin"
        spawner.cmd = [str(venv / "jupyterhub-singleuser")]
    else:
        venv = PREFIX / "env" / "bin"
    # the course id: the course's nbgrader_config.py sets it from ENCDEC_COURSE_ID (default "encdec"),
    # after the hub-wide file, so the hub's id reaches the instructor's nbgrader through the server
    # ENCDEC_SERVER_BIN: a terminal is a login shell, whose /etc/profile resets PATH; the profile
    # script setup-hub.sh writes puts this folder first again (nbgrader, python, jupyter)
    spawner.environment = {
        **spawner.environment,
        "PATH": f"{venv}:/usr/local/bin:/usr/bin:/bin",
        "ENCDEC_SERVER_BIN": str(venv),
        "ENCDEC_COURSE_ID": S["ENCDEC_COURSE_ID"],
    }


c.Spawner.pre_spawn_hook = course_server


def feedback_service(grader: str) -> dict:
    """Feedback at submission (autograder/ontime.py): a service the hub starts as the instructor
    ``grader``, from that instructor's checkout and environment, as their formgrader grades; never root."""
    import pwd

    account = pwd.getpwnam(grader)
    if account.pw_uid == 0 or not in_group(grader, S["ENCDEC_INSTRUCTORS_GROUP"]):
        raise ValueError(f"ENCDEC_GRADER={grader}: an instructor of the course, never root")
    checkout = Path(account.pw_dir) / S["ENCDEC_CHECKOUT"]
    venv = (checkout / ".venv").resolve() / "bin"  # where it is: the sandbox shows kernels that path, not the home's
    keep = (
        "ENCDEC_FEEDBACK_AT_SUBMISSION",
        "ENCDEC_ATTEMPTS",
        "ENCDEC_REDIS_URL",
        "ENCDEC_COURSE_ID",
        "ENCDEC_STUDENTS_GROUP",
    )
    return {
        "name": "feedback-at-submission",
        "user": grader,
        "cwd": str(checkout),
        "command": [str(venv / "python"), "-m", "autograder.ontime", "--workers", S["ENCDEC_GRADER_WORKERS"]],
        "environment": {
            **{k: S[k] for k in keep},
            "ENCDEC_EXCHANGE": S["ENCDEC_EXCHANGE_ROOT"],
            "PATH": f"{venv}:/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
        },
    }


if S["ENCDEC_FEEDBACK_AT_SUBMISSION"] and S["ENCDEC_GRADER"]:
    c.JupyterHub.services = [feedback_service(S["ENCDEC_GRADER"])]
