#!/bin/sh
# runtime_bench: the cost of profiling a real program, against the unprofiled run of the same
# program measured in the same script (interleaved, so machine drift hits both alike).
#   CPU:    examples/cpu_hotspot with --profile (1000 Hz)   target <= 3% wall
#   memory: examples/alloc_builder with --profile-memory    target <= 30% wall
#   actors: examples/pipeline on --workers 2, in both modes (the same targets), and in memory
#           mode on --workers 16 (a ring a worker: the peak resident set added, goal <= 40 MiB)
#   backends: cpu_hotspot, alloc_builder and bench/runtime/calls.jett (call-heavy) on the
#           tree walker and the bytecode VM, unprofiled (goal: the VM 4x as fast), and the
#           VM's own profiled / unprofiled ratios with the interpreter's goals
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

# one run: "wall_ns cpu_ms rss_kib" (cpu_ms and rss_kib are 0 without /usr/bin/time); program
# output discarded
one() {
    tf=$(mktemp)
    t0=$(now_ns)
    if [ -n "$TIMEBIN" ]; then
        "$TIMEBIN" -o "$tf" -f "%U %S %M" "$JETT" run "$@" >/dev/null 2>&1 || true
    else
        "$JETT" run "$@" >/dev/null 2>&1 || true
    fi
    t1=$(now_ns)
    cpu=0 rss=0
    [ -s "$tf" ] && cpu=$(tail -n 1 "$tf" | awk '{ printf "%d", ($1 + $2) * 1000 }') &&
        rss=$(tail -n 1 "$tf" | awk '{ print $3 + 0 }')
    rm -f "$tf"
    echo "$((t1 - t0)) $cpu $rss"
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
    br=$(cut -d' ' -f3 "$base_f" | median) pr=$(cut -d' ' -f3 "$prof_f" | median)
    rm -f "$base_f" "$prof_f"
    awk -v l="$label" -v f="$flag" -v b="$bw" -v p="$pw" -v n="$RUNS" -v t="$target" 'BEGIN {
        printf "%s wall: unprofiled median %.3f s, %s median %.3f s over %d runs each: ratio %.4f (%+.2f%%, target <= %s%%)\n",
               l, b / 1e9, f, p / 1e9, n, p / b, (p / b - 1) * 100, t }'
    if [ "$bc" -gt 0 ]; then
        awk -v l="$label" -v f="$flag" -v b="$bc" -v p="$pc" 'BEGIN {
            printf "%s cpu:  unprofiled median %.3f s, %s median %.3f s (jett + jettprofd): ratio %.4f (%+.2f%%)\n",
                   l, b / 1e3, f, p / 1e3, p / b, (p / b - 1) * 100 }'
    fi
    if [ "$br" -gt 0 ]; then
        # GNU time's %M: the largest resident set of jett and of the children it waited for
        awk -v l="$label" -v f="$flag" -v b="$br" -v p="$pr" 'BEGIN {
            printf "%s rss:  unprofiled median %d KiB, %s median %d KiB (peak): added %.2f MiB\n",
                   l, b, f, p, (p - b) / 1024 }'
    fi
}

# speed LABEL PROGRAM: the same program unprofiled on --backend interp and --backend vm,
# interleaved; the speed-up is interp / vm (wall, and CPU where /usr/bin/time exists).
speed() {
    label=$1 prog=$2
    i_f=$(mktemp) v_f=$(mktemp)
    one "$prog" --backend interp >/dev/null
    one "$prog" --backend vm >/dev/null
    i=0
    while [ $i -lt "$RUNS" ]; do
        if [ $((i % 2)) -eq 0 ]; then
            one "$prog" --backend interp >>"$i_f"
            one "$prog" --backend vm >>"$v_f"
        else
            one "$prog" --backend vm >>"$v_f"
            one "$prog" --backend interp >>"$i_f"
        fi
        i=$((i + 1))
    done
    iw=$(cut -d' ' -f1 "$i_f" | median) vw=$(cut -d' ' -f1 "$v_f" | median)
    ic=$(cut -d' ' -f2 "$i_f" | median) vc=$(cut -d' ' -f2 "$v_f" | median)
    rm -f "$i_f" "$v_f"
    awk -v l="$label" -v i="$iw" -v v="$vw" -v n="$RUNS" 'BEGIN {
        printf "%s backends wall: interp median %.3f s, vm median %.3f s over %d runs each: speed-up %.2f (goal >= 4)\n",
               l, i / 1e9, v / 1e9, n, i / v }'
    if [ "$vc" -gt 0 ]; then
        awk -v l="$label" -v i="$ic" -v v="$vc" 'BEGIN {
            printf "%s backends cpu:  interp median %.3f s, vm median %.3f s: speed-up %.2f\n",
                   l, i / 1e3, v / 1e3, i / v }'
    fi
}

# Wall time on a shared machine depends on its load: say what it was.
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg), cpus: $(nproc)"
# the interpreter's rows as before the VM became jett's default
compare "cpu_hotspot" "$ROOT/examples/cpu_hotspot/src/main.jett" --profile 3 --backend interp
compare "alloc_builder" "$ROOT/examples/alloc_builder/main.jett" --profile-memory 30 --backend interp
compare "pipeline_cpu" "$ROOT/examples/pipeline/main.jett" --profile 3 --workers 2 --backend interp
compare "pipeline_mem" "$ROOT/examples/pipeline/main.jett" --profile-memory 30 --workers 2 \
    --backend interp
speed "cpu_hotspot" "$ROOT/examples/cpu_hotspot/src/main.jett"
speed "alloc_builder" "$ROOT/examples/alloc_builder/main.jett"
speed "calls" "$ROOT/bench/runtime/calls.jett"
compare "vm_cpu_hotspot" "$ROOT/examples/cpu_hotspot/src/main.jett" --profile 2 --backend vm
compare "vm_calls" "$ROOT/bench/runtime/calls.jett" --profile 2 --backend vm
compare "vm_alloc_builder" "$ROOT/examples/alloc_builder/main.jett" --profile-memory 30 --backend vm
compare "pipeline16_mem" "$ROOT/examples/pipeline/main.jett" --profile-memory 20 --workers 16
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
