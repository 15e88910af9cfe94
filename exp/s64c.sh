#!/usr/bin/env bash
# Session 64, third call (`bash exp/pack.sh 590 exp/s64c.sh`): exp/s64b.sh on the register-held
# cross-entropy and two more DSKC_HEAD_GEMMS forms (the weight gradient over Vp rows, and also over
# the prediction count rounded up to 8), without the old binary's ncu run and the plain training run.
# (The forms vocab / rows / aligned existed only in session 64's working tree; the landed options are
# padded, the old rows form, and plain: bench/NOTES.md t5.)
S64_FORMS="vocab rows aligned" S64_OLD_NCU=0 S64_PLAIN_RUN=0 exec bash "$(dirname "$0")/s64b.sh"
