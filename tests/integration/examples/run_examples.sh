#!/usr/bin/env bash
# The example apps under plain mpirun, without AQS (MPI_Migrate() only
# returns): their results must not depend on the number of ranks.
#
#   run_examples.sh jacobi2d MPIEXEC JACOBI2D WORKDIR
#   run_examples.sh md       MPIEXEC MD       WORKDIR
# The runs' outputs go to a fresh folder under WORKDIR, removed if every check
# passes and kept otherwise.
set -euo pipefail

if [[ $# -ne 4 ]]; then
  echo "usage: $0 jacobi2d|md MPIEXEC BINARY WORKDIR" >&2
  exit 2
fi
what=$1 mpiexec=$2 bin=$3 work=$4
mkdir -p "$work"
work=$(mktemp -d "$work/run.XXXXXX")
cd "$work"

failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

# run NP LOG ARGS...: the app on NP ranks; its stdout in LOG.out, stderr in
# LOG.err; returns the app's exit status.
run() {
  local np=$1 log=$2
  shift 2
  local rc=0
  "$mpiexec" --oversubscribe --bind-to none -np "$np" "$bin" "$@" >"$log.out" 2>"$log.err" || rc=$?
  echo "== $(basename "$bin") -np $np $* -> exit $rc"
  sed 's/^/   /' "$log.out"
  return $rc
}

checksum_of() { sed -n 's/^checksum \([0-9a-f]\{16\}\)$/\1/p' "$1.out"; }

# expect_same BASE LOG...: each run's checksum and --out file equal BASE's.
expect_same() {
  local base=$1 sum
  shift
  sum=$(checksum_of "$base")
  [[ -n $sum ]] || fail "$base printed no checksum"
  for log in "$@"; do
    [[ $(checksum_of "$log") == "$sum" ]] || fail "$log: checksum $(checksum_of "$log") differs from $base's $sum"
    cmp "$base.bin" "$log.bin" || fail "$log.bin differs from $base.bin"
  done
}

# expect_bad_option LOG ARGS...: exits non-zero with one line of its own on
# stderr (mpirun may add its own lines).
expect_bad_option() {
  local log=$1 name
  shift
  name=$what
  if run 2 "$log" "$@"; then
    fail "$name $* succeeded"
  fi
  local lines
  lines=$(grep -c "^$name: " "$log.err" || true)
  [[ $lines == 1 ]] || fail "$name $*: $lines error lines of its own, not 1"
  grep "^$name: " "$log.err" | sed 's/^/   stderr: /'
}

case $what in
jacobi2d)
  grid=(--rows 157 --cols 131 --iters 200)
  run 1 j1 "${grid[@]}" --checksum --out j1.bin || fail "1 rank"
  run 3 j3 "${grid[@]}" --checksum --out j3.bin || fail "3 ranks"
  run 4 j4 "${grid[@]}" --checksum --out j4.bin --migrate-every 7 || fail "4 ranks"
  # --work-ms only paces the ranks (bench_policy_mix): the same result.
  run 3 w3 "${grid[@]}" --checksum --out w3.bin --work-ms 10 || fail "3 ranks, --work-ms"
  expect_same j1 j3 j4 w3
  [[ $(stat -c %s j1.bin) == $((157 * 131 * 8)) ]] || fail "j1.bin is not 157*131 doubles"
  # More ranks than rows: the empty ranks come last.
  run 1 s1 --rows 4 --cols 9 --iters 30 --checksum --out s1.bin || fail "small grid, 1 rank"
  run 6 s6 --rows 4 --cols 9 --iters 30 --checksum --out s6.bin || fail "small grid, 6 ranks"
  expect_same s1 s6
  expect_bad_option bad1 --rows 2
  expect_bad_option bad2 --iters
  expect_bad_option bad3 --frobnicate
  expect_bad_option bad4 --work-ms -1

  # Issue 30: grown while it runs (scripted maps, no aqsd: 4 -> 8 at the
  # 3rd MPI_Migrate()), the result is bit-identical to one rank's. The app
  # asks for MPI_THREAD_MULTIPLE, so the new ranks are prepared in the
  # background and the old ranks stop only to switch; with
  # AQS_BACKGROUND_SPAWN=0 they are spawned inside MPI_Migrate().
  long=(--rows 157 --cols 131 --iters 600)
  grow=(4 8)
  run 1 g1 "${long[@]}" --checksum --out g1.bin || fail "600 iterations, 1 rank"
  AQS_TEST_MAPS=3:11111111 run "${grow[0]}" gbg "${long[@]}" --pace-ms 20 --checksum --out gbg.bin ||
    fail "grown in the background"
  AQS_TEST_MAPS=3:11111111 AQS_BACKGROUND_SPAWN=0 run "${grow[0]}" gblk "${long[@]}" --pace-ms 20 --checksum \
    --out gblk.bin || fail "grown inside MPI_Migrate"
  for log in gbg gblk; do
    grep -q "^done .* ranks ${grow[1]} " "$log.out" || fail "$log did not end on ${grow[1]} ranks"
  done
  # New ranks that stall before they wire up: the background expand is
  # given up after AQS_EXPAND_TIMEOUT and the job ends on its 4 ranks. (On
  # a loaded machine the spawn itself may outlast the bound: the other
  # reason, equally an undone expand.)
  AQS_TEST_MAPS=3:11111111 AQS_TEST_JOIN_STALL_S=10 AQS_EXPAND_TIMEOUT=4 run "${grow[0]}" gstall "${long[@]}" \
    --pace-ms 20 --checksum --out gstall.bin || fail "stalled new ranks"
  grep -q "^done .* ranks ${grow[0]} " gstall.out || fail "gstall did not end on ${grow[0]} ranks"
  grep -Eq "cannot apply map 1: (new ranks did not reach MPI_Migrate|MPI_Comm_spawn did not return) within 4 s" \
    gstall.err || fail "gstall: no abandon line on stderr"
  grep "cannot apply map" gstall.err | sed 's/^/   undone: /'
  # A spawn that never returns: the first new rank stops itself (SIGSTOP)
  # before MPI_Init. The job goes on on its 4 ranks, gives the expand up
  # after AQS_EXPAND_TIMEOUT, and once the stopped rank is continued its
  # ranks hear "abandon" and leave, so that mpirun ends.
  AQS_TEST_MAPS=3:11111111 AQS_TEST_STOP_SPAWNED="$work/stopped.pid" AQS_EXPAND_TIMEOUT=1 \
    run "${grow[0]}" gstop "${long[@]}" --pace-ms 20 --checksum --out gstop.bin &
  stop_run=$!
  for _ in $(seq 600); do
    grep -q "MPI_Comm_spawn did not return within 1 s" gstop.err 2>/dev/null && break
    sleep 0.1
  done
  grep -q "MPI_Comm_spawn did not return within 1 s" gstop.err || fail "gstop: the spawn was not given up"
  if [[ -s stopped.pid ]]; then
    kill -CONT "$(cat stopped.pid)" || fail "gstop: the stopped rank is gone"
  else
    fail "gstop: no rank stopped itself"
  fi
  wait "$stop_run" || fail "gstop: the job failed"
  grep -q "^done .* ranks ${grow[0]} " gstop.out || fail "gstop did not end on ${grow[0]} ranks"
  expect_same g1 gbg gblk gstall gstop
  ;;
md)
  # 0.25 MiB per rank at 8 ranks: 65536 particles whatever the rank count.
  size=(--mb-per-rank 0.25 --steps 400)
  run 1 m1 "${size[@]}" --checksum --out m1.bin || fail "1 rank"
  run 4 m4 "${size[@]}" --checksum --out m4.bin || fail "4 ranks (energy tolerance)"
  run 3 m3 "${size[@]}" --checksum --out m3.bin --migrate-every 5 || fail "3 ranks"
  expect_same m1 m4 m3
  grep -q '^particles 65536 ' m4.out || fail "--mb-per-rank 0.25 did not give 65536 particles"
  for log in m1 m3 m4; do
    for key in energy_initial energy_final relative_drift; do
      grep -q "^$key " "$log.out" || fail "$log printed no $key"
    done
  done
  [[ $(stat -c %s m1.bin) == $((65536 * 8)) ]] || fail "m1.bin is not 65536 doubles"
  # More ranks than particles.
  run 1 s1 --particles 3 --steps 100 --checksum --out s1.bin || fail "3 particles, 1 rank"
  run 5 s5 --particles 3 --steps 100 --checksum --out s5.bin || fail "3 particles, 5 ranks"
  expect_same s1 s5
  # A drift over the tolerance fails the run.
  if run 2 tight --particles 1000 --steps 100 --tolerance 1e-30; then
    fail "a drift over --tolerance 1e-30 passed"
  fi
  grep -q '^md: relative energy drift .* exceeds the tolerance' tight.err || fail "no drift error line"
  expect_bad_option bad1 --particles 0
  expect_bad_option bad2 --particles 10 --mb-per-rank 1
  expect_bad_option bad3 --dt -1
  ;;
*)
  echo "$0: unknown example '$what'" >&2
  exit 2
  ;;
esac

if ((failures > 0)); then
  echo "$failures failure(s); the runs' outputs are in $work" >&2
  exit 1
fi
cd /
rm -rf "$work"
echo "all checks passed"
