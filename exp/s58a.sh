#!/usr/bin/env bash
# Session 58 (`bash exp/pack.sh 560 exp/s58a.sh`): exp/s57b.sh (burst layer matrix, 3 rounds, then the
# side-by-side table, 3 interleaved rounds) on the landed HEAD, but only on an H200: the targets are the
# H200's and session 57 ran both of these on H100s, so on any other card it stops before the build.
. "$(dirname "$0")/common.sh"
only_on_h200
exec bash "$(dirname "$0")/s57b.sh"
