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

run_build() { # name, meson options...
    local dir=$1; shift
    if [ ! -f "$dir/build.ninja" ]; then
        meson setup "$dir" --werror "$@" >"$dir.setup.log" 2>&1 ||
            { cat "$dir.setup.log"; echo "test: configuring $dir failed"; return 1; }
    fi
    ninja -C "$dir" -j "$jobs" >"$dir.build.log" 2>&1 ||
        { tail -n 60 "$dir.build.log"; echo "test: building $dir failed"; return 1; }
}

run_tests() { # build dir, extra meson test args...
    local dir=$1; shift
    meson test -C "$dir" --print-errorlogs --num-processes "$jobs" "$@"
    local rc=$?
    results+=("$dir/meson-logs/testlog.json")
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
