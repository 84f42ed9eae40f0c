#!/usr/bin/env bash
# packaging_test.sh SOURCE_DIR BUILD_DIR NOTIFY_LISTEN: AQS as an
# administrator installs and runs it, from the packages.
#
# Outside (this tree): ./scripts/package over BUILD_DIR twice (a version and
# a newer one for the upgrade), lintian on every package (no errors).
# Inside a mount namespace of its own where SOURCE_DIR and BUILD_DIR are
# hidden under empty tmpfs mounts (nothing started can reach the build):
# dpkg -i into this machine's root, binaries from /usr/bin with no RUNPATH,
# systemd-analyze verify of the units, the runtime's -dev package through
# pkg-config and find_package(aqs), aqsd and two agents started as the
# units' ExecStart lines say (aqsd as the aqs user, its READY=1 and
# WATCHDOG=1 checked on a notification socket of the test's own, from
# aqsd's pid only, READY=1 only once it answers), a job on both agents under
# the partitions of the packaged /etc/aqs/aqs.conf, an upgrade in place
# (dpkg -i of the newer packages, the services restarted as their units
# say) with four jobs running that complete (one an adaptive MPI program
# built against the packages, its result checked), a database from a newer AQS
# refused, faucetsd started as its unit says (READY=1, STOPPING=1), and
# dpkg --purge: every file of the packages and their
# configuration gone, the job database (/var/lib/aqs/postgres) and the aqs
# user kept.
#
# Needs root (dpkg -i); skips (77) when it is not, or when AQS is already
# installed here (the test would purge it).
set -euo pipefail

src=$1 build=$2 listen_bin=$3
packages=(aqs-server aqs-node aqs-client aqs-slurm-names libaqs-runtime0 libaqs-runtime-dev aqs-faucetsd)
user=aqs-packaging-a
nodes=(pkgt1 pkgt2)

step() { echo "== $*" >&2; }
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# ---------------------------------------------------------------- outside
if [[ ${AQS_PACKAGING_PHASE:-outside} == outside ]]; then
  if [[ $(id -u) -ne 0 ]]; then
    echo "SKIP: needs root (dpkg -i into this machine)" >&2
    exit 77
  fi
  for p in "${packages[@]}"; do
    if [[ $(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true) == *installed* ]]; then
      echo "SKIP: $p is installed on this machine; this test would purge it" >&2
      exit 77
    fi
  done
  if [[ -e /var/lib/aqs || -e /var/spool/aqs ]]; then
    echo "SKIP: /var/lib/aqs or /var/spool/aqs exists (an AQS of this machine's); this test would remove it" >&2
    exit 77
  fi
  for tool in lintian systemd-analyze dpkg-buildpackage dh unshare setpriv jq mpicc pkg-config openssl psql; do
    command -v "$tool" >/dev/null || fail "$tool is missing (./scripts/setup-deps installs it)"
  done

  tmp=$(mktemp -d /tmp/aqs-packaging-test.XXXXXX)
  chmod 0755 "$tmp"
  created_users=()
  getent passwd aqs >/dev/null || created_users+=(aqs)
  getent passwd aqs-faucets >/dev/null || created_users+=(aqs-faucets)
  cleanup() {
    local rc=$?
    set +e
    # Whatever the inside phase left running (it records every pid).
    if [[ -f $tmp/pids ]]; then
      while read -r pid; do kill -KILL "$pid" 2>/dev/null; done <"$tmp/pids"
    fi
    pkill -KILL -u aqs-packaging-a 2>/dev/null
    for u in "${created_users[@]}"; do pkill -KILL -u "$u" 2>/dev/null; done
    sleep 0.5
    local -a installed=()
    for p in "${packages[@]}"; do
      [[ $(dpkg-query -W -f='${Status}' "$p" 2>/dev/null) == *installed* ]] && installed+=("$p")
    done
    ((${#installed[@]})) && dpkg --purge "${installed[@]}" >/dev/null 2>&1
    rm -rf /var/lib/aqs /var/lib/aqs-faucets /var/spool/aqs
    rm -f /etc/aqs/node-pkgt*.env
    rm -rf /etc/aqs/faucets
    rmdir /etc/aqs 2>/dev/null
    for u in "${created_users[@]}"; do
      getent passwd "$u" >/dev/null && userdel "$u" 2>/dev/null
      getent group "$u" >/dev/null && groupdel "$u" 2>/dev/null
    done
    getent passwd "$user" >/dev/null && userdel "$user" 2>/dev/null
    if ((rc != 0)); then
      for f in "$tmp"/*.log; do
        [[ -f $f ]] || continue
        echo "--- $f (last lines)" >&2
        tail -n 25 "$f" >&2
      done
    fi
    rm -rf "$tmp"
    exit "$rc"
  }
  trap cleanup EXIT

  step "scripts/package over $build"
  "$src/scripts/package" --build-dir "$build" --no-build --out "$tmp/v1" >"$tmp/v1.list" 2>"$tmp/package.log" ||
    fail "scripts/package failed"
  mapfile -t debs <"$tmp/v1.list"
  ((${#debs[@]} == ${#packages[@]})) || fail "scripts/package printed ${#debs[@]} paths, expected ${#packages[@]}: ${debs[*]}"
  for p in "${packages[@]}"; do
    found=0
    for d in "${debs[@]}"; do
      [[ -f $d && $(dpkg-deb -f "$d" Package) == "$p" ]] && found=1
    done
    ((found)) || fail "no package $p among ${debs[*]}"
  done
  v1=$(dpkg-deb -f "${debs[0]}" Version)
  upstream=$(sed -n 's/^project(aqs VERSION \([0-9][0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
  [[ $v1 =~ ^${upstream//./\\.}~git[0-9]{14}\.[0-9a-f]{7}(\+dirty[0-9]{14})?$ ]] ||
    fail "version '$v1' is not $upstream~gitTIME.HASH"
  step "version $v1"

  v2="$v1+upgrade"
  "$src/scripts/package" --build-dir "$build" --no-build --out "$tmp/v2" --version "$v2" >"$tmp/v2.list" 2>>"$tmp/package.log" ||
    fail "scripts/package --version failed"
  dpkg --compare-versions "$v2" gt "$v1" || fail "$v2 is not newer than $v1"

  step "lintian"
  lintian_status=0
  lintian --no-tag-display-limit "${debs[@]}" >"$tmp/lintian.out" 2>&1 || lintian_status=$?
  cat "$tmp/lintian.out" >&2
  if grep -q '^E: ' "$tmp/lintian.out"; then
    fail "lintian reports errors"
  fi
  ((lintian_status == 0 || lintian_status == 2)) || fail "lintian failed to run (status $lintian_status)"

  # The rest runs from copies, in a mount namespace where the trees are gone.
  cp "$0" "$tmp/packaging_test.sh"
  cp "$listen_bin" "$tmp/notify-listen"
  AQS_PACKAGING_PHASE=inside AQS_PACKAGING_TMP=$tmp AQS_V1=$v1 AQS_V2=$v2 \
    unshare --mount --propagation private bash "$tmp/packaging_test.sh" "$src" "$build" "$tmp/notify-listen"
  step "all checks passed"
  exit 0
fi

# ---------------------------------------------------------------- inside
tmp=$AQS_PACKAGING_TMP
v1=$AQS_V1
v2=$AQS_V2
mount -t tmpfs -o size=1m,mode=0755 aqs-build-hidden "$build"
mount -t tmpfs -o size=1m,mode=0755 aqs-source-hidden "$src"
[[ ! -e $build/CMakeCache.txt && ! -e $src/CMakeLists.txt ]] || fail "the trees are still visible"
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
unset AQS_SOCKET LD_LIBRARY_PATH AQS_LOG_LEVEL NOTIFY_SOCKET WATCHDOG_USEC WATCHDOG_PID
cd "$tmp"

track() { echo "$1" >>"$tmp/pids"; }

# run_unit UNIT INSTANCE LOG [VAR=VALUE...]: starts UNIT's ExecStart in the
# background as systemd would: its User/Group, its Environment= and
# EnvironmentFile= (a leading '-': optional), %i and %% replaced, $VAR split
# into words and ${VAR} kept as one, nothing else from this environment but
# the VAR=VALUE given (what systemd adds, e.g. NOTIFY_SOCKET). Sets $unit_pid.
run_unit() {
  local unit=/lib/systemd/system/$1 inst=$2 log=$3
  shift 3
  local line key value exec_start="" unit_user="" unit_group=""
  local -a env_files=() envs=("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" "LANG=C.UTF-8")
  while IFS= read -r line; do
    [[ $line =~ ^([A-Za-z]+)=(.*)$ ]] || continue
    key=${BASH_REMATCH[1]} value=${BASH_REMATCH[2]//%i/$inst}
    value=${value//%%/%}
    case $key in
      ExecStart) exec_start=$value ;;
      User) unit_user=$value ;;
      Group) unit_group=$value ;;
      Environment) envs+=("$value") ;;
      EnvironmentFile) env_files+=("$value") ;;
    esac
  done < <(sed -n '/^\[Service\]/,/^\[/p' "$unit")
  [[ -n $exec_start ]] || fail "$unit has no ExecStart"
  local f
  for f in "${env_files[@]}"; do
    local optional=0
    [[ $f == -* ]] && optional=1 f=${f#-}
    if [[ ! -f $f ]]; then
      ((optional)) || fail "$unit: EnvironmentFile $f is missing"
      continue
    fi
    while IFS= read -r line; do
      [[ $line =~ ^[[:space:]]*([A-Za-z_][A-Za-z0-9_]*)=(.*)$ ]] || continue
      key=${BASH_REMATCH[1]} value=${BASH_REMATCH[2]}
      [[ $value =~ ^\"(.*)\"$ ]] && value=${BASH_REMATCH[1]}
      envs+=("$key=$value")
    done <"$f"
  done
  envs+=("$@")
  lookup() {
    local name=$1 e out=""
    for e in "${envs[@]}"; do [[ ${e%%=*} == "$name" ]] && out=${e#*=}; done
    printf '%s' "$out"
  }
  local -a words=() argv=()
  read -ra words <<<"$exec_start"
  local w
  for w in "${words[@]}"; do
    if [[ $w =~ ^\$([A-Za-z_][A-Za-z0-9_]*)$ ]]; then
      local -a split=()
      read -ra split <<<"$(lookup "${BASH_REMATCH[1]}")"
      argv+=("${split[@]}")
    else
      while [[ $w =~ \$\{([A-Za-z_][A-Za-z0-9_]*)\} ]]; do
        w=${w//"${BASH_REMATCH[0]}"/$(lookup "${BASH_REMATCH[1]}")}
      done
      argv+=("$w")
    fi
  done
  local -a as=()
  if [[ -n $unit_user ]]; then
    as=(setpriv --reuid "$unit_user" --regid "${unit_group:-$unit_user}" --init-groups)
  fi
  echo "$(date -u +%T) ${as[*]} ${argv[*]}" >>"$tmp/units.log"
  env -i "${envs[@]}" "${as[@]}" "${argv[@]}" >>"$log" 2>&1 &
  unit_pid=$!
  track "$unit_pid"
}

# wait_for SECONDS DESCRIPTION COMMAND...: until COMMAND succeeds.
wait_for() {
  local deadline=$((SECONDS + $1)) what=$2
  shift 2
  until "$@"; do
    ((SECONDS < deadline)) || fail "timed out waiting for $what"
    sleep 0.2
  done
}

as_user() { setpriv --reuid "$user" --regid "$user" --init-groups "$@"; }

job_state() { fjobs --all --json | jq -r --argjson id "$1" '.[] | select(.id == $id) | .state'; }
job_is() { [[ $(job_state "$1") == "$2" ]]; }
nodes_up() {
  [[ $(fnodes --json | jq '[.[] | select((.name == "pkgt1" or .name == "pkgt2") and .state != "DOWN")] | length') == 2 ]]
}
ready_from() { grep -q "^$1 READY=1" "$tmp/notify.log"; }

# start_aqsd: aqsd.service's ExecStart with a notification socket and a
# 1 s watchdog; returns once READY=1 arrived from aqsd's pid and checks
# that aqsd answers on its socket at that moment.
start_aqsd() {
  run_unit aqsd.service "" "$tmp/aqsd.log" NOTIFY_SOCKET="$tmp/notify.sock" WATCHDOG_USEC=1000000
  aqsd_pid=$unit_pid
  local deadline=$((SECONDS + 180))
  until ready_from "$aqsd_pid"; do
    kill -0 "$aqsd_pid" 2>/dev/null || fail "aqsd exited before READY=1"
    ((SECONDS < deadline)) || fail "no READY=1 from aqsd (pid $aqsd_pid)"
    sleep 0.1
  done
  fjobs --json >/dev/null || fail "aqsd reported READY=1 but does not answer on /var/lib/aqs/aqsd.sock"
  grep "^$aqsd_pid READY=1" "$tmp/notify.log" | grep -q "MAINPID=$aqsd_pid" || fail "READY=1 without MAINPID=$aqsd_pid"
}

start_agents() {
  for n in "${nodes[@]}"; do
    run_unit aqs-node@.service "$n" "$tmp/agent-$n.log"
    agent_pid[$n]=$unit_pid
  done
}
declare -A agent_pid

step "dpkg -i (version $v1)"
dpkg -i "$tmp"/v1/*.deb >"$tmp/dpkg.log" 2>&1 || fail "dpkg -i failed: $(tail -n 5 "$tmp/dpkg.log")"
for p in aqs-server aqs-node aqs-client aqs-slurm-names libaqs-runtime0 libaqs-runtime-dev aqs-faucetsd; do
  [[ $(dpkg-query -W -f='${Status} ${Version}' "$p") == "install ok installed $v1" ]] || fail "$p is not installed at $v1"
done

step "binaries from /usr/bin, no RUNPATH, libraries resolved"
for b in aqsd aqs-sim aqs-node aqs-rsh faucetsd fsub frun fkill fjobs fnodes fctl ftoken aqs-sbatch aqs-squeue sbatch squeue; do
  [[ $(command -v "$b") == /usr/bin/$b ]] || fail "$b resolves to '$(command -v "$b")', not /usr/bin/$b"
  ! readelf -d "$(readlink -f /usr/bin/$b)" | grep -q 'R.*PATH' || fail "$b has an RPATH/RUNPATH"
  ! ldd "/usr/bin/$b" | grep -q 'not found' || fail "$b: $(ldd "/usr/bin/$b" | grep 'not found')"
done
[[ $(readlink /usr/bin/sbatch) == aqs-sbatch ]] || fail "sbatch is not a link to aqs-sbatch"
[[ $(dpkg-deb -f "$(ls "$tmp"/v1/aqs-slurm-names_*.deb)" Conflicts) == *slurm-client* ]] || fail "aqs-slurm-names does not conflict with slurm-client"
aqsd --help >/dev/null || fail "aqsd --help failed"
pam=$(dpkg -L aqs-node | grep '/security/pam_aqs\.so$' || true)
[[ -n $pam && -f $pam ]] || fail "aqs-node does not install pam_aqs.so"
! ldd "$pam" | grep -q 'not found' || fail "pam_aqs.so: $(ldd "$pam" | grep 'not found')"

step "the aqs user, /var/lib/aqs, conffiles"
getent passwd aqs >/dev/null || fail "no aqs user"
(($(id -u aqs) < 1000)) || fail "aqs is not a system user (uid $(id -u aqs))"
[[ $(stat -c %U /var/lib/aqs) == aqs ]] || fail "/var/lib/aqs is not aqs's"
conffiles=$(dpkg-query -W -f='${Conffiles}' aqs-server)
[[ $conffiles == */etc/aqs/aqs.conf* && $conffiles == */etc/default/aqsd* ]] || fail "aqs-server's conffiles: $conffiles"
[[ $(dpkg-query -W -f='${Conffiles}' aqs-node) == */etc/default/aqs-node* ]] || fail "/etc/default/aqs-node is no conffile"

step "systemd-analyze verify"
mkdir -p "$tmp/units"
ln -s /lib/systemd/system/aqs-node@.service "$tmp/units/aqs-node@pkgt1.service"
systemd-analyze verify /lib/systemd/system/aqsd.service /lib/systemd/system/aqs-node.service \
  "$tmp/units/aqs-node@pkgt1.service" /lib/systemd/system/faucetsd.service >"$tmp/verify.log" 2>&1 ||
  fail "systemd-analyze verify: $(cat "$tmp/verify.log")"
# Messages about the units themselves (not about systemd's own units
# elsewhere on this machine) make it unclean.
if grep -E 'aqsd\.service|aqs-node|faucetsd\.service' "$tmp/verify.log"; then
  fail "systemd-analyze verify has remarks on the units"
fi

step "a throwaway user"
getent passwd "$user" >/dev/null || useradd -M -d "$tmp" -s /bin/bash "$user"
mkdir -p "$tmp/home"
chown "$user:" "$tmp/home"

step "libaqs-runtime-dev: mpicc with pkg-config, and find_package(aqs)"
cat >"$tmp/home/app.c" <<'APP'
#include <aqs/adaptive.h>
#include <stdio.h>
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  AQS_Init();
  MPI_Migrate();
  printf("adaptive=%d\n", AQS_Adaptive());
  AQS_Finalize();
  MPI_Finalize();
  return 0;
}
APP
cat >"$tmp/home/CMakeLists.txt" <<'APP'
cmake_minimum_required(VERSION 3.25)
project(app C)
find_package(aqs REQUIRED)
add_executable(app-cmake app.c)
target_link_libraries(app-cmake PRIVATE aqs::runtime)
APP
chown -R "$user:" "$tmp/home"
(cd "$tmp/home" && as_user bash -c 'mpicc app.c $(pkg-config --cflags --libs aqs-runtime) -o app-pc') >"$tmp/dev.log" 2>&1 ||
  fail "mpicc with pkg-config aqs-runtime failed"
shim=$(ldd "$tmp/home/app-pc" | awk '/libaqs_runtime\.so\.0/ {print $3}')
[[ -n $shim && $(dpkg -S "$(readlink -f "$shim")" 2>/dev/null) == libaqs-runtime0* ]] ||
  fail "app-pc does not use the packaged libaqs_runtime: $(ldd "$tmp/home/app-pc" | grep aqs)"
(cd "$tmp/home" && as_user cmake -S . -B build && as_user cmake --build build) >>"$tmp/dev.log" 2>&1 ||
  fail "find_package(aqs) build failed"
[[ $(cd "$tmp/home" && as_user env -i PATH="$PATH" HOME="$tmp/home" ./app-pc 2>>"$tmp/dev.log") == "adaptive=0" ]] ||
  fail "the app linked from the packages did not run as a plain MPI program"

step "aqsd and two agents as their units say"
# The site's configuration, as an administrator edits it.
echo "PartitionName=pkgtest Nodes=ALL Default=YES" >>/etc/aqs/aqs.conf
sed -i 's|^AQS_NODE_OPTIONS=.*|AQS_NODE_OPTIONS="--socket /var/lib/aqs/aqsd.sock --heartbeat 0.5"|' /etc/default/aqs-node
for n in "${nodes[@]}"; do
  echo 'AQS_NODE_OPTIONS_INSTANCE="--procs 2"' >"/etc/aqs/node-$n.env"
done
"$tmp/notify-listen" "$tmp/notify.sock" >"$tmp/notify.log" 2>&1 &
track $!
wait_for 10 "the notification socket" test -S "$tmp/notify.sock"
chmod 0666 "$tmp/notify.sock"
start_aqsd
[[ $(ps -o user= -p "$aqsd_pid") == aqs ]] || fail "aqsd runs as $(ps -o user= -p "$aqsd_pid"), not aqs"
sleep 3
pings=$(grep -c "^$aqsd_pid WATCHDOG=1$" "$tmp/notify.log" || true)
((pings >= 3)) || fail "$pings WATCHDOG=1 from aqsd in 3 s with WATCHDOG_USEC=1000000"
others=$(grep -v "^$aqsd_pid " "$tmp/notify.log" || true)
[[ -z $others ]] || fail "notifications from another process than aqsd: $others"
start_agents
wait_for 60 "both agents registered" nodes_up
[[ $(aqs-sinfo -h -o %P | tr -d ' ' | sort -u) == "pkgtest*" ]] ||
  fail "the partitions are not /etc/aqs/aqs.conf's: $(aqs-sinfo -h -o %P)"

step "a job on both agents"
mkdir -p "$tmp/home/out"
chown "$user:" "$tmp/home/out"
id1=$(cd "$tmp/home/out" && as_user fsub --parsable -n 4 -o "$tmp/home/out/%j.out" --wrap 'echo ran on $AQS_NODELIST with $AQS_NPROCS') ||
  fail "fsub failed"
wait_for 60 "job $id1 COMPLETED" job_is "$id1" COMPLETED
grep -Eq '^ran on (pkgt1.*pkgt2|pkgt2.*pkgt1).* with 4$' "$tmp/home/out/$id1.out" ||
  fail "job $id1's output: $(cat "$tmp/home/out/$id1.out")"

step "an adaptive MPI program built against the packages"
# 40 steps of half a second over a registered array, MPI_Migrate() first in
# each: whatever the resizes, the sum is n(n-1)/2 + 40n.
cat >"$tmp/home/grow.c" <<'APP'
#include <aqs/adaptive.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  AQS_Init();
  const uint64_t n = 10000;
  int step = 0;
  AQS_Array a;
  AQS_Array_create(n, sizeof(double), 0, &a);
  AQS_Register_replicated(&step, sizeof step);
  double* d;
  uint64_t b, e;
  AQS_Array_local(a, (void**)&d, &b, &e);
  for (uint64_t i = b; i < e; ++i) d[i - b] = (double)i;
  for (; step < 40; ++step) {
    MPI_Migrate();
    AQS_Array_local(a, (void**)&d, &b, &e);
    for (uint64_t i = b; i < e; ++i) d[i - b] += 1.0;
    usleep(500000);
  }
  MPI_Migrate();
  AQS_Array_local(a, (void**)&d, &b, &e);
  double local = 0, sum = 0;
  for (uint64_t i = b; i < e; ++i) local += d[i - b];
  MPI_Comm comm = AQS_Comm();
  MPI_Allreduce(&local, &sum, 1, MPI_DOUBLE, MPI_SUM, comm);
  int rank;
  MPI_Comm_rank(comm, &rank);
  if (rank == 0) printf("sum=%.0f maps=%lld\n", sum, (long long)AQS_Epoch());
  AQS_Finalize();
  MPI_Finalize();
  return 0;
}
APP
chown "$user:" "$tmp/home/grow.c"
(cd "$tmp/home" && as_user bash -c 'mpicc grow.c $(pkg-config --cflags --libs aqs-runtime) -o grow') >>"$tmp/dev.log" 2>&1 ||
  fail "mpicc grow.c failed: $(tail -n 5 "$tmp/dev.log")"
cat >"$tmp/home/grow.sh" <<GROW
#!/bin/bash
exec mpirun --oversubscribe --bind-to none -np \$AQS_NPROCS $tmp/home/grow
GROW
chmod 0755 "$tmp/home/grow.sh"

step "upgrade in place to $v2 with four jobs running, one of them adaptive"
ids=()
ids+=("$(cd "$tmp/home/out" && as_user fsub --parsable --adaptive --min 1 --max 2 -o "$tmp/home/out/%j.out" "$tmp/home/grow.sh")") ||
  fail "fsub of the adaptive job failed"
for w in 'echo started; sleep 20; echo survived' 'for i in $(seq 20); do echo $i; sleep 1; done' \
  'sleep 18; echo done'; do
  ids+=("$(cd "$tmp/home/out" && as_user fsub --parsable -n 1 -o "$tmp/home/out/%j.out" --wrap "$w")") || fail "fsub failed"
done
for id in "${ids[@]}"; do wait_for 90 "job $id RUNNING" job_is "$id" RUNNING; done
dpkg -i "$tmp"/v2/*.deb >>"$tmp/dpkg.log" 2>&1 || fail "dpkg -i of $v2 failed: $(tail -n 5 "$tmp/dpkg.log")"
[[ $(dpkg-query -W -f='${Version}' aqs-server) == "$v2" ]] || fail "aqs-server is not at $v2"
[[ $(grep -c pkgtest /etc/aqs/aqs.conf) == 1 ]] || fail "the upgrade did not keep the edited aqs.conf"
# What systemd does on the packages' restart after the upgrade: the agents
# get their units' KillSignal (SIGKILL, to the agent alone: KillMode=process)
# and start again at once (they adopt their jobs; an aqsd that is away
# fences nothing); aqsd gets SIGTERM and starts again.
for n in "${nodes[@]}"; do
  kill -KILL "${agent_pid[$n]}"
done
pgrep -u "$user" -f 'sleep 20' >/dev/null || fail "job ${ids[1]} did not survive its agent's SIGKILL"
pgrep -u "$user" -x grow >/dev/null || fail "the adaptive job ${ids[0]} did not survive its agent's SIGKILL"
start_agents
kill -TERM "$aqsd_pid"
wait_for 60 "aqsd to stop" bash -c "! kill -0 $aqsd_pid 2>/dev/null"
pgrep -u "$user" -f 'sleep 20' >/dev/null || fail "job ${ids[1]} did not survive aqsd's restart"
start_aqsd
wait_for 60 "both agents registered again" nodes_up
for id in "${ids[@]}"; do wait_for 120 "job $id COMPLETED after the upgrade" job_is "$id" COMPLETED; done
grep -q '^sum=50395000 ' "$tmp/home/out/${ids[0]}.out" ||
  fail "the adaptive job's result after the upgrade: $(cat "$tmp/home/out/${ids[0]}.out")"
[[ $(cat "$tmp/home/out/${ids[1]}.out") == $'started\nsurvived' ]] || fail "job ${ids[1]}'s output: $(cat "$tmp/home/out/${ids[1]}.out")"
[[ $(tail -n 1 "$tmp/home/out/${ids[2]}.out") == 20 && $(wc -l <"$tmp/home/out/${ids[2]}.out") == 20 ]] ||
  fail "job ${ids[2]}'s output: $(cat "$tmp/home/out/${ids[2]}.out")"
[[ $(cat "$tmp/home/out/${ids[3]}.out") == done ]] || fail "job ${ids[3]}'s output: $(cat "$tmp/home/out/${ids[3]}.out")"
echo "adaptive job across the upgrade: $(cat "$tmp/home/out/${ids[0]}.out")" >&2

step "a database from a newer AQS is refused"
pg_sock=$(ls /var/lib/aqs/postgres/.s.PGSQL.* | head -n1)
pg_port=${pg_sock##*.}
setpriv --reuid aqs --regid aqs --init-groups \
  psql -qAt "host=/var/lib/aqs/postgres port=$pg_port user=postgres dbname=aqs" \
  -c "INSERT INTO schema_version (version, name) VALUES (9999, 'from a newer AQS')" >/dev/null ||
  fail "cannot mark the database as newer"
kill -TERM "$aqsd_pid"
wait_for 60 "aqsd to stop" bash -c "! kill -0 $aqsd_pid 2>/dev/null"
: >"$tmp/refused.log"
run_unit aqsd.service "" "$tmp/refused.log"
refused_status=0
wait "$unit_pid" || refused_status=$?
((refused_status != 0)) || fail "aqsd started on a database newer than itself"
grep -q "^aqsd: database schema version 9999 is newer than this build's [0-9]*: upgrade AQS or use another database$" "$tmp/refused.log" ||
  fail "aqsd's refusal: $(cat "$tmp/refused.log")"
setpriv --reuid aqs --regid aqs --init-groups \
  psql -qAt "host=/var/lib/aqs/postgres port=$pg_port user=postgres dbname=aqs" \
  -c "DELETE FROM schema_version WHERE version = 9999" >/dev/null 2>&1 || true

step "faucetsd as its unit says"
fd=/etc/aqs/faucets  # the administrator's files, as /etc/default/faucetsd suggests
mkdir -p "$fd"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 \
  -keyout "$fd/server.key" -out "$fd/server.crt" >/dev/null 2>&1 || fail "openssl could not make a certificate"
od -An -N16 -tx1 /dev/urandom | tr -d ' \n' >"$fd/c1.key"
echo "c1 c1.key" >"$fd/clusters"
echo "alice c1 $user" >"$fd/users"
chown -R aqs-faucets: "$fd"
chmod 0600 "$fd/server.key" "$fd/c1.key"
sed -i "s|^FAUCETSD_OPTIONS=.*|FAUCETSD_OPTIONS=\"--cert $fd/server.crt --key $fd/server.key --clusters $fd/clusters --users $fd/users --listen 127.0.0.1:0\"|" \
  /etc/default/faucetsd
run_unit faucetsd.service "" "$tmp/faucetsd.log" NOTIFY_SOCKET="$tmp/notify.sock"
faucetsd_pid=$unit_pid
deadline=$((SECONDS + 180))
until ready_from "$faucetsd_pid"; do
  kill -0 "$faucetsd_pid" 2>/dev/null || fail "faucetsd exited before READY=1"
  ((SECONDS < deadline)) || fail "no READY=1 from faucetsd (pid $faucetsd_pid)"
  sleep 0.1
done
[[ $(ps -o user= -p "$faucetsd_pid") == aqs-faucets ]] || fail "faucetsd runs as $(ps -o user= -p "$faucetsd_pid")"
[[ -S /var/lib/aqs-faucets/faucetsd.sock && -s /var/lib/aqs-faucets/faucetsd.addr ]] ||
  fail "faucetsd reported READY=1 before its socket and address were there"
kill -TERM "$faucetsd_pid"
wait_for 60 "faucetsd to stop" bash -c "! kill -0 $faucetsd_pid 2>/dev/null"
grep -q "^$faucetsd_pid STOPPING=1" "$tmp/notify.log" || fail "no STOPPING=1 from faucetsd"
rm -rf "$fd"

step "dpkg --purge"
for n in "${nodes[@]}"; do
  kill -TERM "${agent_pid[$n]}" 2>/dev/null || true
done
for n in "${nodes[@]}"; do
  wait_for 60 "agent $n to stop" bash -c "! kill -0 ${agent_pid[$n]} 2>/dev/null"
done
# The private PostgreSQL goes with aqsd; none may be left for the purge.
wait_for 60 "the private PostgreSQL to stop" bash -c "! pgrep -u aqs >/dev/null && ! pgrep -u aqs-faucets >/dev/null"
dpkg-query -L "${packages[@]}" | sort -u >"$tmp/files.list"
rm -f /etc/aqs/node-pkgt*.env  # the administrator's own files, not the packages'
dpkg --purge "${packages[@]}" >>"$tmp/dpkg.log" 2>&1 || fail "dpkg --purge failed: $(tail -n 5 "$tmp/dpkg.log")"
while read -r f; do
  [[ -d $f ]] && continue  # directories (and /lib, a link to one) may be shared
  [[ -e $f || -L $f ]] && fail "$f is still there after the purge"
done <"$tmp/files.list"
for f in /etc/aqs /etc/default/aqsd /etc/default/aqs-node /etc/default/faucetsd /var/spool/aqs \
  /lib/systemd/system/aqsd.service /usr/bin/aqsd; do
  [[ ! -e $f ]] || fail "$f is still there after the purge"
done
[[ $(ls -A /var/lib/aqs) == postgres ]] || fail "/var/lib/aqs after the purge holds: $(ls -A /var/lib/aqs)"
[[ -f /var/lib/aqs/postgres/data/PG_VERSION ]] || fail "the job database did not survive the purge"
[[ $(ls -A /var/lib/aqs-faucets) == postgres ]] || fail "/var/lib/aqs-faucets after the purge holds: $(ls -A /var/lib/aqs-faucets)"
getent passwd aqs >/dev/null || fail "the aqs user (owner of the job database) was removed"
exit 0
