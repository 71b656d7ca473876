#!/bin/bash
# Idle cost of a local cluster (docs/DURABILITY.md, "An idle cluster").
# usage: [DCS=N] scripts/idle-cost.sh BIN LABEL PROTOCOL...  (BIN: a snowline binary, e.g. target/debug/snowline)
# For each protocol, durable and in memory: start `cluster up --dcs ${DCS:-2} --partitions 2 --background`, let the
# periodic duties back off for 25 s, then print the bytes the four servers wrote and the CPU they used over 20 s.
BIN=$1; LABEL=$2; shift 2; DCS=${DCS:-2}
for proto in "$@"; do
  for mode in durable memory; do
    d=/tmp/idle-$LABEL-$proto-$mode; rm -rf $d
    extra=""; [ $mode = durable ] && extra="--data-dir $d/data"
    if ! out=$($BIN cluster up --protocol $proto --dcs $DCS --partitions 2 --dir $d $extra --background 2>&1); then
      # e.g. a protocol without a durable mode: say why and go on.
      echo "$LABEL $proto $mode not started: $(echo "$out" | tail -1)"
      continue
    fi
    sleep 25
    pids=$(awk '{print $2}' $d/pids | tr '\n' ' ')
    w0=0; c0=0; for p in $pids; do w0=$((w0+$(awk '/^write_bytes/{print $2}' /proc/$p/io))); c0=$((c0+$(awk '{print $14+$15}' /proc/$p/stat))); done
    sleep 20
    w1=0; c1=0; for p in $pids; do w1=$((w1+$(awk '/^write_bytes/{print $2}' /proc/$p/io))); c1=$((c1+$(awk '{print $14+$15}' /proc/$p/stat))); done
    echo "$LABEL $proto $mode disk $(( (w1-w0)/20480 )) KiB/s cpu $(awk -v t=$((c1-c0)) "BEGIN{printf \"%.1f\", t/20}")% of a core"
    $BIN cluster down --dir $d >/dev/null 2>&1
  done
done
