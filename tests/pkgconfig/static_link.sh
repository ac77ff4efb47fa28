#!/bin/sh
# Installs the build into a temporary DESTDIR, points pkg-config at the installed
# jettprof-agent.pc (its prefix moved to the DESTDIR), links host.c statically with
# `pkg-config --static --cflags --libs jettprof-agent` alone, and runs it.
# usage: static_link.sh MESON BUILD_ROOT HOST_C CC...
set -eu
meson=$1 build=$2 host=$3
shift 3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$meson" install -C "$build" --destdir "$tmp/root" --no-rebuild --quiet >"$tmp/install.log" 2>&1 ||
    { cat "$tmp/install.log" >&2; exit 1; }
pc=$(find "$tmp/root" -name jettprof-agent.pc | head -n 1)
[ -n "$pc" ] || { echo "no jettprof-agent.pc installed" >&2; exit 1; }
prefix=$(sed -n 's/^prefix=//p' "$pc")
mkdir "$tmp/pc"
sed "s|^prefix=.*|prefix=$tmp/root$prefix|" "$pc" >"$tmp/pc/jettprof-agent.pc"
flags=$(PKG_CONFIG_PATH="$tmp/pc" pkg-config --static --cflags --libs jettprof-agent)
echo "pkg-config --static --cflags --libs jettprof-agent: $flags"
# shellcheck disable=SC2086 # the flags are words
"$@" -static -o "$tmp/host" "$host" $flags
"$tmp/host"
