#!/usr/bin/env bash
# slurm-in-root.sh - a single-host Slurm test cluster of one Debian release's Slurm packages, beside
# the 22.05 one of start-cluster.sh: munged + slurmctld + one slurmd per emulated node on
# 127.0.0.1, no systemd, no slurmdbd (jobcomp/filetxt records finished jobs).
#
# SERIES picks the Slurm release series and so the Debian suite that ships it:
#   24.11 -> Debian 13 "trixie" (24.11.5),   26.05 -> Debian "forky", testing (26.05.5).
# Unless the host runs that suite itself, everything (daemons, clients, jobs, hooks) runs in a
# debootstrapped root of the suite, built once into ROOT and rebuilt only when it is missing or its
# stamp is stale. On a host of the suite (24.11 on Debian 13) there is no root: ROOT is empty and
# the packages are installed on the host (that path is untested).
#
#   SERIES=26.05 slurm-in-root.sh build          # the root (~2 min, ~315 MB), if missing or stale
#   SERIES=26.05 slurm-in-root.sh start          # build if needed, mount, write the config, start the daemons
#   SERIES=26.05 slurm-in-root.sh restart-ctld   # restart slurmctld with SCHED_PARAMS (jobs and state kept)
#   SERIES=26.05 slurm-in-root.sh sh 'CMD'       # run CMD in the root with SLURM_CONF set (sinfo; squeue ...)
#   SERIES=26.05 slurm-in-root.sh stop           # cancel jobs, stop the daemons by pid file, unmount
#
# Settings (environment; defaults per SERIES, 24.11 | 26.05):
#   SERIES            the Slurm release series: 24.11 or 26.05                  [24.11]
#   ROOT              the suite's root   [/var/tmp/hpcpredict-slurm-SERIES-root; "" on a host of the suite]
#   SLURM_DIR         runtime tree, as seen inside ROOT  [/srv/hpcpredict-slurm-2411 | -2605]
#   NODES, CPUS, MEM  nodes, CPUs and MB per node        [4, 4, 1000]
#   CTLD_PORT, SLURMD_PORT_BASE                          [28817, 29001 | 19917, 19901]
#   SCHED_PARAMS      SchedulerParameters   [time_min_as_soft_limit,bf_interval=2,bf_resolution=10]
#   OVERSUBSCRIBE     the partition's OverSubscribe: EXCLUSIVE = whole-node jobs (the tests'
#                     scenarios), NO = jobs share nodes by CPU (the trace replay)  [EXCLUSIVE]
#   TEST_USERS        job users: created on the host if missing, and in ROOT with the host's
#                     uid/gid (the daemon knows callers by their kernel uid)  ["alice bob carol"]
#   SLURM_USER        SlurmUser; must have the same uid on host and in ROOT   [slurm]
#   DAEMON_DIR        a host directory (hpcpredictd's data dir) bind-mounted at ROOT/run/hpcpredict,
#                     so the hooks' default hook_socket /run/hpcpredict/hook.sock reaches it  [unset]
#   HOOKS_CONF        hpcpredict-hooks.conf to install with the project's hooks
#                     (contrib/slurm/install-hooks.sh; needs PYTHON = a python with hpcpredict)  [unset]
#   MIRROR            the Debian mirror              [the host's own apt source, else deb.debian.org]
# Runtime tree (inside ROOT): SLURM_DIR/{etc,run,log,state,spool/nNN,jobs (1777),munge,munge-run}
# (munged insists that its socket and log directories belong to root, not to SlurmUser).
# Provenance and differences from the 22.05 cluster: README.md.
set -euo pipefail
umask 022   # the cluster's files are read by job users and SlurmUser, whatever umask the caller runs under
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../../.." && pwd)"
SERIES="${SERIES:-24.11}"
TAG="${SERIES/./}"                     # 2411, 2605: names of the runtime tree, logs, cluster
# SUITE: the Debian suite shipping the series; SCRIPT: debootstrap's script for it (Debian 12's
# debootstrap has no forky script; sid's builds it); APT_OPTS: forky's Release file can be past its
# Valid-Until on a clock ahead of the archive's last signing (testing is re-signed daily).
case "$SERIES" in
  24.11) SUITE=trixie; SCRIPT=trixie; APT_OPTS=""; PORTS="28817 29001" ;;
  26.05) SUITE=forky;  SCRIPT=sid;    APT_OPTS="-o Acquire::Check-Valid-Until=false"; PORTS="19917 19901" ;;
  *) echo "SERIES=$SERIES: 24.11 or 26.05" >&2; exit 2 ;;
esac
HOST_SUITE="$(. /etc/os-release 2>/dev/null; echo "${VERSION_CODENAME:-}")"
if [ "$HOST_SUITE" = "$SUITE" ]; then ROOT="${ROOT-}"; else ROOT="${ROOT-/var/tmp/hpcpredict-slurm-$SERIES-root}"; fi
ROOT="${ROOT%/}"
D="${SLURM_DIR:-/srv/hpcpredict-slurm-$TAG}"
NODES="${NODES:-4}"; CPUS="${CPUS:-4}"; MEM="${MEM:-1000}"
CTLD_PORT="${CTLD_PORT:-${PORTS% *}}"; SLURMD_PORT_BASE="${SLURMD_PORT_BASE:-${PORTS#* }}"
SCHED_PARAMS="${SCHED_PARAMS:-time_min_as_soft_limit,bf_interval=2,bf_resolution=10}"
OVERSUBSCRIBE="${OVERSUBSCRIBE:-EXCLUSIVE}"
TEST_USERS="${TEST_USERS:-alice bob carol}"
SLURM_USER="${SLURM_USER:-slurm}"
PKGS="munge slurmctld slurmd slurm-client lua5.1 lua-socket lua-cjson python3 procps"
# what the root was built from: a change here rebuilds it
STAMP="$SUITE minbase; $PKGS; recipe 1"
export SLURM_CONF="$D/etc/slurm.conf"

T0=$(date +%s.%N)
log() { printf '[slurm-%s %6.1fs] %s\n' "$TAG" "$(awk -v a="$(date +%s.%N)" -v b="$T0" 'BEGIN {print a - b}')" "$*"; }
die() { log "ERROR: $*"; [ -f "$ROOT$D/log/slurmctld.log" ] && tail -n 20 "$ROOT$D/log/slurmctld.log"; exit 1; }
# run a command inside the root (or on a native host) with a clean environment
in_root() {
  if [ -n "$ROOT" ]; then
    chroot "$ROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
      SLURM_CONF="$SLURM_CONF" DEBIAN_FRONTEND=noninteractive "$@"
  else
    /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
      SLURM_CONF="$SLURM_CONF" DEBIAN_FRONTEND=noninteractive "$@"
  fi
}
alive() { [ -f "$ROOT$1" ] && kill -0 "$(cat "$ROOT$1")" 2>/dev/null; }
mounted() { awk -v m="$1" '$2 == m {found = 1} END {exit !found}' /proc/mounts; }
mounts_under() { awk -v r="$1/" 'index($2, r) == 1 {print $2}' /proc/mounts | sort -r; }
node() { printf 'n%02d' "$1"; }

# ---------------------------------------------------------------- mounts (chroot only)
# Every mount is made a slave (rslave) or private, so unmounting inside ROOT never propagates to
# the host's /dev or /sys where the host's mounts are shared (systemd).
do_mount() {
  [ -n "$ROOT" ] || return 0
  mounted "$ROOT/proc" || mount -t proc proc "$ROOT/proc"
  mounted "$ROOT/sys"  || { mount --rbind /sys "$ROOT/sys"; mount --make-rslave "$ROOT/sys"; }
  mounted "$ROOT/dev"  || { mount --rbind /dev "$ROOT/dev"; mount --make-rslave "$ROOT/dev"; }
  if [ -n "${DAEMON_DIR:-}" ]; then
    mkdir -p "$ROOT/run/hpcpredict"
    if mounted "$ROOT/run/hpcpredict"; then umount "$ROOT/run/hpcpredict"; fi   # maybe another daemon's
    mount --bind "$DAEMON_DIR" "$ROOT/run/hpcpredict"; mount --make-private "$ROOT/run/hpcpredict"
  fi
}
do_umount() {   # $1 (default ROOT): deepest first; only what lies under it
  local under="${1:-$ROOT}" m
  [ -n "$under" ] || return 0
  for m in $(mounts_under "$under"); do umount "$m" 2>/dev/null || umount -l "$m"; done
}

# ---------------------------------------------------------------- the root
build_root() {   # debootstrap into ROOT.new, install PKGS, then swap it in
  local new="$ROOT.new" mirror
  command -v debootstrap >/dev/null || die "debootstrap missing: install contrib/apt-packages.txt"
  # the host's own Debian mirror (first URIs: of its apt sources), unless MIRROR is given
  mirror="${MIRROR:-$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n 1)}"
  mirror="${mirror:-$(awk '$1 == "deb" {print $2; exit}' /etc/apt/sources.list 2>/dev/null)}"
  mirror="${mirror:-http://deb.debian.org/debian}"
  do_umount "$new"
  [ -z "$(mounts_under "$new")" ] || die "cannot unmount everything under $new"
  rm -rf --one-file-system "$new"
  log "debootstrap $SUITE into $new from $mirror"
  debootstrap --variant=minbase "$SUITE" "$new" "$mirror" "/usr/share/debootstrap/scripts/$SCRIPT" > "${TMPDIR:-/tmp}/slurm-$TAG-debootstrap.log" 2>&1 \
    || { tail -n 20 "${TMPDIR:-/tmp}/slurm-$TAG-debootstrap.log"; die "debootstrap failed (log: ${TMPDIR:-/tmp}/slurm-$TAG-debootstrap.log)"; }
  log "debootstrap done ($(du -sh "$new" | cut -f1))"
  # keep the packages' maintainer scripts from starting daemons
  printf '#!/bin/sh\nexit 101\n' > "$new/usr/sbin/policy-rc.d"; chmod 755 "$new/usr/sbin/policy-rc.d"
  mount -t proc proc "$new/proc"
  chroot "$new" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive \
    bash -c "apt-get $APT_OPTS update -qq && apt-get install -y -qq --no-install-recommends $PKGS && apt-get clean" \
    > "${TMPDIR:-/tmp}/slurm-$TAG-apt.log" 2>&1 \
    || { umount "$new/proc"; tail -n 20 "${TMPDIR:-/tmp}/slurm-$TAG-apt.log"; die "apt-get install in the root failed"; }
  umount "$new/proc"
  echo "$STAMP" > "$new/.hpcpredict-stamp"
  do_umount "$ROOT"
  [ -z "$(mounts_under "$ROOT")" ] || die "cannot unmount everything under $ROOT"
  rm -rf --one-file-system "$ROOT"
  mv "$new" "$ROOT"
  log "root ready: slurmctld $(chroot "$ROOT" dpkg-query -W -f='${Version}' slurmctld), $(du -sh "$ROOT" | cut -f1)"
}
build() {
  if [ -z "$ROOT" ]; then   # a host of the suite: its own packages (untested here)
    local p missing=""
    for p in $PKGS; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $p"; done
    [ -z "$missing" ] || { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing || die "apt-get install failed"; }
    return 0
  fi
  if [ "$(cat "$ROOT/.hpcpredict-stamp" 2>/dev/null)" = "$STAMP" ] && [ -x "$ROOT/usr/sbin/slurmctld" ]; then return 0; fi
  build_root
}

# ---------------------------------------------------------------- users
users() {   # TEST_USERS and SlurmUser with the host's uid/gid in the root
  local u uid gid
  for u in $TEST_USERS; do id "$u" >/dev/null 2>&1 || useradd -m -s /bin/bash "$u"; done
  [ -n "$ROOT" ] || return 0
  for u in $TEST_USERS; do
    uid="$(id -u "$u")"; gid="$(id -g "$u")"
    [ "$(in_root id -u "$u" 2>/dev/null)" = "$uid" ] && [ "$(in_root id -g "$u" 2>/dev/null)" = "$gid" ] && continue
    in_root userdel "$u" >/dev/null 2>&1 || true
    in_root groupdel "$u" >/dev/null 2>&1 || true
    in_root groupadd -g "$gid" "$u" || die "group $u ($gid) cannot be made in the root"
    in_root useradd -m -u "$uid" -g "$gid" -s /bin/bash "$u" || die "user $u ($uid) cannot be made in the root"
  done
  id "$SLURM_USER" >/dev/null 2>&1 || die "SlurmUser $SLURM_USER missing on the host: install contrib/apt-packages.txt"
  [ "$(in_root id -u "$SLURM_USER")" = "$(id -u "$SLURM_USER")" ] \
    || die "SlurmUser $SLURM_USER has uid $(in_root id -u "$SLURM_USER") in the root, $(id -u "$SLURM_USER") on the host"
}

# ---------------------------------------------------------------- configuration
write_config() {
  local host; host="$(hostname -s)"
  rm -rf "$ROOT$D"/{state,spool,log,run,etc,munge-run,jobs}   # jobs: outputs are named by job id, which restart at 1
  mkdir -p "$ROOT$D"/{etc,run,log,state,spool,munge,munge-run,jobs}
  for i in $(seq 1 "$NODES"); do mkdir -p "$ROOT$D/spool/$(node "$i")"; done
  chmod 755 "$ROOT$D" "$ROOT$D"/{etc,run,log,munge-run}; chmod 700 "$ROOT$D/munge"; chmod 1777 "$ROOT$D/jobs"
  in_root chown "$SLURM_USER" "$D/state" "$D/log" "$D/run"     # slurmctld writes there as SlurmUser
  if [ -n "$ROOT" ]; then grep -qw "$host" "$ROOT/etc/hosts" || echo "127.0.0.1 $host" >> "$ROOT/etc/hosts"; fi  # munged/slurmd resolve it
  local hooks=""
  if [ -n "${HOOKS_CONF:-}" ]; then   # the project's hooks, installed the way a site does
    PYTHON="${PYTHON:-python3}" sh "$REPO/contrib/slurm/install-hooks.sh" "$ROOT$D/etc" >/dev/null
    install -m 644 "$HOOKS_CONF" "$ROOT$D/etc/hpcpredict/hpcpredict-hooks.conf"
    install -m 644 "$HOOKS_CONF" "$ROOT$D/etc/hpcpredict-hooks.conf"    # job_submit.lua reads the copy beside it
    touch "$ROOT$D/log/hpcpredict-hooks.log"; in_root chown "$SLURM_USER" "$D/log/hpcpredict-hooks.log"
    chmod 644 "$ROOT$D/log/hpcpredict-hooks.log"
    hooks="JobSubmitPlugins=lua
PrologSlurmctld=$D/etc/hpcpredict/prolog_slurmctld.py
TaskProlog=$D/etc/hpcpredict/task_prolog.sh
TaskEpilog=$D/etc/hpcpredict/task_epilog.sh
EpilogSlurmctld=$D/etc/hpcpredict/epilog_slurmctld.py"
  fi
  cat > "$ROOT$D/etc/slurm.conf" <<EOF
# Slurm $SERIES single-host test cluster (written by tests/slurm/cluster/slurm-in-root.sh)
ClusterName=tc$TAG
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT_BASE
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$D/munge-run/munge.socket
SlurmUser=$SLURM_USER
SlurmdUser=root
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool/%n
SlurmctldPidFile=$D/run/slurmctld.pid
SlurmdPidFile=$D/run/slurmd-%n.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd-%n.log
SlurmctldDebug=info
# slurmctld is restarted with other SchedulerParameters while the slurmds keep the file they read
DebugFlags=NO_CONF_HASH
MailProg=/bin/true
# no cgroups / no systemd: plain process tracking, no task containment
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SchedulerParameters=$SCHED_PARAMS
SlurmdParameters=config_overrides
ReturnToService=2
MinJobAge=3600
# finished-job records without slurmdbd
JobCompType=jobcomp/filetxt
JobCompLoc=$D/log/jobcomp.txt
$hooks
NodeName=n[01-$(printf %02d "$NODES")] NodeHostname=$host NodeAddr=127.0.0.1 Port=[$SLURMD_PORT_BASE-$((SLURMD_PORT_BASE + NODES - 1))] CPUs=$CPUS RealMemory=$MEM State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=$OVERSUBSCRIBE
EOF
}

# ---------------------------------------------------------------- daemons
start_ctld() {
  in_root /usr/sbin/slurmctld -f "$SLURM_CONF"    # /usr/sbin/slurmctld: the canonical name slurmctld checks
  for _ in $(seq 100); do in_root scontrol ping 2>/dev/null | grep -q 'is UP' && break; sleep 0.1; done
  in_root scontrol ping | grep -q 'is UP' || die "slurmctld did not come up"
  log "slurmctld up (pid $(cat "$ROOT$D/run/slurmctld.pid"), port $CTLD_PORT, SchedulerParameters=$SCHED_PARAMS)"
}
start() {
  build
  do_mount
  if alive "$D/run/slurmctld.pid"; then log "a cluster in $ROOT$D is running; stopping it first"; stop_daemons; fi
  users
  write_config
  [ -f "$ROOT$D/munge/munge.key" ] || { dd if=/dev/urandom of="$ROOT$D/munge/munge.key" bs=1024 count=1 2>/dev/null; chmod 400 "$ROOT$D/munge/munge.key"; }
  in_root /usr/sbin/munged --num-threads=4 --key-file="$D/munge/munge.key" --socket="$D/munge-run/munge.socket" \
    --pid-file="$D/munge-run/munged.pid" --log-file="$D/munge/munged.log" --seed-file="$D/munge/munged.seed"
  for _ in $(seq 50); do in_root bash -c "munge -S $D/munge-run/munge.socket -n | unmunge -S $D/munge-run/munge.socket" >/dev/null 2>&1 && break; sleep 0.1; done
  log "munged up (pid $(cat "$ROOT$D/munge-run/munged.pid"))"
  start_ctld
  for i in $(seq 1 "$NODES"); do in_root /usr/sbin/slurmd -f "$SLURM_CONF" -N "$(node "$i")"; done
  local idle=0
  for _ in $(seq 300); do
    idle=$(in_root sinfo -h -t idle -o '%D' 2>/dev/null | awk '{s += $1} END {print s + 0}')
    [ "$idle" -ge "$NODES" ] && break; sleep 0.2
  done
  [ "$idle" -ge "$NODES" ] || { in_root sinfo; die "only $idle of $NODES nodes idle"; }
  log "cluster ready: $idle nodes idle ($(in_root sinfo -V))"
}
restart_ctld() {
  alive "$D/run/slurmctld.pid" || die "slurmctld is not running"
  sed -i "s#^SchedulerParameters=.*#SchedulerParameters=$SCHED_PARAMS#" "$ROOT$SLURM_CONF"
  stop_pid "$D/run/slurmctld.pid" slurmctld
  start_ctld
  # the slurmds register again within seconds; until then their nodes are UNKNOWN
  for _ in $(seq 300); do in_root sinfo -h -N -o '%T' 2>/dev/null | grep -q unknown || break; sleep 0.2; done
  in_root sinfo -h -N -o '%T' | grep -q unknown && { in_root sinfo; die "nodes did not register again"; }
  log "nodes registered again"
}

STOPPING=""
signal_pid() {  # signal_pid PIDFILE(inside the root) EXPECTED_COMM: SIGTERM, remembered in STOPPING
  local f="$ROOT$1" pid
  [ -f "$f" ] || return 0
  pid="$(cat "$f")"
  if kill -0 "$pid" 2>/dev/null && [ "$(cat /proc/"$pid"/comm)" = "$2" ]; then
    kill -TERM "$pid"; STOPPING="$STOPPING $pid"
  fi
  rm -f "$f"
}
wait_stopped() {  # every pid in STOPPING gone; SIGKILL after 15 s
  local p left=""
  for _ in $(seq 150); do
    left=""; for p in $STOPPING; do kill -0 "$p" 2>/dev/null && left="$left $p"; done
    [ -z "$left" ] && break; sleep 0.1
  done
  for p in $left; do kill -KILL "$p" 2>/dev/null || true; done
  STOPPING=""
}
stop_pid() { signal_pid "$@"; wait_stopped; }
stop_daemons() {
  if alive "$D/run/slurmctld.pid"; then
    local jobs; jobs="$(in_root timeout 5 squeue -h -o %A 2>/dev/null | tr '\n' ' ' || true)"
    if [ -n "${jobs// /}" ]; then
      in_root scancel $jobs || true
      for _ in $(seq 100); do [ -z "$(in_root squeue -h -t R,CG,CF,PD -o %A 2>/dev/null)" ] && break; sleep 0.1; done
    fi
  fi
  for f in "$ROOT$D"/run/slurmd-*.pid; do [ -e "$f" ] && signal_pid "${f#"$ROOT"}" slurmd; done
  signal_pid "$D/run/slurmctld.pid" slurmctld
  wait_stopped
  stop_pid "$D/munge-run/munged.pid" munged
  log "daemons of $ROOT$D stopped"
}
stop() {
  [ -z "$ROOT" ] || [ -d "$ROOT" ] || return 0
  stop_daemons
  do_umount
  log "stopped; mounts left under $ROOT: $(mounts_under "$ROOT" | wc -l)"
}

case "${1:-start}" in
  build) build ;;
  start) start ;;
  restart-ctld) restart_ctld ;;
  stop)  stop ;;
  sh)    shift; do_mount; in_root bash -c "$*" ;;
  *) echo "usage: $0 build|start|restart-ctld|sh CMD|stop" >&2; exit 2 ;;
esac
