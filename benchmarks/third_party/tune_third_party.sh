#!/usr/bin/env bash
# Issue 29, part 8 and "done when", on the GPU machine: a kernel we did not write, tuned from a T1 file with no
# edit to its source, and the saxpy scaffold, each in a scratch project outside the checkout.
#
#   conv:  Kernel Tuner's examples/cuda/convolution.cu (saved, unedited, in external/kt_convolution/; not
#          committed: the device tool must carry external/), imported with
#          `tuner init conv --kernel ... --from-t1 benchmarks/third_party/convolution.t1.json`, then
#          `tuner tune conv --budget 40`, `tuner best conv`, `tuner export conv --format header`.
#   saxpy: `tuner init saxpy`, `tuner tune saxpy --budget 20`, `tuner best saxpy`.
#
# Usage (through the device tool, from the repository root, carrying external/):
#   bash benchmarks/third_party/tune_third_party.sh
# It sources device_env.sh itself unless PYTHONPATH already holds /tmp/site.
# Brings back, under $OUT:
#   third_party/{tune.json, best.json, conv.h, space.yaml, list.json, store.tar, *.log, kernel.sha256, times.txt}
#   saxpy/{tune.json, best.json, space.yaml, store.tar, *.log, times.txt}
#   status.txt (one line per step: name, exit status, seconds)
# Time: ~40 compiles of 0.5 to 15 s each (the 17x17 filter loops are fully unrolled over tiles up to 8x8) plus
# the measurements; the conv campaign is interrupted (SIGINT: its measured rows are flushed) after 330 s so that
# the whole run stays well inside the device tool's 10 minutes.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
case ":${PYTHONPATH:-}:" in
  *:/tmp/site:*) ;;
  *) env_sh=$(find benchmarks -name device_env.sh | head -n 1)
     [ -n "$env_sh" ] || { echo "device_env.sh not found under benchmarks/" >&2; exit 3; }
     . "$env_sh" ;;
esac

KERNEL="$repo/external/kt_convolution/convolution.cu"
KERNEL_SHA256=14b74948ac333fc1ec00c4476bff1a2ea5063c622afab5f85a45685b13582948  # upstream e5d1e0f4, 5150 bytes
T1="$repo/benchmarks/third_party/convolution.t1.json"
out=${OUT:-/tmp/third_party_out}
mkdir -p "$out/third_party" "$out/saxpy"
: > "$out/status.txt"
failed=0

# step NAME DIR COMMAND...: run COMMAND, log its exit status and seconds to status.txt and DIR/times.txt
step() {
  local name=$1 dir=$2; shift 2
  local t0=$SECONDS rc
  "$@"; rc=$?
  printf '%-22s rc=%-3s %4ss\n' "$name" "$rc" "$((SECONDS - t0))" | tee -a "$out/status.txt" >> "$dir/times.txt"
  [ "$rc" -eq 0 ] || failed=1
  return "$rc"
}
tuner() { python3 -m tuner "$@"; }

# ---- the third-party kernel --------------------------------------------------------------------------------
d="$out/third_party"
if [ ! -f "$KERNEL" ]; then
  echo "missing $KERNEL: carry external/ to the device (see docs/examples/third-party-kernel.md)" | tee -a "$out/status.txt"
  exit 2
fi
sha256sum "$KERNEL" | tee "$d/kernel.sha256"
[ "$(sha256sum < "$KERNEL" | cut -d' ' -f1)" = "$KERNEL_SHA256" ] \
  || { echo "kernel source differs from the upstream file (sha256)" | tee -a "$out/status.txt"; failed=1; }

conv_proj=$(mktemp -d /tmp/conv-project.XXXX)
(
  cd "$conv_proj" || exit 1
  step init-conv "$d" tuner init conv --kernel "$KERNEL" --from-t1 "$T1" > "$d/init.log" 2>&1 || exit 1
  # the import copied the kernel; it must be the same bytes
  cmp workloads/conv/convolution.cu "$KERNEL" && echo "imported kernel identical to upstream" >> "$d/kernel.sha256"
  cp workloads/conv/space.yaml "$d/space.yaml"
  tuner list --json > "$d/list.json" 2> "$d/list.log"
  step tune-conv "$d" timeout -s INT -k 30 330 \
    python3 -m tuner tune conv --budget 40 --quiet --json > "$d/tune.json" 2> "$d/tune.log"
  step best-conv "$d" tuner best conv --json > "$d/best.json" 2> "$d/best.log"
  step export-conv "$d" tuner export conv --format header > "$d/conv.h" 2> "$d/export.log"
  [ -d results ] && tar cf "$d/store.tar" results
  exit 0
) || failed=1

# ---- the saxpy scaffold -------------------------------------------------------------------------------------
d="$out/saxpy"
saxpy_proj=$(mktemp -d /tmp/saxpy-project.XXXX)
(
  cd "$saxpy_proj" || exit 1
  step init-saxpy "$d" tuner init saxpy > "$d/init.log" 2>&1 || exit 1
  cp workloads/saxpy/space.yaml "$d/space.yaml"
  step tune-saxpy "$d" timeout -s INT -k 30 150 \
    python3 -m tuner tune saxpy --budget 20 --quiet --json > "$d/tune.json" 2> "$d/tune.log"
  step best-saxpy "$d" tuner best saxpy --json > "$d/best.json" 2> "$d/best.log"
  [ -d results ] && tar cf "$d/store.tar" results
  exit 0
) || failed=1

cat "$out/status.txt"
grep -q 'rc=[1-9]' "$out/status.txt" && failed=1
exit "$failed"
