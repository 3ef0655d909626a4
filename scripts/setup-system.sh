#!/usr/bin/env bash
# Debian packages the tests need: chromium (browser tests), bubblewrap (sandboxed grading) and
# postgresql (the gradebook on PostgreSQL) and redis-server (the grading queue's broker): the tests
# start their own servers on 127.0.0.1; fonts-noto-cjk (the Chinese edition's pages in Chromium).
# Installs what is missing when apt-get is available and we are root; otherwise says what to do.
set -euo pipefail
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
command -v prlimit >/dev/null 2>&1 || need+=(util-linux)
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || command -v initdb >/dev/null 2>&1 || need+=(postgresql)
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
# CJK glyphs for the Chinese edition in the browser tests (the site itself loads no web font)
{ command -v fc-list >/dev/null 2>&1 && fc-list :lang=zh-cn | grep -q .; } || need+=(fonts-noto-cjk)
[ ${#need[@]} -eq 0 ] && exit 0
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
  echo "installing Debian packages: ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" fonts-dejavu-core >/dev/null
else
  echo "missing: ${need[*]}. Install them with your system's package manager" >&2
  echo "(Debian/Ubuntu: sudo apt-get install ${need[*]}), then run make again." >&2
  exit 1
fi
