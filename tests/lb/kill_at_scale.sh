#!/usr/bin/env bash
# lb_test's kill test (three replicas behind nginx, the busiest SIGKILLed a third
# of the way through the load) at a larger scale than the suite's 300 streams at
# concurrency 30, which keep it well under a minute in CI:
#
#   bash tests/lb/kill_at_scale.sh [STREAMS] [CONCURRENCY] [OUTPUT_LEN]
#
# (defaults 2000, 90, 256). The assertions are the same; prints the figures
# line: streams, failed, routed to the killed replica, on the survivors.
set -euo pipefail
cd "$(dirname "$0")/../.."
streams="${1:-2000}"
concurrency="${2:-90}"
output_len="${3:-256}"
flags=()
[[ -x /usr/local/cuda/bin/nvcc ]] || flags=(--define=cuda=off)  # as deploy/test.sh
status=0
bazel test "${flags[@]}" //tests/lb:lb_test \
  --test_filter=LbTest.KillingAReplicaMidLoadFailsOnlyTheStreamsOnIt \
  --nocache_test_results --test_output=errors \
  --test_env=SEQBOAT_LB_KILL_STREAMS="$streams" \
  --test_env=SEQBOAT_LB_KILL_CONCURRENCY="$concurrency" \
  --test_env=SEQBOAT_LB_KILL_OUTPUT_LEN="$output_len" || status=$?
grep '^lb kill:' bazel-testlogs/tests/lb/lb_test/test.log || true
exit "$status"
