#!/usr/bin/env bash
# start-cluster.sh - bring up a single-host Slurm 22.05 test cluster on Debian 12
# without systemd: munged + (optional) MariaDB + slurmdbd + slurmctld + one slurmd per
# emulated node, all on 127.0.0.1, all as background daemons with pid files.
#
# Idempotent: if the cluster in $SLURM_TEST_DIR is already up, it only checks it and exits 0.
# Otherwise it (re)creates $SLURM_TEST_DIR from the templates in conf/ and starts everything.
# Afterwards:  source "$SLURM_TEST_DIR/env.sh"   (exports SLURM_CONF for the clients)
#
# Settings (environment variables):
#   SLURM_TEST_DIR  runtime directory                 [/tmp/slurm-test]
#   NODES           number of emulated nodes          [16]
#   NODES_PER_SWITCH leaf switch size (topology/tree) [4]
#   CPUS_PER_NODE   CPUs each node claims             [4]
#   MEM_PER_NODE    RealMemory (MB) each node claims  [1000]
#   ACCOUNTING      1 = MariaDB + slurmdbd (sacct)    [1]
#   EXCLUSIVE       1 = whole-node allocation (partition OverSubscribe=EXCLUSIVE) [0]
#   TEST_USERS      local users to create for jobs    ["alice bob"]
#   CTLD_PORT, SLURMD_PORT_BASE, DBD_PORT, MYSQL_PORT [16817, 17001, 16819, 13306]
#   PREDICT_CMD     command job_submit.lua calls      [$SLURM_TEST_DIR/bin/fake-predict]
#   KEEP_STATE      1 = keep old state/DB when starting a stopped cluster [0]
#   SLURM_USER      SlurmUser of slurmctld and slurmdbd (an existing user; it gets the state
#                   directory and the log and pid files)          [root]
#   JOB_SUBMIT_LUA, CLI_FILTER_LUA, TASK_PROLOG, TASK_EPILOG, PROLOG_SLURMCTLD, PROLOG, EPILOG_SLURMCTLD
#                   paths of the hooks to install instead of the demo ones in conf/ [unset]
#   HOOK_FILES      extra files copied into $SLURM_TEST_DIR/etc next to the hooks
#                   (hpcpredict: hookclient.py, hpcpredict-hooks.conf) [unset]
set -euo pipefail
umask 022   # the cluster's files are read by job users and SlurmUser, whatever umask the caller runs under

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DIR="${SLURM_TEST_DIR:-/tmp/slurm-test}"
NODES="${NODES:-16}"
NODES_PER_SWITCH="${NODES_PER_SWITCH:-4}"
CPUS_PER_NODE="${CPUS_PER_NODE:-4}"
MEM_PER_NODE="${MEM_PER_NODE:-1000}"
ACCOUNTING="${ACCOUNTING:-1}"
EXCLUSIVE="${EXCLUSIVE:-0}"
TEST_USERS="${TEST_USERS:-alice bob}"
CTLD_PORT="${CTLD_PORT:-16817}"
SLURMD_PORT_BASE="${SLURMD_PORT_BASE:-17001}"
DBD_PORT="${DBD_PORT:-16819}"
MYSQL_PORT="${MYSQL_PORT:-13306}"
PREDICT_CMD="${PREDICT_CMD:-$DIR/bin/fake-predict}"
KEEP_STATE="${KEEP_STATE:-0}"
SLURM_USER="${SLURM_USER:-root}"

# Daemons are started through symlinks in $DIR/sbin that point at the real (non-emulator)
# binaries: installing slurm-wlm-emulator repoints /usr/sbin/slurmctld, slurmd and slurmstepd
# (Debian alternatives) at front-end binaries that cannot run with Debian's libslurmfull, and
# the daemons must be started under their plain names, because Slurm decides "am I
# slurmctld?" from basename(argv[0]); run as "slurmctld-wlm", slurmctld segfaults at start
# when accounting is on.
SLURMCTLD="$DIR/sbin/slurmctld"
SLURMD="$DIR/sbin/slurmd"
SLURMSTEPD="$DIR/sbin/slurmstepd"

T0=$(date +%s.%N)
log() { printf '[start-cluster %6.1fs] %s\n' "$(awk -v a="$(date +%s.%N)" -v b="$T0" 'BEGIN {print a - b}')" "$*"; }
die() { log "ERROR: $*"; for f in "$DIR"/log/slurmctld.log "$DIR"/log/slurmdbd.log; do [ -f "$f" ] && tail -n 20 "$f"; done; exit 1; }
alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
width=2; [ "$NODES" -ge 100 ] && width=3
num() { printf "%0${width}d" "$1"; }
node() { echo "n$(num "$1")"; }
NODE_RANGE="n[$(num 1)-$(num "$NODES")]"

# ---------------------------------------------------------------- packages
PKGS="munge slurmctld slurmd slurm-client"
[ "$ACCOUNTING" = 1 ] && PKGS="$PKGS slurmdbd mariadb-server"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $p"
done
if [ -n "$missing" ]; then
  log "installing:$missing"
  made_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then   # keep postinst scripts from starting daemons
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod 755 /usr/sbin/policy-rc.d; made_policy=1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq -o DPkg::Lock::Timeout=300
  apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=300 $missing > "${TMPDIR:-/tmp}/start-cluster-apt.log" 2>&1 \
    || { tail -n 30 "${TMPDIR:-/tmp}/start-cluster-apt.log"; [ $made_policy = 1 ] && rm -f /usr/sbin/policy-rc.d; die "apt-get install failed"; }
  [ $made_policy = 1 ] && rm -f /usr/sbin/policy-rc.d
  log "packages installed"
fi
for b in /usr/sbin/slurmctld-wlm /usr/sbin/slurmd-wlm /usr/sbin/slurmstepd-wlm /usr/sbin/munged; do
  [ -x "$b" ] || die "missing $b"
done

# ---------------------------------------------------------------- already up?
if [ -f "$DIR/env.sh" ] && alive "$DIR/run/munged.pid" && alive "$DIR/run/slurmctld.pid"; then
  all=1
  for i in $(seq 1 "$NODES"); do alive "$DIR/run/slurmd-$(node "$i").pid" || all=0; done
  [ "$ACCOUNTING" = 1 ] && { alive "$DIR/run/slurmdbd.pid" && alive "$DIR/mysql/mysqld.pid" || all=0; }
  if [ $all = 1 ] && SLURM_CONF="$DIR/etc/slurm.conf" scontrol ping 2>/dev/null | grep -q 'is UP'; then
    log "cluster in $DIR is already running; nothing to do"
    exit 0
  fi
fi
for f in "$DIR"/run/*.pid "$DIR/mysql/mysqld.pid"; do   # something half-started by an earlier run: stop it first
  [ -e "$f" ] || continue
  if alive "$f"; then log "partial cluster found in $DIR; stopping it first"; "$HERE/stop-cluster.sh"; break; fi
done

# ---------------------------------------------------------------- users + directories
for u in $TEST_USERS; do id "$u" >/dev/null 2>&1 || useradd -m -s /bin/bash "$u"; done
if [ "$KEEP_STATE" != 1 ]; then
  rm -rf "$DIR/state" "$DIR/spool" "$DIR/log" "$DIR/run" "$DIR/mysql" "$DIR/etc" "$DIR/sbin"
fi
mkdir -p "$DIR"/{etc,bin,sbin,run,log/hooks,state,spool,munge,jobs}
for d in slurmctld slurmd slurmstepd; do ln -sfn "/usr/sbin/$d-wlm" "$DIR/sbin/$d"; done
chmod 755 "$DIR" "$DIR/etc" "$DIR/bin" "$DIR/sbin" "$DIR/run" "$DIR/log"
chmod 1777 "$DIR/log/hooks" "$DIR/jobs"        # written by job users
chmod 700 "$DIR/munge"
for i in $(seq 1 "$NODES"); do mkdir -p "$DIR/spool/$(node "$i")"; done

# ---------------------------------------------------------------- configuration
HOST="$(hostname -s)"
PORT_RANGE="[$SLURMD_PORT_BASE-$((SLURMD_PORT_BASE + NODES - 1))]"
if [ "$ACCOUNTING" = 1 ]; then
  ACCT="AccountingStorageType=accounting_storage/slurmdbd\nAccountingStorageHost=localhost\nAccountingStoragePort=$DBD_PORT\nAccountingStoragePass=socket=$DIR/run/munge.socket"
else
  ACCT="AccountingStorageType=accounting_storage/none"
fi
PART_EXTRA=""; [ "$EXCLUSIVE" = 1 ] && PART_EXTRA=" OverSubscribe=EXCLUSIVE"
render() {  # render TEMPLATE DEST
  sed -e "s#@DIR@#$DIR#g" -e "s#@HOST@#$HOST#g" -e "s#@CTLD_PORT@#$CTLD_PORT#g" \
      -e "s#@SLURMD_PORT@#$SLURMD_PORT_BASE#g" -e "s#@DBD_PORT@#$DBD_PORT#g" \
      -e "s#@MYSQL_PORT@#$MYSQL_PORT#g" -e "s#@NODE_RANGE@#$NODE_RANGE#g" \
      -e "s#@PORT_RANGE@#$PORT_RANGE#g" -e "s#@CPUS@#$CPUS_PER_NODE#g" \
      -e "s#@MEM@#$MEM_PER_NODE#g" -e "s#@PREDICT_CMD@#$PREDICT_CMD#g" \
      -e "s#@PART_EXTRA@#$PART_EXTRA#g" -e "s#@ACCOUNTING@#$ACCT#g" -e "s#@SLURM_USER@#$SLURM_USER#g" "$1" > "$2"
}
render "$HERE/conf/slurm.conf.in"          "$DIR/etc/slurm.conf"
# Hooks: the project under test supplies its own by naming them in JOB_SUBMIT_LUA,
# CLI_FILTER_LUA, TASK_PROLOG, TASK_EPILOG, PROLOG_SLURMCTLD, PROLOG (copied as they are); otherwise the
# demo templates in conf/ are rendered (they show which job_desc fields arrive and how).
hook() {  # hook OVERRIDE_PATH TEMPLATE DEST
  if [ -n "$1" ]; then cp "$1" "$3"; else render "$2" "$3"; fi
}
hook "${JOB_SUBMIT_LUA:-}"   "$HERE/conf/job_submit.lua.in"      "$DIR/etc/job_submit.lua"
hook "${CLI_FILTER_LUA:-}"   "$HERE/conf/cli_filter.lua"         "$DIR/etc/cli_filter.lua"
hook "${TASK_PROLOG:-}"      "$HERE/conf/task_prolog.sh.in"      "$DIR/etc/task_prolog.sh"
hook "${TASK_EPILOG:-}"      "$HERE/conf/task_epilog.sh.in"      "$DIR/etc/task_epilog.sh"
hook "${PROLOG_SLURMCTLD:-}" "$HERE/conf/prolog_slurmctld.sh.in" "$DIR/etc/prolog_slurmctld.sh"
hook "${PROLOG:-}"           "$HERE/conf/prolog.sh.in"           "$DIR/etc/prolog.sh"
hook "${EPILOG_SLURMCTLD:-}" "$HERE/conf/epilog_slurmctld.sh.in" "$DIR/etc/epilog_slurmctld.sh"
for f in ${HOOK_FILES:-}; do cp "$f" "$DIR/etc/"; chmod 644 "$DIR/etc/$(basename "$f")"; done
cp     "$HERE/conf/fake-predict"           "$DIR/bin/fake-predict"
chmod 755 "$DIR"/etc/*.sh "$DIR/bin/fake-predict"
if [ "$ACCOUNTING" = 1 ]; then
  render "$HERE/conf/slurmdbd.conf.in" "$DIR/etc/slurmdbd.conf"; chmod 600 "$DIR/etc/slurmdbd.conf"
  chown "$SLURM_USER" "$DIR/etc/slurmdbd.conf"
fi
{ # topology.conf: leaf switches of NODES_PER_SWITCH nodes under one spine
  echo "# generated by start-cluster.sh: $NODES nodes, $NODES_PER_SWITCH per leaf switch"
  s=0
  for ((first = 1; first <= NODES; first += NODES_PER_SWITCH)); do
    s=$((s + 1)); last=$((first + NODES_PER_SWITCH - 1)); [ $last -gt "$NODES" ] && last=$NODES
    echo "SwitchName=leaf$s Nodes=n[$(num $first)-$(num $last)]"
  done
  echo "SwitchName=spine Switches=leaf[1-$s]"
} > "$DIR/etc/topology.conf"
if [ "$SLURM_USER" != root ]; then   # slurmctld/slurmdbd drop to SlurmUser: state, logs, pid files
  id "$SLURM_USER" >/dev/null 2>&1 || die "SLURM_USER $SLURM_USER does not exist"
  chown -R "$SLURM_USER" "$DIR/state"
  for f in slurmctld.log slurmdbd.log jobcomp.txt; do touch "$DIR/log/$f"; chown "$SLURM_USER" "$DIR/log/$f"; done
  chgrp "$(id -gn "$SLURM_USER")" "$DIR/run"; chmod 1775 "$DIR/run"   # sticky: munged refuses a group-writable socket dir otherwise
fi
echo "export SLURM_CONF=$DIR/etc/slurm.conf" > "$DIR/env.sh"
export SLURM_CONF="$DIR/etc/slurm.conf"
log "config written to $DIR/etc ($NODES nodes $NODE_RANGE, host $HOST)"

# ---------------------------------------------------------------- munged
[ -f "$DIR/munge/munge.key" ] || { dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 2>/dev/null; chmod 400 "$DIR/munge/munge.key"; }
/usr/sbin/munged --num-threads=4 --key-file="$DIR/munge/munge.key" --socket="$DIR/run/munge.socket" \
  --pid-file="$DIR/run/munged.pid" --log-file="$DIR/log/munged.log" --seed-file="$DIR/munge/munged.seed"
for _ in $(seq 50); do munge -S "$DIR/run/munge.socket" -n 2>/dev/null | unmunge -S "$DIR/run/munge.socket" >/dev/null 2>&1 && break; sleep 0.1; done
munge -S "$DIR/run/munge.socket" -n | unmunge -S "$DIR/run/munge.socket" >/dev/null || die "munged not working"
log "munged up (pid $(cat "$DIR/run/munged.pid"))"

# ---------------------------------------------------------------- MariaDB + slurmdbd
if [ "$ACCOUNTING" = 1 ]; then
  new_db=0
  if [ ! -d "$DIR/mysql/data/mysql" ]; then
    mkdir -p "$DIR/mysql"; chown mysql:mysql "$DIR/mysql"
    mariadb-install-db --user=mysql --datadir="$DIR/mysql/data" --skip-test-db \
      --auth-root-authentication-method=socket > "$DIR/log/mariadb-install.log" 2>&1 || die "mariadb-install-db failed"
    new_db=1
  fi
  setsid /usr/sbin/mariadbd --no-defaults --user=mysql --datadir="$DIR/mysql/data" \
    --socket="$DIR/mysql/mysqld.sock" --port="$MYSQL_PORT" --bind-address=127.0.0.1 \
    --pid-file="$DIR/mysql/mysqld.pid" --log-error="$DIR/mysql/mariadb.err" \
    --innodb-buffer-pool-size=64M --innodb-lock-wait-timeout=900 </dev/null >/dev/null 2>&1 &
  for _ in $(seq 150); do mariadb-admin --socket="$DIR/mysql/mysqld.sock" ping >/dev/null 2>&1 && [ -s "$DIR/mysql/mysqld.pid" ] && break; sleep 0.2; done
  mariadb-admin --socket="$DIR/mysql/mysqld.sock" ping >/dev/null 2>&1 || die "mariadbd did not start (see $DIR/mysql/mariadb.err)"
  if [ $new_db = 1 ]; then
    mariadb --socket="$DIR/mysql/mysqld.sock" -e "CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurmpw';
      CREATE USER 'slurm'@'localhost' IDENTIFIED BY 'slurmpw';
      GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1'; GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';"
  fi
  log "mariadbd up (pid $(cat "$DIR/mysql/mysqld.pid"), port $MYSQL_PORT)"
  /usr/sbin/slurmdbd      # reads $SLURM_CONF's directory for slurmdbd.conf
  for _ in $(seq 100); do sacctmgr -n show cluster >/dev/null 2>&1 && break; sleep 0.2; done
  sacctmgr -n show cluster >/dev/null 2>&1 || die "slurmdbd not answering"
  if ! sacctmgr -n -P show cluster format=cluster | grep -qx testcl; then
    sacctmgr -i add cluster testcl >/dev/null
    sacctmgr -i add account research Description=test Organization=test >/dev/null
    for u in $TEST_USERS root; do sacctmgr -i add user "$u" Account=research >/dev/null; done
  fi
  log "slurmdbd up (pid $(cat "$DIR/run/slurmdbd.pid"), port $DBD_PORT)"
fi

# ---------------------------------------------------------------- slurmctld + slurmds
$SLURMCTLD -f "$SLURM_CONF"
for _ in $(seq 100); do scontrol ping 2>/dev/null | grep -q 'is UP' && break; sleep 0.1; done
scontrol ping | grep -q 'is UP' || die "slurmctld did not come up"
log "slurmctld up (pid $(cat "$DIR/run/slurmctld.pid"), port $CTLD_PORT)"
for i in $(seq 1 "$NODES"); do
  $SLURMD -f "$SLURM_CONF" -d "$SLURMSTEPD" -N "$(node "$i")"
done
log "started $NODES slurmd processes"
for _ in $(seq 300); do
  idle=$(sinfo -h -t idle -o '%D' 2>/dev/null | awk '{s += $1} END {print s + 0}')
  [ "$idle" -ge "$NODES" ] && break
  sleep 0.2
done
[ "$idle" -ge "$NODES" ] || { sinfo; die "only $idle of $NODES nodes idle"; }
log "cluster ready: $idle nodes idle; use: source $DIR/env.sh"
sinfo
