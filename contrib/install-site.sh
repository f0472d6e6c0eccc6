#!/bin/sh
# install-site.sh - install hpcpredict for a site (run as root, from a checkout; idempotent:
# run it again to upgrade). Steps, each skipped when already done:
#   1. the daemon's user and group (system account, no login)
#   2. PREFIX/venv: a virtual environment from python3 (>= 3.11) with hpcpredict installed from
#      a wheel built here (not editable: the checkout may go away), readable by every user
#   3. PREFIX/sbin/hpcpredictd-foreground (running without systemd), the man pages in
#      PREFIX/share/man/man1, and /usr/local/bin (/usr/local/share/man/man1) links for
#      `hpcpredict` and `hpcpredictd`
#   4. directories: the state directory (data_dir, 0750) and the config file from
#      contrib/site/hpcpredict.toml.example (installed once, never overwritten)
#   5. when systemd runs: hpcpredictd.service, hpcpredict-refresh.service/.timer (not enabled)
#   6. with --slurm-etc: the Slurm hooks (contrib/slurm/install-hooks.sh), SlurmUser added to
#      the hooks' log file owned by SlurmUser, and its logrotate file in /etc/logrotate.d
# Options:
#   --prefix DIR       [/opt/hpcpredict]
#   --user NAME        the daemon's user [hpcpredict]
#   --state-dir DIR    [/var/lib/hpcpredict] (the daemon's data_dir; the config file stays
#                      /etc/hpcpredict/hpcpredict.toml, where the daemon and the CLI look)
#   --slurm-etc DIR    also install the Slurm hooks next to slurm.conf there (e.g. /etc/slurm)
#   --slurm-user NAME  SlurmUser, owns the hooks' log file [slurm]
#   --no-systemd       do not install the unit even when systemd runs
#   --no-links         do not link the commands into /usr/local/bin (nor their pages into /usr/local/share/man)
# Uninstall: contrib/slurm/ADMIN.md, "Uninstall".
set -eu
REPO="$(cd "$(dirname "$0")/.." && pwd)"
PREFIX=/opt/hpcpredict
DAEMON_USER=hpcpredict
CONFIG_DIR=/etc/hpcpredict
STATE_DIR=/var/lib/hpcpredict
SLURM_ETC=""
SLURM_USER=slurm
SYSTEMD=auto
LINKS=1
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) PREFIX="$2"; shift 2 ;;
    --user) DAEMON_USER="$2"; shift 2 ;;
    --state-dir) STATE_DIR="$2"; shift 2 ;;
    --slurm-etc) SLURM_ETC="$2"; shift 2 ;;
    --slurm-user) SLURM_USER="$2"; shift 2 ;;
    --no-systemd) SYSTEMD=no; shift ;;
    --no-links) LINKS=0; shift ;;
    -h|--help) sed -n '2,/^set -eu/p' "$0" | sed 's/^# \{0,1\}//' | grep -v '^set -eu'; exit 0 ;;
    *) echo "install-site.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
log() { printf '[install-site] %s\n' "$*"; }
die() { printf 'install-site.sh: %s\n' "$*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "run as root (it creates a user and system directories)"
umask 022
# The venv links to this interpreter: it must be one the daemon's user can run (Debian's, not
# one under /root such as a pyenv build).
PYTHON="${PYTHON:-/usr/bin/python3}"
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null \
  || die "$PYTHON is missing or older than 3.11 (Debian 12: apt-get install python3 python3-venv)"
"$PYTHON" -c 'import venv, ensurepip' 2>/dev/null || die "$PYTHON has no venv/ensurepip (Debian: apt-get install python3-venv)"

# 1. the daemon's user
if ! id "$DAEMON_USER" >/dev/null 2>&1; then
  group_option="--user-group"
  getent group "$DAEMON_USER" >/dev/null && group_option="--gid $DAEMON_USER"   # left by an earlier userdel
  # shellcheck disable=SC2086
  useradd --system $group_option --home-dir "$STATE_DIR" --no-create-home --shell /usr/sbin/nologin "$DAEMON_USER"
  log "created system user $DAEMON_USER"
fi

# 2. the venv and the wheel
runs_as_daemon_user() { (cd / && setpriv --reuid="$DAEMON_USER" --regid="$DAEMON_USER" --init-groups "$@" >/dev/null 2>&1); }
runs_as_daemon_user "$PYTHON" -c pass \
  || die "$DAEMON_USER cannot run $PYTHON (is it under a private directory?): name another with PYTHON=..."
venv_home="$(sed -n 's/^home *= *//p' "$PREFIX/venv/pyvenv.cfg" 2>/dev/null || true)"
if [ -e "$PREFIX/venv" ] && ! runs_as_daemon_user test -x "${venv_home:-/nonexistent}/python3"; then
  log "$DAEMON_USER cannot run the Python of $PREFIX/venv (${venv_home:-no pyvenv.cfg}): creating the venv again"
  rm -rf "$PREFIX/venv"
fi
if [ ! -x "$PREFIX/venv/bin/python" ]; then
  install -d -m 755 "$PREFIX"
  "$PYTHON" -m venv "$PREFIX/venv"
  "$PREFIX/venv/bin/pip" install -q --upgrade pip
  log "created $PREFIX/venv with $("$PREFIX/venv/bin/python" --version)"
fi
WHEELS="$(mktemp -d)"
trap 'rm -rf "$WHEELS"' EXIT
"$PREFIX/venv/bin/pip" wheel -q --no-deps -w "$WHEELS" "$REPO" >"$WHEELS/build.log" 2>&1 \
  || { tail -n 20 "$WHEELS/build.log"; die "building the wheel failed"; }
WHEEL="$(ls "$WHEELS"/hpcpredict-*.whl)"
"$PREFIX/venv/bin/pip" install -q "$WHEEL[man]"                             # dependencies (man: the pages' generator)
"$PREFIX/venv/bin/pip" install -q --force-reinstall --no-deps "$WHEEL"      # this build, even at the same version
chmod -R a+rX "$PREFIX"
runs_as_daemon_user "$PREFIX/venv/bin/python" -c 'import hpcpredict.daemon.server, hpcpredict.slurm_plugin' \
  || die "$DAEMON_USER cannot import the installed package (permissions under $PREFIX?)"
log "installed $(basename "$WHEEL") into $PREFIX/venv"

# 3. the foreground runner and the commands on PATH
install -d -m 755 "$PREFIX/sbin"
sed -e "s#^PREFIX=.*#PREFIX=\"\${HPCPREDICT_PREFIX:-$PREFIX}\"#" \
    -e "s#^DAEMON_USER=.*#DAEMON_USER=\"\${HPCPREDICT_USER:-$DAEMON_USER}\"#" \
    "$REPO/contrib/site/hpcpredictd-foreground" > "$PREFIX/sbin/hpcpredictd-foreground"
chmod 755 "$PREFIX/sbin/hpcpredictd-foreground"
install -D -m 644 "$REPO/contrib/slurm/ADMIN.md" "$PREFIX/share/doc/hpcpredict/ADMIN.md"   # the unit's Documentation=
# the man pages, written from the installed commands' parsers (never kept in the repository)
"$PREFIX/venv/bin/python" -m hpcpredict.daemon.cli.manpages "$PREFIX/share/man/man1" >/dev/null \
  || die "writing the man pages failed"
chmod 644 "$PREFIX/share/man/man1/"*.1
if [ "$LINKS" = 1 ]; then
  for command in hpcpredict hpcpredictd; do ln -sfn "$PREFIX/venv/bin/$command" "/usr/local/bin/$command"; done
  install -d -m 755 /usr/local/share/man/man1        # on man's default path
  for command in hpcpredict hpcpredictd; do
    ln -sfn "$PREFIX/share/man/man1/$command.1" "/usr/local/share/man/man1/$command.1"
  done
fi

# 4. directories and the config file
install -d -o "$DAEMON_USER" -g "$DAEMON_USER" -m 0750 "$STATE_DIR"
install -d -m 755 "$CONFIG_DIR"
if [ ! -e "$CONFIG_DIR/hpcpredict.toml" ]; then
  sed -e "s#^data_dir = .*#data_dir = \"$STATE_DIR\"#" "$REPO/contrib/site/hpcpredict.toml.example" \
    > "$CONFIG_DIR/hpcpredict.toml"
  chmod 644 "$CONFIG_DIR/hpcpredict.toml"
  log "wrote $CONFIG_DIR/hpcpredict.toml"
fi

# 5. systemd
if [ "$SYSTEMD" = auto ] && [ -d /run/systemd/system ]; then
  for unit in hpcpredictd.service hpcpredict-refresh.service hpcpredict-refresh.timer; do
    sed -e "s#/opt/hpcpredict#$PREFIX#g" -e "s#^User=.*#User=$DAEMON_USER#" -e "s#^Group=.*#Group=$DAEMON_USER#" \
      "$REPO/contrib/systemd/$unit" > "/etc/systemd/system/$unit"
    if [ "$STATE_DIR" != /var/lib/hpcpredict ] && [ "$unit" = hpcpredictd.service ]; then
      # ProtectSystem=strict leaves only StateDirectory= writable: name the other one too
      sed -i "s#^StateDirectoryMode=.*#&\nReadWritePaths=$STATE_DIR#" "/etc/systemd/system/$unit"
    fi
    chmod 644 "/etc/systemd/system/$unit"
  done
  systemctl daemon-reload
  log "installed hpcpredictd.service and hpcpredict-refresh.timer in /etc/systemd/system"
else
  log "no systemd: start the daemon with $PREFIX/sbin/hpcpredictd-foreground (contrib/slurm/ADMIN.md)"
fi

# 6. the Slurm hooks
if [ -n "$SLURM_ETC" ]; then
  PYTHON="$PREFIX/venv/bin/python" sh "$REPO/contrib/slurm/install-hooks.sh" "$SLURM_ETC"
  if id "$SLURM_USER" >/dev/null 2>&1; then
    hooks_log="$(sed -n 's/^log_file *= *//p' "$SLURM_ETC/hpcpredict/hpcpredict-hooks.conf" | tail -n 1)"
    if [ -n "$hooks_log" ] && [ ! -e "$hooks_log" ]; then
      install -d -m 755 "$(dirname "$hooks_log")"
      install -o "$SLURM_USER" -g "$SLURM_USER" -m 0640 /dev/null "$hooks_log"
      log "created $hooks_log for $SLURM_USER"
    fi
    if [ -n "$hooks_log" ] && [ -d /etc/logrotate.d ]; then
      sed "s#^/var/log/slurm/hpcpredict-hooks.log #$hooks_log #" "$REPO/contrib/slurm/hpcpredict-hooks.logrotate" \
        > /etc/logrotate.d/hpcpredict-hooks
      chmod 644 /etc/logrotate.d/hpcpredict-hooks
    fi
  else
    log "warning: no user $SLURM_USER: create SlurmUser's hooks log file yourself (--slurm-user NAME)"
  fi
fi
log "done"
