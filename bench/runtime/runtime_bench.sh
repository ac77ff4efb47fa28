#!/bin/sh
# runtime_bench: the cost of profiling a real program, against the unprofiled run of the same
# program measured in the same script (interleaved, so machine drift hits both alike).
#   CPU:    examples/cpu_hotspot with --profile (1000 Hz)   target <= 3% wall
#   memory: examples/alloc_builder with --profile-memory    target <= 30% wall
# Prints the median of RUNS runs of each, in seconds, and the ratio. Never asserts.
# usage: runtime_bench.sh JETT JETTPROFD SOURCE_ROOT [RUNS]
set -eu
JETT=$1
export JETTPROFD=$2
ROOT=$3
RUNS=${4:-7}

now_ns() { date +%s%N; }

# wall time of one run in nanoseconds; program output is discarded
one() {
    t0=$(now_ns)
    "$JETT" run "$@" >/dev/null 2>&1 || true
    t1=$(now_ns)
    echo $((t1 - t0))
}

median() { sort -n | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print int((v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

compare() {
    label=$1 prog=$2 flag=$3 target=$4
    base_f=$(mktemp) prof_f=$(mktemp)
    one "$prog" >/dev/null # warm the page cache and the daemon binary
    one "$prog" "$flag" >/dev/null
    i=0
    while [ $i -lt "$RUNS" ]; do
        one "$prog" >>"$base_f"
        one "$prog" "$flag" >>"$prof_f"
        i=$((i + 1))
    done
    b=$(median <"$base_f")
    p=$(median <"$prof_f")
    rm -f "$base_f" "$prof_f"
    awk -v l="$label" -v f="$flag" -v b="$b" -v p="$p" -v n="$RUNS" -v t="$target" 'BEGIN {
        printf "%s: unprofiled median %.3f s, %s median %.3f s over %d runs each: ratio %.4f (%+.2f%%, target <= %s%%)\n",
               l, b / 1e9, f, p / 1e9, n, p / b, (p / b - 1) * 100, t }'
}

# Wall time on a shared machine depends on its load: say what it was.
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg), cpus: $(nproc)"
compare "cpu_hotspot" "$ROOT/examples/cpu_hotspot/src/main.jett" --profile 3
compare "alloc_builder" "$ROOT/examples/alloc_builder/main.jett" --profile-memory 30
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
