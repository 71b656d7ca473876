#!/usr/bin/env bash
# End-to-end: start a local snowline cluster (1 datacenter, 2 partitions), run YCSB workloads A-F and the
# closed economy against it through run.sh, print each phase's throughput and the closed-economy totals, and stop
# the cluster.
#
#   clients/ycsb/e2e.sh PROTOCOL TRANSACTIONAL [extra YCSB arguments...]
#
# TRANSACTIONAL is true or false (snowline.transactional). Environment: SNOWLINE (the snowline binary, default
# `snowline` on PATH), CLUSTER_FLAGS (more `cluster up` flags, e.g. "--replicas 3 --placement site" for nmsi),
# WORKLOADS (default "workloada workloadb workloadc workloadd workloade workloadf closedeconomy"), OUT (where
# the full YCSB outputs go, default a new temporary directory). Extra arguments go to every phase, e.g.
# -threads 4 -p operationcount=5000.
set -euo pipefail
if [ $# -lt 2 ]; then
  sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
protocol=$1
tx=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
snowline=${SNOWLINE:-snowline}
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
dir=$(mktemp -d)
rmdir "$dir"
# shellcheck disable=SC2086
"$snowline" cluster up --protocol "$protocol" --dcs 1 --partitions 2 ${CLUSTER_FLAGS:-} --dir "$dir" --background \
  > "$out/cluster-up.txt" 2>&1 || { cat "$out/cluster-up.txt" >&2; exit 1; }
trap '"$snowline" cluster down --dir "$dir" >/dev/null 2>&1 || true' EXIT

for w in ${WORKLOADS:-workloada workloadb workloadc workloadd workloade workloadf closedeconomy}; do
  f="$out/$protocol-$tx-$w"
  rc=0
  "$here/run.sh" "$dir" "$w" -p snowline.transactional="$tx" "$@" > "$f.out" 2> "$f.err" || rc=$?
  echo "== $protocol snowline.transactional=$tx $w (exit $rc; $f.out)"
  grep -E '^\[OVERALL\], Throughput|Return=|^\[closedeconomy\]|^\[TX-ABORTED\], Operations' "$f.out" | sed 's/^/   /'
  grep -hE '^\[snowline\] (first|SERVER DEFECT|protocol .* OFFERS|scan|transactions committed)' "$f.err" | sort -u | sed 's/^/   /' || true
done
