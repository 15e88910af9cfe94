#!/usr/bin/env bash
# The test command (README, CI): build, then every CPU test. GPU tests are labelled `gpu` and
# are run on a GPU machine with `ctest --test-dir build -L gpu` (they skip, visibly, without one).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
ctest --test-dir build -L cpu --output-on-failure --timeout 1800
