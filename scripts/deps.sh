#!/usr/bin/env bash
# Installs what building and testing jettprofd needs on Debian 12, only when something is
# missing, and the pinned TOON decoder the tests use. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(gcc pkg-config meson ninja-build libuv1-dev libmsgpack-dev libcriterion-dev
          systemd libsystemd-dev nodejs npm clang libclang-rt-14-dev libzstd-dev
          groff-base heaptrack time valgrind
          protobuf-c-compiler libprotobuf-c-dev zlib1g-dev golang-go librsvg2-bin
          libcurl4-openssl-dev tmux chromium)
# (the exports: protoc-c compiles render/export/profile.proto, zlib gzips pprof; the export
# suite checks pprof with `go tool pprof` and renders the SVG with rsvg-convert; libcurl
# sends `--push` profiles over HTTP(S); bench/run counts the examples' instructions with
# valgrind's cachegrind; `jettprofd top` is tested in a real terminal under tmux, the HTML
# report in Debian's chromium driven by playwright-core)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node may come from outside Debian's packages; a working node+npm is all the tests need.
if command -v node >/dev/null && command -v npm >/dev/null; then
    missing=("${missing[@]/nodejs}"); missing=("${missing[@]/npm}")
fi
read -r -a missing <<<"${missing[*]:-}"
if ((${#missing[@]})); then
    echo "deps: installing ${missing[*]}"
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ -f tests/toon/package-lock.json ] && [ ! -d tests/toon/node_modules/@toon-format ]; then
    echo "deps: installing the pinned TOON decoder (tests/toon)"
    (cd tests/toon && npm ci --no-audit --no-fund --loglevel=error)
fi
if [ -f tests/export/package-lock.json ] && { [ ! -d tests/export/node_modules/speedscope ] ||
        [ ! -d tests/export/node_modules/playwright-core ]; }; then
    echo "deps: installing the pinned speedscope schema, its validator and playwright-core (tests/export)"
    (cd tests/export && npm ci --no-audit --no-fund --loglevel=error)
fi
