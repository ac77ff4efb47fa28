#!/bin/sh
# run_fuzz.sh HARNESS CORPUS ARTIFACTS [DICT]: a bounded libFuzzer run for `meson test`.
# The seed corpus is copied to a temporary directory so the run never writes into the source
# tree; inputs that crash or break an invariant are kept in ARTIFACTS (crash-*, leak-*,
# timeout-*, oom-*) to be replayed with `HARNESS ARTIFACTS/crash-...`.
# JP_FUZZ_SECONDS overrides the 15-second budget for a longer local run.
set -u
harness=$1 corpus=$2 artifacts=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/jp-fuzz.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
cp -R "$corpus"/. "$work"/ || exit 1
mkdir -p "$artifacts" || exit 1
# libFuzzer's own failure code is 77, which meson would report as a skip: use 1.
set -- -max_total_time="${JP_FUZZ_SECONDS:-15}" -rss_limit_mb=2048 -timeout=10 \
    -error_exitcode=1 -timeout_exitcode=1 -print_final_stats=1 \
    -artifact_prefix="$artifacts"/ ${4:+-dict="$4"}
"$harness" "$@" "$work"
rc=$?
[ $rc -ne 77 ] || rc=1
[ $rc -eq 0 ] || echo "run_fuzz: $harness failed ($rc); the input is in $artifacts" >&2
exit $rc
