#!/usr/bin/env python3
"""What scripts/test.sh checks before reusing a build directory.

Reads `meson introspect --buildoptions --targets` (JSON) on stdin and takes key=value
arguments (the last value given for a key counts). Prints "key: has X, needs Y" for each option
the build directory holds with another value, and "compiler: has X, needs Y" when the
environment's JP_WANT_CC names a compiler other than the one its C sources were compiled with.
Prints nothing when the directory is configured as asked.
"""
import json
import os
import shutil
import sys

intro = json.load(sys.stdin)
have = {o["name"]: o["value"] for o in intro["buildoptions"]}
wanted = dict(kv.split("=", 1) for kv in sys.argv[1:])  # the last value given for a key
for key, want in wanted.items():
    got = have.get(key)
    got = str(got).lower() if isinstance(got, bool) else str(got)
    if got != want:
        print(f"{key}: has {got}, needs {want}")
cc = os.environ["JP_WANT_CC"]
used = [s["compiler"][0] for t in intro["targets"] for s in t["target_sources"]
        if s.get("language") == "c" and s.get("compiler")]
if cc and used:
    want, got = shutil.which(cc), shutil.which(used[0]) or used[0]
    if not want or os.path.realpath(want) != os.path.realpath(got):
        print(f"compiler: has {got}, needs {cc}")
