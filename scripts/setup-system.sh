#!/usr/bin/env bash
# Debian packages, installed when missing (when apt-get is available and we are root; otherwise
# this says what to install). Two sets:
#   setup-system.sh book   what `make book` needs: fonts-noto-cjk (the CJK glyphs of the Chinese
#                          edition's figures, pages and PDF; the site loads no web font) with
#                          fontconfig and DejaVu Sans (the figures' first font), WenQuanYi Micro Hei
#                          (the Chinese PDF's text, TrueType) and chromium (it prints each
#                          edition's PDF: scripts/book_pdf.py)
#   setup-system.sh        what `make test` needs besides: bubblewrap,
#                          util-linux's prlimit and libseccomp2 (sandboxed grading: the seccomp
#                          filter is libseccomp's), postgresql and redis-server (the tests start
#                          their own servers on 127.0.0.1), python3-yaml (a library of Debian's
#                          Python the sandbox must hide)
set -euo pipefail
need=()
# CJK glyphs: matplotlib finds them through fontconfig's files, the browser through fontconfig
# (grep reads all of fc-list's output: with -q it stops at the first match, fc-list then dies of
# SIGPIPE, and under pipefail an installed font reads as missing, about one run in ten)
{ command -v fc-list >/dev/null 2>&1 && fc-list :lang=zh-cn | grep . >/dev/null; } || need+=(fonts-noto-cjk fontconfig)
{ command -v fc-list >/dev/null 2>&1 && fc-list | grep 'DejaVuSans.ttf' >/dev/null; } || need+=(fonts-dejavu-core)
# the Chinese PDF's CJK text: a TrueType font, which Chromium embeds as a font (Noto CJK's outlines
# are CFF, which it prints as Type 3 glyphs a reader's search misreads)
{ command -v fc-list >/dev/null 2>&1 && fc-list | grep -i 'wqy-microhei' >/dev/null; } || need+=(fonts-wqy-microhei)
# a Chromium to print the PDFs with (and drive the browser tests): Debian's, or one the machine has
{ command -v chromium || command -v chromium-browser || command -v google-chrome; } >/dev/null 2>&1 || need+=(chromium)
if [ "${1:-test}" != book ]; then
  command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
  command -v prlimit >/dev/null 2>&1 || need+=(util-linux)
  # grep reads all of ldconfig's list (with -q it could stop early: SIGPIPE, a false 'missing')
  { ldconfig -p || /sbin/ldconfig -p; } 2>/dev/null | grep 'libseccomp\.so\.2 ' >/dev/null || need+=(libseccomp2)
  compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || command -v initdb >/dev/null 2>&1 || need+=(postgresql)
  command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
  # a library of Debian's Python that graded kernels must not see (tests/test_kernel_site.py: a
  # machine whose Pythons hold nothing beside the course's environment could not show it absent)
  [ -e /usr/lib/python3/dist-packages/yaml/__init__.py ] || need+=(python3-yaml)
fi
[ ${#need[@]} -eq 0 ] && exit 0
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
  echo "installing Debian packages: ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
else
  echo "missing: ${need[*]}. Install them with your system's package manager" >&2
  echo "(Debian/Ubuntu: sudo apt-get install ${need[*]}), then run make again." >&2
  exit 1
fi
