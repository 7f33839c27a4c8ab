#!/usr/bin/env bash
# Run the random campaigns of experiments/campaigns/ (the blog's worker with
# the takeover race widened, the naive acquire, a deliberately broken
# program under test) and shrink each one's first trial with two leaders
# (`run --shrink`): results/shrink/README.md gains a table of the recorded
# schedule's size → the shrunk one's, its reproduction rate on fresh seeds
# with its interval, the trials spent and the wall time; each shrink's own
# README.md, shrunk.yaml and steps.csv are under <campaign>/shrink/.
#
# Time scale 0.1 (the campaigns' 25–30 s trials take 2.5–3 s). The search:
# 4 runs per candidate, kept when 3 reproduce, at most 100 trials, then 20
# confirmation runs.
#
# Committed with each shrink's candidates/ (its README and steps.csv link
# every one), staged by scripts/stage-results.sh, which leaves out the
# trials/ directories (their logs) alone.
#
#   scripts/shrink.sh
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-results/shrink}
exec scripts/run-suite.sh experiments/campaigns/ "$out" --time-scale 0.1 --shrink \
    --violation double-leader --repeats 4 --need 3 --budget 100 --confirm 20 "$@"
