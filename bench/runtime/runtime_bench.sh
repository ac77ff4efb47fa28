#!/bin/sh
# runtime_bench: the cost of profiling a real program, against the unprofiled run of the same
# program measured in the same script (interleaved, so machine drift hits both alike).
#   CPU:    examples/cpu_hotspot with --profile (1000 Hz)   target <= 3% wall
#   memory: examples/alloc_builder with --profile-memory    target <= 30% wall
#   actors: examples/pipeline on --workers 2, in both modes (the same targets)
# Prints medians of RUNS runs of each: wall seconds (the target's unit) and, where
# /usr/bin/time exists, CPU seconds (user + system of jett and its private jettprofd), which a
# loaded shared machine disturbs less. Never asserts.
# usage: runtime_bench.sh JETT JETTPROFD SOURCE_ROOT [RUNS]
set -eu
JETT=$1
export JETTPROFD=$2
ROOT=$3
RUNS=${4:-7}
TIMEBIN=/usr/bin/time
[ -x "$TIMEBIN" ] || TIMEBIN=

now_ns() { date +%s%N; }

# one run: "wall_ns cpu_ms" (cpu_ms is 0 without /usr/bin/time); program output discarded
one() {
    tf=$(mktemp)
    t0=$(now_ns)
    if [ -n "$TIMEBIN" ]; then
        "$TIMEBIN" -o "$tf" -f "%U %S" "$JETT" run "$@" >/dev/null 2>&1 || true
    else
        "$JETT" run "$@" >/dev/null 2>&1 || true
    fi
    t1=$(now_ns)
    cpu=0
    [ -s "$tf" ] && cpu=$(tail -n 1 "$tf" | awk '{ printf "%d", ($1 + $2) * 1000 }')
    rm -f "$tf"
    echo "$((t1 - t0)) $cpu"
}

median() { sort -n | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print int((v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

# compare LABEL PROGRAM FLAG TARGET [OPTION...]: the OPTIONs go to both runs
compare() {
    label=$1 prog=$2 flag=$3 target=$4
    shift 4
    base_f=$(mktemp) prof_f=$(mktemp)
    one "$prog" "$@" >/dev/null # warm the page cache and the daemon binary
    one "$prog" "$flag" "$@" >/dev/null
    i=0
    while [ $i -lt "$RUNS" ]; do
        # alternate which goes first, so neither always meets the same neighbour load
        if [ $((i % 2)) -eq 0 ]; then
            one "$prog" "$@" >>"$base_f"
            one "$prog" "$flag" "$@" >>"$prof_f"
        else
            one "$prog" "$flag" "$@" >>"$prof_f"
            one "$prog" "$@" >>"$base_f"
        fi
        i=$((i + 1))
    done
    bw=$(cut -d' ' -f1 "$base_f" | median) pw=$(cut -d' ' -f1 "$prof_f" | median)
    bc=$(cut -d' ' -f2 "$base_f" | median) pc=$(cut -d' ' -f2 "$prof_f" | median)
    rm -f "$base_f" "$prof_f"
    awk -v l="$label" -v f="$flag" -v b="$bw" -v p="$pw" -v n="$RUNS" -v t="$target" 'BEGIN {
        printf "%s wall: unprofiled median %.3f s, %s median %.3f s over %d runs each: ratio %.4f (%+.2f%%, target <= %s%%)\n",
               l, b / 1e9, f, p / 1e9, n, p / b, (p / b - 1) * 100, t }'
    if [ "$bc" -gt 0 ]; then
        awk -v l="$label" -v f="$flag" -v b="$bc" -v p="$pc" 'BEGIN {
            printf "%s cpu:  unprofiled median %.3f s, %s median %.3f s (jett + jettprofd): ratio %.4f (%+.2f%%)\n",
                   l, b / 1e3, f, p / 1e3, p / b, (p / b - 1) * 100 }'
    fi
}

# Wall time on a shared machine depends on its load: say what it was.
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg), cpus: $(nproc)"
compare "cpu_hotspot" "$ROOT/examples/cpu_hotspot/src/main.jett" --profile 3
compare "alloc_builder" "$ROOT/examples/alloc_builder/main.jett" --profile-memory 30
compare "pipeline_cpu" "$ROOT/examples/pipeline/main.jett" --profile 3 --workers 2
compare "pipeline_mem" "$ROOT/examples/pipeline/main.jett" --profile-memory 30 --workers 2
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
