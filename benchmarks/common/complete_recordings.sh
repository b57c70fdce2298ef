#!/usr/bin/env bash
# Complete (brute-force) recordings for the strategy comparisons, made on the GPU of this machine: each space
# given as "workload size dtype" is measured whole by `tuner tune --strategy brute_force` into the store
# ($TUNER_RESULTS, else results/store), every config verified against the reference as in any campaign.
#
#   bash benchmarks/common/complete_recordings.sh "reduction n=33554432 float32" "gemm 1536x1536x1536 float32"
#
# A space already recorded on another GPU at the same size makes `tuner tune --simulate` and the comparisons
# choose between the two (tuner.store.recording_choice.choose_recording): give sizes no other GPU has.
set -u
status=0
for spec in "$@"; do
    read -r workload size dtype <<<"$spec"
    echo "== $workload $size $dtype: $(date -u +%FT%TZ)"
    if ! python3 -m tuner tune "$workload" --size "$size" --dtype "$dtype" --strategy brute_force --quiet; then
        echo "FAILED: $spec"
        status=1
    fi
done
echo "== done: $(date -u +%FT%TZ)"
exit $status
