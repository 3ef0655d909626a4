#!/usr/bin/env bash
# The set-up steps a hub's administrator runs, as root, from a checkout of this repository; each
# step is safe to run again. Settings come from hub.env beside this file (an environment variable of
# the same name overrides a line).
#
#   setup-hub.sh exchange          nbgrader's exchange root, 1777 (world-writable, sticky), owned by root
#   setup-hub.sh config            the hub-wide nbgrader_config.py (course id, exchange) into ENCDEC_JUPYTER_ETC,
#                                  the hub's state folder (0700) and the two groups
#   setup-hub.sh student-env       ENCDEC_HUB_PREFIX/env: the student wheel (dist/student/, `make student-release`),
#                                  (or ENCDEC_STUDENT_WHEEL), nbgrader, JupyterLab and JupyterHub at this
#                                  repository's pins; the
#                                  instructor's nbgrader extensions (formgrader, create assignment, course list) off
#   setup-hub.sh proxy             ENCDEC_HUB_PREFIX/proxy: configurable-http-proxy at package.json's version (npm)
#   setup-hub.sh all               the four above
#   setup-hub.sh student USER...   a student: in the students' group, home folder 0700
#   setup-hub.sh instructor USER   an instructor: in the instructors' group, home 0700, ~/.jupyter/nbgrader_config.py
#                                  reading the checkout's course configuration (~/encdec/nbgrader_config.py),
#                                  kernel cgroups delegated (by root's own copy of the cgroups module, and
#                                  again at every boot by a systemd unit), then the grading sandbox checked as that user
#   setup-hub.sh undelegate USER   the end of a term, before userdel: the instructor's kernel cgroups removed
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
while IFS= read -r line; do
  [[ -z "${line//[[:space:]]/}" || "$line" =~ ^[[:space:]]*# ]] && continue
  key=${line%%=*}
  [ -n "${!key+x}" ] || export "$key=${line#*=}"
done < "$HERE/hub.env"
umask 022

need_root() { [ "$(id -u)" -eq 0 ] || { echo "setup-hub.sh $1: run it as root" >&2; exit 1; }; }
home_of() { getent passwd "$1" | cut -d: -f6; }
private_home() {  # a careful hub: nobody reads another user's files (fetched work, the instructor's course)
  local home; home=$(home_of "$1")
  [ -n "$home" ] && [ -d "$home" ] || { echo "setup-hub.sh: $1 has no home folder" >&2; exit 1; }
  chmod 0700 "$home"
}
ensure_group() { getent group "$1" >/dev/null || groupadd "$1"; }

exchange() {
  install -d -m 0755 "$(dirname "$ENCDEC_EXCHANGE_ROOT")"
  install -d -m 1777 -o root -g root "$ENCDEC_EXCHANGE_ROOT"
  chmod 1777 "$ENCDEC_EXCHANGE_ROOT"  # install -d leaves an existing folder's mode
  echo "exchange: $ENCDEC_EXCHANGE_ROOT (1777)"
}

config() {
  install -d -m 0755 "$ENCDEC_JUPYTER_ETC"
  sed -e "s|^c.CourseDirectory.course_id = .*|c.CourseDirectory.course_id = \"$ENCDEC_COURSE_ID\"|" \
      -e "s|^c.Exchange.root = .*|c.Exchange.root = \"$ENCDEC_EXCHANGE_ROOT\"|" \
      "$HERE/nbgrader_config.py" > "$ENCDEC_JUPYTER_ETC/nbgrader_config.py.new"
  chmod 0644 "$ENCDEC_JUPYTER_ETC/nbgrader_config.py.new"
  mv "$ENCDEC_JUPYTER_ETC/nbgrader_config.py.new" "$ENCDEC_JUPYTER_ETC/nbgrader_config.py"
  install -d -m 0700 "$ENCDEC_HUB_STATE"
  root_code  # the hub, as root, limits students' servers with it (jupyterhub_config.py)
  # a hub terminal is a login shell: Debian's /etc/profile resets PATH, and this puts the server's
  # environment first again (its folder comes from the spawner, jupyterhub_config.py)
  install -d -m 0755 "$ENCDEC_PROFILE_D"
  printf '%s\n' "# written by setup-hub.sh: the course's commands (nbgrader) in a hub terminal's login shell" \
    'case "${ENCDEC_SERVER_BIN:-}" in /*) PATH="$ENCDEC_SERVER_BIN:$PATH"; export PATH ;; esac' \
    > "$ENCDEC_PROFILE_D/encdec-hub.sh"
  chmod 0644 "$ENCDEC_PROFILE_D/encdec-hub.sh"
  ensure_group "$ENCDEC_STUDENTS_GROUP"
  ensure_group "$ENCDEC_INSTRUCTORS_GROUP"
  echo "hub-wide nbgrader config: $ENCDEC_JUPYTER_ETC/nbgrader_config.py (course $ENCDEC_COURSE_ID)"
}

student_env() {
  local env="$ENCDEC_HUB_PREFIX/env" wheel torch
  wheel=${ENCDEC_STUDENT_WHEEL:-$(ls "$REPO"/dist/student/encdec-*.whl 2>/dev/null | head -n 1 || true)}
  [ -n "$wheel" ] || { echo "no student wheel in dist/student/: run \`make student-release\` first" >&2; exit 1; }
  [ -x "$env/bin/python" ] || python3 -m venv "$env"
  # torch's CPU build on x86-64 Linux, as the Makefile installs it (PyPI's is the CUDA build there)
  torch=$(sed -n 's/^torch==//p' "$REPO/constraints.txt")
  if [ "$(uname -sm)" = "Linux x86_64" ]; then
    "$env/bin/pip" install -q --no-deps "torch==$torch+cpu" 2>/dev/null \
      || "$env/bin/pip" install -q --no-deps --index-url https://download.pytorch.org/whl/cpu "torch==$torch+cpu"
  fi
  "$env/bin/pip" install -q -c "$REPO/constraints.txt" "$wheel" nbgrader jupyterlab jupyterhub
  # students keep nbgrader's assignment list and validate button; the instructor's parts are off
  for extension in formgrader course_list; do
    "$env/bin/python" -m jupyter_server extension disable --sys-prefix "nbgrader.server_extensions.$extension" >/dev/null
  done
  for plugin in formgrader create-assignment course-list; do
    "$env/bin/python" -m jupyterlab.labextensions disable --level=sys_prefix "@jupyter/nbgrader:$plugin" >/dev/null
    # locked as well: a student's own `jupyter labextension enable --user` cannot turn it back on
    "$env/bin/python" -m jupyterlab.labextensions lock --level=sys_prefix "@jupyter/nbgrader:$plugin" >/dev/null
  done
  chmod -R a+rX "$env"
  echo "student environment: $env ($(basename "$wheel"))"
}

proxy() {
  local version
  version=$(node -p "const p = require('$REPO/package.json'); (p.devDependencies || {})['configurable-http-proxy']")
  install -d -m 0755 "$ENCDEC_HUB_PREFIX/proxy"
  npm install -s --prefix "$ENCDEC_HUB_PREFIX/proxy" --no-save --no-audit --no-fund --ignore-scripts \
    "configurable-http-proxy@$version"
  echo "proxy: $ENCDEC_HUB_PREFIX/proxy (configurable-http-proxy $version)"
}

# Root runs root's code only: a root-owned copy of the stdlib-only cgroups module, under root's own
# interpreter in isolated mode (-I: no PYTHONPATH, no user site, no current folder on sys.path), in
# a clean environment; never the instructor's checkout or virtual environment, where a planted .pth,
# sitecustomize or PATH entry would run as root. The copy also serves the boot unit: cgroup folders
# do not survive a reboot, and systemd delegates them again before the hub starts.
ROOT_CODE="$ENCDEC_HUB_PREFIX/system"
root_code() {
  install -d -m 0755 -o root -g root "$ROOT_CODE"
  install -m 0644 -o root -g root "$REPO/autograder/sandbox/cgroups.py" "$ROOT_CODE/cgroups.py"
}
delegate_cgroups() {
  local python
  python=$(cd / && env -i PATH=/usr/local/bin:/usr/bin:/bin "$(command -v python3)" -I -c 'import sys; print(sys.executable)')
  root_code
  (cd / && env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 "$python" -I "$ROOT_CODE/cgroups.py" "${2:-delegate}" "$1")
  if [ -d /run/systemd/system ] && [ "${2:-delegate}" = undelegate ]; then
    systemctl disable -q "encdec-cgroups@$1.service" || true
  elif [ -d /run/systemd/system ]; then
    printf '%s\n' "[Unit]" "Description=encdec: kernel cgroups of the grader %i, again after a boot" "Before=jupyterhub.service" \
      "[Service]" "Type=oneshot" "ExecStart=$python -I $ROOT_CODE/cgroups.py delegate %i" \
      "[Install]" "WantedBy=multi-user.target" > /etc/systemd/system/encdec-cgroups@.service
    systemctl daemon-reload && systemctl enable -q "encdec-cgroups@$1.service"
  fi
}

student() {
  ensure_group "$ENCDEC_STUDENTS_GROUP"
  for user in "$@"; do
    usermod -a -G "$ENCDEC_STUDENTS_GROUP" "$user"
    private_home "$user"
    echo "student: $user"
  done
}

instructor() {
  local user=$1 home checkout python
  home=$(home_of "$user")
  checkout="$home/$ENCDEC_CHECKOUT"
  # the environment's own path (a .venv that links elsewhere is read where it is)
  python="$(cd "$checkout/.venv" 2>/dev/null && pwd -P)/bin/python"
  [ -f "$checkout/nbgrader_config.py" ] && [ -x "$python" ] || {
    echo "instructor $user: no checkout with its environment at $checkout (clone it there and run \`make venv\`)" >&2; exit 1; }
  ensure_group "$ENCDEC_INSTRUCTORS_GROUP"
  usermod -a -G "$ENCDEC_INSTRUCTORS_GROUP" "$user"
  private_home "$user"
  # the instructor's server starts in the home folder: its nbgrader (and the formgrader) read the course from here
  install -d -m 0700 -o "$user" -g "$(id -gn "$user")" "$home/.jupyter"
  printf '%s\n' "# written by deploy/hub/setup-hub.sh: this user's nbgrader reads the course's configuration" \
    "load_subconfig(\"$checkout/nbgrader_config.py\")  # noqa: F821" > "$home/.jupyter/nbgrader_config.py"
  chown "$user:$(id -gn "$user")" "$home/.jupyter/nbgrader_config.py"
  # grading without root: kernels get cgroups of their own (autograder/sandbox/README.md)
  delegate_cgroups "$user"
  runuser -u "$user" -- env -i HOME="$home" PATH="$(dirname "$python"):/usr/bin:/bin" LANG=C.UTF-8 \
    bash -c "cd '$checkout' && '$python' -c 'from autograder.sandbox.sandbox import check_available; check_available(); print(\"grading sandbox: ok\")'"
  echo "instructor: $user ($checkout)"
}

[ $# -ge 1 ] || { sed -n '2,21p' "$0"; exit 2; }
step=$1; shift
case "$step" in
  exchange|config|student-env|proxy|student|instructor|undelegate|all) need_root "$step" ;;
esac
case "$step" in
  exchange) exchange ;;
  config) config ;;
  student-env) student_env ;;
  proxy) proxy ;;
  all) exchange; config; student_env; proxy ;;
  student) [ $# -ge 1 ] || { echo "setup-hub.sh student USER..." >&2; exit 2; }; student "$@" ;;
  instructor) [ $# -eq 1 ] || { echo "setup-hub.sh instructor USER" >&2; exit 2; }; instructor "$1" ;;
  undelegate) [ $# -eq 1 ] || { echo "setup-hub.sh undelegate USER" >&2; exit 2; }; delegate_cgroups "$1" undelegate ;;
  *) echo "setup-hub.sh: unknown step $step" >&2; sed -n '2,21p' "$0"; exit 2 ;;
esac
