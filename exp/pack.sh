#!/usr/bin/env bash
# Runs one session script with $OUT pointed at a work folder and packs that folder into $OUT/logs.tgz
# (the device tool brings back at most 8 files): bash exp/pack.sh LIMIT exp/sNN.sh [ARGS...]
REAL=$OUT; export OUT=/tmp/dskc_out; mkdir -p $OUT
L=$1 S=$2; shift 2
timeout "$L" bash "$S" "$@"; echo "script rc=$?"
tar czf "$REAL/logs.tgz" -C /tmp dskc_out
