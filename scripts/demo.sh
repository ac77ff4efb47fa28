#!/usr/bin/env bash
# Builds jettprofd and the reference runtime, then profiles a real Jett program end to end: the
# runtime spawns a private jettprofd, streams samples through the shared-memory ring, and prints
# the program's output followed by the CPU profile on stderr.
#   scripts/demo.sh                                   the CPU hot-spot example with --profile
#   scripts/demo.sh FILE.jett [jett run options]      another program, e.g.
#   scripts/demo.sh examples/alloc_builder/main.jett --profile-memory --agent
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
[ -f build/build.ninja ] || meson setup build >/dev/null
ninja -C build >/dev/null
export JETTPROFD="$PWD/build/daemon/jettprofd"
program=examples/cpu_hotspot/src/main.jett
if (($#)) && [[ $1 == *.jett ]]; then program=$1; shift; fi
args=(--profile)
if (($#)); then args=("$@"); fi
exec build/runtime/jett run "$program" "${args[@]}"
