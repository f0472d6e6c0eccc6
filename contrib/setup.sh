#!/usr/bin/env bash
# Set up everything hpcpredict needs on a Debian 12 machine (idempotent; fast when done).
#   1. Debian packages listed in contrib/apt-packages.txt (needs root; skipped if all present)
#   2. a virtual environment (.venv, or $HPCPREDICT_VENV) from Debian's python3, so that every
#      user (Slurm job users, the daemon's unprivileged user) can run it
#   3. hpcpredict itself, editable, with the test, MPI and man-page extras: setup.py links the folders
#      under build/namespace/hpcpredict/ and the venv gets one .pth line naming build/namespace,
#      which Python, mypy and IDEs all follow (new modules need no reinstall)
#   4. Debian's SimGrid Python module made importable in the venv (reference fabrics of the communication models)
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${HPCPREDICT_VENV:-$REPO/.venv}"
log() { printf '[setup] %s\n' "$*" >&2; }

# ---------------------------------------------------------------- 1. Debian packages
missing=""
while read -r pkg; do
  pkg="${pkg%%#*}"; pkg="$(echo "$pkg" | xargs)"; [ -n "$pkg" ] || continue
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $pkg"
done < "$REPO/contrib/apt-packages.txt"
if [ -n "$missing" ]; then
  [ "$(id -u)" = 0 ] || { log "need root to install:$missing"; exit 1; }
  log "installing Debian packages:$missing"
  made_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then   # keep package scripts from starting daemons (tests start their own)
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod 755 /usr/sbin/policy-rc.d; made_policy=1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq -o DPkg::Lock::Timeout=600
  # shellcheck disable=SC2086
  apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=600 $missing >/tmp/hpcpredict-apt.log 2>&1 \
    || { tail -n 30 /tmp/hpcpredict-apt.log; [ $made_policy = 1 ] && rm -f /usr/sbin/policy-rc.d; exit 1; }
  [ $made_policy = 1 ] && rm -f /usr/sbin/policy-rc.d
fi

# ---------------------------------------------------------------- 2. venv
PYTHON=/usr/bin/python3
[ -x "$PYTHON" ] || PYTHON="$(command -v python3)"
if [ ! -x "$VENV/bin/python" ]; then
  log "creating $VENV with $("$PYTHON" --version)"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
fi

# ---------------------------------------------------------------- 3. hpcpredict
stamp="$VENV/.hpcpredict-installed"
if [ ! -f "$stamp" ] || [ "$REPO/pyproject.toml" -nt "$stamp" ] || [ "$REPO/setup.py" -nt "$stamp" ] \
   || [ ! -d "$REPO/build/namespace/hpcpredict" ]; then   # the link tree is git-ignored: `git clean -X` removes it
  log "installing hpcpredict and its Python dependencies"
  # `python -m pip`, not bin/pip: a copied venv's bin/pip still names the original's python
  "$VENV/bin/python" -m pip install -q -e "$REPO[test,mpi,man]" 2>&1 | grep -v -e '^WARNING: Location' -e 'WheelFile' || true
  "$VENV/bin/python" -c "import hpcpredict.daemon, grpc, sklearn" || { log "install failed"; exit 1; }
  touch "$stamp"
fi

# ---------------------------------------------------------------- 4. SimGrid from Debian
SIMGRID_SO=/usr/lib/python3/dist-packages/simgrid.cpython-311-x86_64-linux-gnu.so
SITE="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
if [ -f "$SIMGRID_SO" ] && [ ! -e "$SITE/$(basename "$SIMGRID_SO")" ]; then
  ln -s "$SIMGRID_SO" "$SITE/"
fi

# Job users and the daemon's user must be able to read the checkout and run the venv.
chmod -R go+rX "$REPO" 2>/dev/null || true
log "ready: $VENV/bin/hpcpredict, $VENV/bin/hpcpredictd"
