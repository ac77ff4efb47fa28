#!/usr/bin/env bash
# The whole test suite: a warnings-as-errors build and every suite, then the suite again under
# AddressSanitizer + UndefinedBehaviorSanitizer, then the ring, agent and concurrency suites
# under ThreadSanitizer, then the libFuzzer harnesses for a bounded time each (clang). Exits
# non-zero on any failure; ends with one "N passed, N failed" line.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh || exit 1

jobs=$(nproc 2>/dev/null || echo 2)
status=0
results=()

# What every build below is checked for, as a fresh `meson setup --werror` makes it; each
# build's own options (-Dkey=value) override these. An existing build directory is reused only
# with these values (and the compiler, $CC when set); otherwise it is reconfigured, or, for
# another compiler, refused.
checked_options=(werror=true tests=true buildtype=debugoptimized b_sanitize=none b_lundef=true
                 fuzz=false)

# Prints "key: has X, needs Y" for each checked option of build dir $1 that differs from the
# key=value arguments after it (the last one for a key counts), and "compiler: ..." when $CC
# names another compiler than the one the directory was configured with. Fails when the
# directory cannot be read.
configured_differently() {
    local dir=$1; shift
    meson introspect "$dir" --buildoptions --targets 2>/dev/null |
        JP_WANT_CC="${CC:-}" python3 scripts/configured_differently.py "$@"
}

run_build() { # name, meson options...
    local dir=$1; shift
    local want=("${checked_options[@]}") a
    for a in "$@"; do want+=("${a#-D}"); done # a build's own value comes last and wins
    if [ -f "$dir/build.ninja" ]; then
        local differ
        differ=$(configured_differently "$dir" "${want[@]}") ||
            { echo "test: cannot read how $dir is configured"; return 1; }
        if [[ $differ == *compiler:* ]]; then
            echo "$differ"
            echo "test: $dir was configured with another compiler: remove it, or build elsewhere"
            return 1
        fi
        if [ -n "$differ" ]; then
            echo "$differ"
            echo "test: $dir was configured differently: reconfiguring it"
            local opts=() # every checked option, so a value set earlier by hand goes too
            for a in "${want[@]}"; do opts+=("-D$a"); done # meson too takes a key's last value
            meson setup --reconfigure "$dir" "${opts[@]}" >"$dir.setup.log" 2>&1 ||
                { cat "$dir.setup.log"; echo "test: reconfiguring $dir failed"; return 1; }
        fi
    else
        meson setup "$dir" --werror "$@" >"$dir.setup.log" 2>&1 ||
            { cat "$dir.setup.log"; echo "test: configuring $dir failed"; return 1; }
    fi
    ninja -C "$dir" -j "$jobs" >"$dir.build.log" 2>&1 ||
        { tail -n 60 "$dir.build.log"; echo "test: building $dir failed"; return 1; }
}

run_tests() { # build dir, extra meson test args...
    local dir=$1; shift
    local log="$dir/meson-logs/testlog.json"
    rm -f "$log" # an earlier run's log must not stand for this one
    meson test -C "$dir" --print-errorlogs --num-processes "$jobs" "$@"
    local rc=$?
    results+=("$log")
    local ran=0
    [ -f "$log" ] && ran=$(grep -c . "$log")
    if [ "$ran" -eq 0 ]; then
        echo "test: $dir ran no tests"
        rc=1
    fi
    return $rc
}

started=$SECONDS
run_build build && run_tests build || status=1
# Every benchmark runs and prints its figures (small sizes; never a speed asserted).
bash bench/run --quick --build build >build/bench-quick.log 2>&1 ||
    { cat build/bench-quick.log; echo "test: bench/run --quick failed"; status=1; }

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
run_build build-asan -Db_sanitize=address,undefined -Db_lundef=false &&
    run_tests build-asan || status=1

export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
tsan_suites=()
for s in ring agent tsan; do tsan_suites+=(--suite "$s"); done
run_build build-tsan -Db_sanitize=thread -Db_lundef=false -Dbuildtype=debugoptimized &&
    run_tests build-tsan "${tsan_suites[@]}" || status=1

# The fuzz build instruments every target (-Dfuzz=true), so the harnesses' libraries are covered.
(export CC=clang
 run_build build-fuzz -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false) &&
    run_tests build-fuzz --suite fuzz || status=1

echo "test: all builds and suites ran in $((SECONDS - started)) s"
python3 - "${results[@]}" <<'PY' || status=1
import json, sys
passed = failed = skipped = 0
for path in sys.argv[1:]:
    try:
        lines = open(path).read().splitlines()
    except OSError:
        continue
    for line in lines:
        r = json.loads(line).get("result")
        if r in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif r == "SKIP":
            skipped += 1
        else:
            failed += 1
print(f"{passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped else ""))
sys.exit(1 if failed or passed == 0 else 0)
PY
exit $status
