#!/usr/bin/env bash
# Runs a YCSB workload against snowline: the load phase, then the run phase, each printing YCSB's report.
#
#   clients/ycsb/run.sh TARGETS WORKLOAD [extra YCSB arguments...]
#
# TARGETS   host:port[,host:port...] of snowline gRPC endpoints, or a cluster directory (the --dir of
#           `snowline cluster up`), whose cluster.toml's `grpc = "..."` entries are used.
# WORKLOAD  a file, or a name under clients/ycsb/workloads/ (workloada .. workloadf, closedeconomy).
# extra     passed to both phases, e.g. -p recordcount=10000 -p operationcount=100000 -threads 4
#           -p snowline.transactional=true. Set PHASES=load or PHASES=run to run one phase only.
#
# Each phase is exactly:
#   java -cp 'target/snowline-ycsb.jar:target/dependency/*' site.ycsb.Client -load|-t \
#        -db dev.snowline.ycsb.SnowlineClient -P WORKLOADFILE -p snowline.target=TARGETS -s [extra...]
# Build first: (cd clients/ycsb && mvn -q -B package -DskipTests).
set -euo pipefail

if [ $# -lt 2 ]; then
  sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
targets=$1
workload=$2
shift 2

if [ -d "$targets" ]; then
  toml="$targets/cluster.toml"
  [ -f "$toml" ] || { echo "run.sh: $targets has no cluster.toml" >&2; exit 2; }
  targets=$(sed -nE 's/^[[:space:]]*grpc[[:space:]]*=[[:space:]]*"([^"]+)".*/\1/p' "$toml" | paste -sd, -)
  [ -n "$targets" ] || { echo "run.sh: no grpc entries in $toml" >&2; exit 2; }
fi

wl=$workload
[ -f "$wl" ] || wl="$here/workloads/$workload"
[ -f "$wl" ] || { echo "run.sh: no workload file $workload (nor $wl)" >&2; exit 2; }

jar="$here/target/snowline-ycsb.jar"
[ -f "$jar" ] || { echo "run.sh: $jar is missing: build with (cd $here && mvn -q -B package -DskipTests)" >&2; exit 2; }
cp="$jar:$here/target/dependency/*"
java=${JAVA:-java}

echo "run.sh: targets $targets, workload $wl" >&2
for phase in ${PHASES:-load run}; do
  case $phase in
    load) flag=-load ;;
    run) flag=-t ;;
    *) echo "run.sh: unknown phase $phase" >&2; exit 2 ;;
  esac
  echo "=== $phase phase" >&2
  "$java" -cp "$cp" site.ycsb.Client "$flag" -db dev.snowline.ycsb.SnowlineClient -P "$wl" \
    -p snowline.target="$targets" -s "$@"
done
