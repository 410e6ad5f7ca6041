#!/bin/sh
# What the test suite runs from the system, checked first by `npm test` (its pretest step; .ci/run
# runs `npm test`): PostgreSQL's server binaries, Chromium, openssl, Caddy, nginx, promtool,
# systemd-analyze, script, and the system's own Node and npm in /usr/bin (the tests of the packed
# package). All there: nothing to do, a few lookups. Something missing: as root with apt-get, it is
# installed; otherwise one line names it and the command that installs it, and the exit is 1 —
# rather than minutes of tests failing one by one. LECTERN_TEST_PROVISION=check never installs.
set -u

# Where the suite finds these programs: PATH, then the sbin folders a non-login PATH lacks.
PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

# Adds what is absent to $missing (with its Debian package when named otherwise) and the package to $packages.
need() {
  missing="$missing${missing:+, }$1$([ "$1" = "$2" ] || echo " ($2)")"
  packages="$packages${packages:+ }$2"
}

# Sets $missing and $packages.
check() {
  missing=''
  packages=''
  if [ "${LECTERN_TEST_SKIP_POSTGRES:-}" != 1 ] && [ -z "${LECTERN_TEST_POSTGRES_URL:-}" ] && ! has_postgres; then
    need 'initdb and pg_ctl' postgresql
  fi
  # The browser tests launch this very file (playwright-core with the system browser).
  [ -x /usr/bin/chromium ] || need /usr/bin/chromium chromium
  for tool in openssl:openssl caddy:caddy nginx:nginx promtool:prometheus systemd-analyze:systemd script:bsdutils; do
    command -v "${tool%%:*}" >/dev/null 2>&1 || need "${tool%%:*}" "${tool#*:}"
  done
  { [ -x /usr/bin/node ] && [ -x /usr/bin/npm ]; } || need '/usr/bin/node and /usr/bin/npm' 'nodejs npm'
}

# initdb and pg_ctl on PATH, or in a versioned folder of Debian's (or Homebrew's) packages.
has_postgres() {
  command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1 && return 0
  for bin in /usr/lib/postgresql/*/bin /usr/local/opt/postgresql*/bin; do
    [ -x "$bin/initdb" ] && [ -x "$bin/pg_ctl" ] && return 0
  done
  return 1
}

check
[ -z "$missing" ] && exit 0

if [ "${LECTERN_TEST_PROVISION:-}" != check ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "npm test: installing $packages from the system packages" >&2
  # $packages unquoted: one argument per package.
  # shellcheck disable=SC2086
  if apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $packages >/dev/null; then
    check
    [ -z "$missing" ] && exit 0
  fi
fi

if command -v apt-get >/dev/null 2>&1; then
  install="$([ "$(id -u)" = 0 ] || echo 'sudo ')apt-get install -y $packages"
else
  install="your system's package manager (the Debian and Ubuntu packages: $packages)"
fi
echo "npm test: the test suite needs $missing, which this machine lacks: install them with $install, then run it again (docs/development.md)" >&2
exit 1
