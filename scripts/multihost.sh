#!/usr/bin/env bash
# Several "hosts" on one Linux machine, for the multi-host tests (docs/testing.md, "Multi-host
# tests"; docs/distributed.md, "Across hosts on one machine"). Run as root.
#
#   up N          hosts zmh1..zmhN (compute) and zmh0 (login host, Slurm controller). Each host is
#                 a network namespace and a UTS namespace of its own (hostname = its name), joined
#                 by a veth to the private bridge zmhbr0 = 10.78.0.1/24; zmhK = 10.78.0.(10+K).
#                 Nothing outside that /24 is addressed or routed, and /etc is not touched.
#                 Writes to $ZAYA_MH_DIR (default /run/zaya-mh): hostfile (zmh1..zmhN, slots=1),
#                 env (sourceable: the OpenMPI settings below), rsh (the ssh stand-in OpenMPI
#                 starts its daemons with), hosts ("name address" lines).
#   exec HOST CMD...   runs CMD inside HOST's namespaces (argv kept, no shell).
#   link HOST down|up  takes HOST's link down or brings it back (the network fault there is).
#   pids HOST     the pids running in HOST's network namespace, one per line.
#   slurm-up      a Slurm cluster over the hosts: munged, slurmctld in zmh0 and one slurmd per
#                 compute host, its slurm.conf (and munge key and socket) under the state
#                 directory; adds SLURM_CONF to env. slurm-down stops it.
#   down          stops every process in the hosts and the daemons, removes the namespaces, the
#                 links, the bridge, the state directory and what OpenMPI and PMIx left in /tmp and
#                 /dev/shm for these hosts; then checks, as check-clean does.
#   check-clean   exits 1 naming whatever of the above is left (0 and no output when nothing is).
#
# The hosts share the filesystem, the pid space and the CPUs; only the network and the hostname
# are their own. Both matter to OpenMPI: it names its shared-memory segments and session
# directories after the hostname (/dev/shm/vader_segment.<host>.…, /tmp/ompi.<host>.<uid>), so
# hosts with one hostname would share them and crash. Run mpirun inside a host (zmh0: exec zmh0
# mpirun …) so that its own session directory is one of these hosts' too.
set -euo pipefail
PATH=$PATH:/usr/sbin:/sbin  # ip, slurmctld, munged for a caller without sbin on its PATH

D=${ZAYA_MH_DIR:-/run/zaya-mh}
[[ "$D" =~ ^(/[A-Za-z0-9._-]+)+$ ]] || { echo "multihost: ZAYA_MH_DIR must be an absolute path: '$D'" >&2; exit 1; }
# The state directory holds this file from its first moment: only such a directory is removed.
MARK=$D/.zaya-multihost
NET=10.78.0
BR=zmhbr0
PREFIX=zmh
CONF=$D/slurm/slurm.conf
MUNGE=$D/munge
MAX_HOSTS=16

die() {
  echo "multihost: $*" >&2
  exit 1
}

need_root() { [ "$(id -u)" = 0 ] || die "must run as root (it makes namespaces and links)"; }

addr() { echo "$NET.$((10 + $1))"; }

# The number of compute hosts of the running set-up (0 when none is up).
count() {
  if [ -f "$D/count" ]; then cat "$D/count"; else echo 0; fi
}

# The host names zmh0..zmhN that are up (from the namespaces, so that a half-made set-up is found
# too).
our_netns() { ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${PREFIX}[0-9]+$" || true; }

check_host() {
  [[ "$1" =~ ^${PREFIX}[0-9]+$ ]] || die "'$1' is not a host name (${PREFIX}0..${PREFIX}N)"
  [ -e "/run/netns/$1" ] || die "host $1 is not up (scripts/multihost.sh up N)"
}

inside() {
  local h=$1
  shift
  nsenter --net="/run/netns/$h" --uts="$D/uts/$h" -- "$@"
}

# kill -0 on the pid of a pid file.
alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# Stops the daemons of these pid files together (each takes about 2 s after SIGTERM): TERM, then
# KILL after 3 s (a test cluster's state is thrown away, so a slow orderly shutdown buys nothing).
stop_pidfiles() {
  local f pids=()
  for f in "$@"; do
    if alive "$f"; then pids+=("$(cat "$f")"); fi
  done
  if [ ${#pids[@]} -gt 0 ]; then
    kill "${pids[@]}" 2>/dev/null || true
    for _ in $(seq 30); do
      kill -0 "${pids[@]}" 2>/dev/null || break  # (fails only when every one is gone)
      sleep 0.1
    done
    kill -9 "${pids[@]}" 2>/dev/null || true
  fi
  rm -f "$@"
}

write_files() {
  local n=$1 k
  cat >"$D/rsh" <<EOF
#!/bin/sh
# The ssh stand-in OpenMPI starts its daemons with (plm_rsh_agent): rsh [ssh options] HOST WORDS...
# runs WORDS through sh -c inside HOST's namespaces, as ssh would on a real host.
while [ \$# -gt 0 ]; do
  case "\$1" in
    -x|-n|-T|-q|-t|-4|-6|-A|-a|-C|-N|-v) shift ;;
    -o|-p|-l|-i|-F|-c|-m) shift 2 ;;
    *) break ;;
  esac
done
h=\$1; shift
case "\$h" in
  ${PREFIX}[0-9]|${PREFIX}[0-9][0-9]) ;;
  $NET.*) h=${PREFIX}\$((\${h#$NET.} - 10)) ;;
  *) echo "rsh: unknown host \$h" >&2; exit 255 ;;
esac
[ -e "/run/netns/\$h" ] || { echo "rsh: host \$h is not up" >&2; exit 255; }
exec nsenter --net="/run/netns/\$h" --uts="$D/uts/\$h" -- /bin/sh -c "\$*"
EOF
  chmod 755 "$D/rsh"
  : >"$D/hostfile"
  : >"$D/hosts"
  for k in $(seq 0 "$n"); do echo "$PREFIX$k $(addr "$k")" >>"$D/hosts"; done
  for k in $(seq 1 "$n"); do echo "$PREFIX$k slots=1" >>"$D/hostfile"; done
  # Binding none: the hosts share the machine's cores, and a daemon that binds its ranks knows
  # only of its own host's, so ranks of several hosts could be bound to one core.
  cat >"$D/env" <<EOF
export OMPI_MCA_plm_rsh_agent=$D/rsh
export OMPI_MCA_btl_tcp_if_include=$NET.0/24
export OMPI_MCA_oob_tcp_if_include=$NET.0/24
export OMPI_MCA_pml=ob1
export OMPI_MCA_btl=self,vader,tcp
export OMPI_MCA_hwloc_base_binding_policy=none
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
EOF
}

cmd_up() {
  need_root
  local n=${1:-}
  if ! [[ "$n" =~ ^[0-9]+$ ]] || [ "$n" -lt 1 ] || [ "$n" -gt $MAX_HOSTS ]; then
    die "up N: N must be 1..$MAX_HOSTS, not '$n'"
  fi
  local b
  for b in ip nsenter unshare; do
    command -v "$b" >/dev/null ||
      die "$b not found: scripts/setup.sh installs iproute2 and util-linux"
  done
  # What a killed test left behind goes first.
  if [ -e "$MARK" ] || [ -n "$(our_netns)" ] || ip link show "$BR" >/dev/null 2>&1; then
    cmd_down >/dev/null 2>&1 || true
  fi
  [ ! -e "$D" ] || die "up: $D exists and is not a state directory of this script"
  # A failed or interrupted up leaves nothing: the trap tears down what was made.
  trap 'cmd_down >/dev/null 2>&1 || true' EXIT
  trap 'exit 130' INT TERM
  mkdir -p "$D"
  touch "$MARK"
  mkdir "$D/uts"
  echo "$n" >"$D/count"
  ip link add "$BR" type bridge
  ip addr add "$NET.1/24" dev "$BR"
  ip link set "$BR" up
  local k h
  for k in $(seq 0 "$n"); do
    h=$PREFIX$k
    ip netns add "$h"
    ip link add "${PREFIX}v$k" type veth peer name eth0 netns "$h"
    ip link set "${PREFIX}v$k" master "$BR" up
    ip -n "$h" addr add "$(addr "$k")/24" dev eth0
    ip -n "$h" link set eth0 up
    ip -n "$h" link set lo up
    touch "$D/uts/$h"
    unshare --uts="$D/uts/$h" hostname "$h"
  done
  write_files "$n"
  trap - EXIT INT TERM
  echo "multihost: up: ${PREFIX}1..$PREFIX$n and ${PREFIX}0 on $BR ($NET.0/24); source $D/env"
}

write_slurm_conf() {
  local n=$1 k cpus
  cpus=$(nproc)
  mkdir -p "$D/slurm/ctld" "$D/slurm/log"
  for k in $(seq 1 "$n"); do mkdir -p "$D/slurm/spool/$PREFIX$k" "$D/slurm/tmp/$PREFIX$k"; done
  {
    echo "# Written by scripts/multihost.sh: slurmctld in ${PREFIX}0, one slurmd in each compute host."
    echo "ClusterName=zmh"
    echo "SlurmctldHost=${PREFIX}0($(addr 0))"
    echo "SlurmUser=root"
    echo "SlurmdUser=root"
    echo "AuthType=auth/munge"
    echo "CredType=cred/munge"
    echo "AuthInfo=socket=$MUNGE/munge.socket"
    echo "MpiDefault=pmix"
    echo "# No cgroups: processes tracked through /proc, no task containment."
    echo "ProctrackType=proctrack/linuxproc"
    echo "TaskPlugin=task/none"
    echo "JobAcctGatherType=jobacct_gather/none"
    echo "AccountingStorageType=accounting_storage/none"
    echo "JobCompType=jobcomp/none"
    echo "MailProg=/bin/true"
    echo "SchedulerType=sched/backfill"
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_Core"
    echo "ReturnToService=2"
    echo "SlurmctldPort=6817"
    echo "SlurmdPort=6818"
    echo "SlurmdTimeout=30"
    echo "KillWait=5"
    echo "StateSaveLocation=$D/slurm/ctld"
    echo "# Per node: the hosts share one filesystem, and PMIx makes its directories under TmpFS"
    echo "# (a shared one collides: \"Cannot create directory … spmix_appdir…: File exists\")."
    echo "SlurmdSpoolDir=$D/slurm/spool/%n"
    echo "TmpFS=$D/slurm/tmp/%n"
    echo "SlurmctldPidFile=$D/slurm/slurmctld.pid"
    echo "SlurmdPidFile=$D/slurm/slurmd.%n.pid"
    echo "SlurmctldLogFile=$D/slurm/log/slurmctld.log"
    echo "SlurmdLogFile=$D/slurm/log/slurmd.%n.log"
    for k in $(seq 1 "$n"); do
      echo "NodeName=$PREFIX$k NodeHostname=$PREFIX$k NodeAddr=$(addr "$k") CPUs=$cpus RealMemory=1000 State=UNKNOWN"
    done
    echo "PartitionName=hosts Nodes=${PREFIX}[1-$n] Default=YES MaxTime=INFINITE State=UP"
  } >"$CONF"
}

cmd_slurm_up() {
  need_root
  local n k
  n=$(count)
  if [ "$n" -lt 1 ] || [ ! -e "/run/netns/${PREFIX}0" ]; then die "slurm-up: no hosts (run up N first)"; fi
  local b
  for b in munged mungekey slurmctld slurmd srun sinfo; do
    command -v "$b" >/dev/null ||
      die "slurm-up: $b not found: scripts/setup.sh installs munge, slurmctld, slurmd, slurm-client"
  done
  getent passwd munge >/dev/null || die "slurm-up: no user munge (the munge package makes it)"
  trap 'cmd_slurm_down >/dev/null 2>&1 || true' EXIT
  trap 'exit 130' INT TERM
  # munged with a key and socket of its own, in the login host (a socket path reaches every host:
  # the network namespaces do not separate the filesystem).
  if ! alive "$MUNGE/munged.pid"; then
    install -d -o munge -g munge -m 0755 "$MUNGE"
    [ -s "$MUNGE/munge.key" ] || runuser -u munge -- mungekey --create --keyfile="$MUNGE/munge.key"
    inside "${PREFIX}0" runuser -u munge -- munged --socket="$MUNGE/munge.socket" \
      --key-file="$MUNGE/munge.key" --pid-file="$MUNGE/munged.pid" \
      --log-file="$MUNGE/munged.log" --seed-file="$MUNGE/munged.seed" --origin="$(addr 0)"
  fi
  write_slurm_conf "$n"
  alive "$D/slurm/slurmctld.pid" || inside "${PREFIX}0" slurmctld -f "$CONF"
  for k in $(seq 1 "$n"); do
    alive "$D/slurm/slurmd.$PREFIX$k.pid" || inside "$PREFIX$k" slurmd -f "$CONF" -N "$PREFIX$k"
  done
  local idle=0
  for _ in $(seq 150); do
    idle=$(SLURM_CONF=$CONF timeout -k 2 5 sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | wc -l) || idle=0
    [ "$idle" = "$n" ] && break
    sleep 0.2
  done
  if [ "$idle" != "$n" ]; then
    tail -n 5 "$D"/slurm/log/*.log "$MUNGE/munged.log" >&2 2>/dev/null || true
    die "slurm-up: $idle of $n nodes idle after 30 s (the logs' ends above)"
  fi
  grep -q '^export SLURM_CONF=' "$D/env" || echo "export SLURM_CONF=$CONF" >>"$D/env"
  trap - EXIT INT TERM
  echo "multihost: slurm-up: slurmctld in ${PREFIX}0, slurmd in ${PREFIX}1..$PREFIX$n; SLURM_CONF=$CONF"
}

# Kills every process in host h's network namespace: TERM, then KILL; waits until none is left
# (5 s at most).
kill_host() {
  local h=$1 p
  p=$(ip netns pids "$h" 2>/dev/null || true)
  [ -n "$p" ] || return 0
  # shellcheck disable=SC2086
  kill $p 2>/dev/null || true
  for _ in $(seq 10); do
    [ -n "$(ip netns pids "$h" 2>/dev/null || true)" ] || return 0
    sleep 0.1
  done
  for _ in $(seq 40); do
    p=$(ip netns pids "$h" 2>/dev/null || true)
    [ -n "$p" ] || return 0
    # shellcheck disable=SC2086
    kill -9 $p 2>/dev/null || true
    sleep 0.1
  done
}

cmd_slurm_down() {
  need_root
  local k n
  n=$(count)
  if [ -f "$CONF" ] && alive "$D/slurm/slurmctld.pid"; then
    SLURM_CONF=$CONF timeout -k 2 5 scancel --quiet --user=root 2>/dev/null || true
  fi
  local files=("$D/slurm/slurmctld.pid" "$MUNGE/munged.pid")
  for k in $(seq 1 "$n"); do files+=("$D/slurm/slurmd.$PREFIX$k.pid"); done
  stop_pidfiles "${files[@]}"
  # Step daemons and tasks that outlived their slurmd.
  for k in $(seq 1 "$n"); do
    if [ -e "/run/netns/$PREFIX$k" ]; then kill_host "$PREFIX$k"; fi
  done
  rm -rf "$D/slurm" "$MUNGE"
  if [ -f "$D/env" ]; then sed -i '/^export SLURM_CONF=/d' "$D/env"; fi
}

# The namespace ids (inode numbers) of our hosts, net and UTS: a process that still holds one of
# them after the names are gone is a leftover too.
ns_ids() {
  local f
  for f in /run/netns/"$PREFIX"[0-9]* "$D"/uts/"$PREFIX"[0-9]*; do
    [ -e "$f" ] && stat -L -c %i "$f" 2>/dev/null
  done
  return 0
}

# What OpenMPI and PMIx leave in /tmp and /dev/shm for these hosts (named after the hostnames),
# and the spmix directories of a Slurm PMIx step (only a Slurm cluster makes them).
leftover_files() {
  local f
  for f in /tmp/ompi."$PREFIX"[0-9]* /tmp/spmix* /dev/shm/vader_segment."$PREFIX"[0-9]* \
    /tmp/pmix*."$PREFIX"[0-9]*; do
    if [ -e "$f" ]; then echo "$f"; fi
  done
  return 0
}

# Prints what is left, one line each; $1: namespace ids known from before the names went.
leftovers() {
  local ids=$1 h l p link
  if [ -e "$MARK" ]; then echo "state directory $D"; fi
  for h in $(our_netns); do echo "network namespace $h"; done
  while read -r l; do
    link=${l%%@*}
    if [[ "$link" == "$BR" || "$link" =~ ^${PREFIX}v[0-9]+$ ]]; then echo "link $link"; fi
  done < <(ip -o link show 2>/dev/null | awk -F': ' '{print $2}')
  local -A ours=()
  for l in $ids; do ours[$l]=1; done
  local -a words
  for p in /proc/[0-9]*; do
    [ "${p#/proc/}" = "$$" ] && continue
    if [ ${#ours[@]} -gt 0 ]; then
      for l in "$p/ns/net" "$p/ns/uts"; do
        l=$(readlink "$l" 2>/dev/null) || continue
        l=${l#*[}
        l=${l%]}
        if [ -n "${ours[$l]:-}" ]; then
          mapfile -d "" words 2>/dev/null <"$p/cmdline" || words=()
          echo "process ${p#/proc/} (${words[*]:0:6}) in a namespace of ours"
          continue 2
        fi
      done
    fi
    # Daemons started with our paths (munged, slurmctld, slurmd), wherever they run.
    mapfile -d "" words 2>/dev/null <"$p/cmdline" || continue
    case "${words[0]:-}" in
      *munged | *slurmctld | *slurmd | *slurmstepd)
        if [[ "${words[*]}" == *"$D/"* ]]; then echo "process ${p#/proc/} (${words[*]})"; fi
        ;;
    esac
  done
  leftover_files
}

cmd_down() {
  need_root
  local ids h f left
  ids=$(ns_ids)
  cmd_slurm_down >/dev/null 2>&1 || true
  for h in $(our_netns); do kill_host "$h"; done
  for h in $(our_netns); do ip netns del "$h" 2>/dev/null || true; done
  for f in "$D"/uts/"$PREFIX"[0-9]*; do
    [ -e "$f" ] || continue
    umount -l "$f" 2>/dev/null || true
  done
  while read -r f; do
    f=${f%%@*}
    if [[ "$f" =~ ^${PREFIX}v[0-9]+$ ]]; then ip link del "$f" 2>/dev/null || true; fi
  done < <(ip -o link show 2>/dev/null | awk -F': ' '{print $2}')
  ip link del "$BR" 2>/dev/null || true
  if [ -e "$MARK" ]; then rm -rf "$D"; fi
  while read -r f; do rm -rf "$f"; done < <(leftover_files)
  left=$(leftovers "$ids")
  if [ -n "$left" ]; then
    echo "multihost: down: left behind:" >&2
    echo "$left" >&2
    return 1
  fi
  echo "multihost: down: nothing left"
}

cmd_check_clean() {
  local left
  left=$(leftovers "$(ns_ids)")
  if [ -n "$left" ]; then
    echo "multihost: left behind:" >&2
    echo "$left" >&2
    return 1
  fi
}

case "${1:-}" in
  up)
    shift
    cmd_up "$@"
    ;;
  exec)
    [ $# -ge 3 ] || die "exec HOST CMD..."
    check_host "$2"
    h=$2
    shift 2
    exec nsenter --net="/run/netns/$h" --uts="$D/uts/$h" -- "$@"
    ;;
  link)
    if [ $# != 3 ] || ! [[ "$3" =~ ^(up|down)$ ]]; then die "link HOST down|up"; fi
    check_host "$2"
    ip link set "${PREFIX}v${2#"$PREFIX"}" "$3"
    ;;
  pids)
    [ $# = 2 ] || die "pids HOST"
    check_host "$2"
    ip netns pids "$2"
    ;;
  slurm-up) cmd_slurm_up ;;
  slurm-down) cmd_slurm_down ;;
  down) cmd_down ;;
  check-clean) cmd_check_clean ;;
  *)
    sed -n '2,26p' "$0" >&2
    exit 2
    ;;
esac
