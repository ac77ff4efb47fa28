#!/usr/bin/env python3
"""The include rules of docs/ARCHITECTURE.md, checked.

The table under "What each folder may include" says, for each folder, which folders and files
its files may reach through `#include "..."` (transitively: a header a file includes brings its
own includes along). This walks every .c and .h under the listed folders, resolves each quoted
include the way the build does (beside the including file, then from the top of the tree, then
from the public include directory agent/include), and fails naming the file, the include chain
and the rule it breaks. Generated headers (protoc-c's *.pb-c.h) are not in the tree and are
skipped; any other include that resolves to nothing is an error too.

  include_rules.py SOURCE_ROOT      check the tree
  include_rules.py --self-test      check that a planted include is caught
"""
import os
import re
import sys
import tempfile

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SEARCH = ["agent/include"]  # -I directories besides the file's own and the top of the tree
GENERATED = re.compile(r"\.pb-c\.h$")


def read_rules(root):
    doc = open(os.path.join(root, "docs", "ARCHITECTURE.md"), encoding="utf-8").read()
    at = doc.find("## What each folder may include")
    if at < 0:
        raise SystemExit("include-rules: docs/ARCHITECTURE.md has no 'What each folder may "
                         "include' section")
    rules = {}
    for line in doc[at:].splitlines()[1:]:
        if line.startswith("## "):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if len(cells) != 2 or not cells[0].startswith("`"):
            continue
        folder = cells[0].strip("`")
        rules[folder] = [c.strip().strip("`") for c in cells[1].split(",")]
    if not rules:
        raise SystemExit("include-rules: the table in docs/ARCHITECTURE.md has no rows")
    return rules


def rule_of(path, rules):
    best = None
    for folder in rules:
        if path.startswith(folder) and (best is None or len(folder) > len(best)):
            best = folder
    return best


def allowed(target, allow):
    return any(target.startswith(a) if a.endswith("/") else target == a for a in allow)


def resolve(root, including, name):
    for base in [os.path.dirname(including), ""] + SEARCH:
        cand = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(os.path.join(root, cand)):
            return cand
    return None


def check(root):
    rules = read_rules(root)
    files = []
    for folder in rules:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, folder)):
            dirnames[:] = [d for d in dirnames if not d.startswith(("build", "."))]
            for f in filenames:
                if f.endswith((".c", ".h")):
                    files.append(os.path.relpath(os.path.join(dirpath, f), root))
    includes = {}

    def includes_of(path):
        if path not in includes:
            text = open(os.path.join(root, path), encoding="utf-8", errors="replace").read()
            found = []
            for name in INCLUDE.findall(text):
                target = resolve(root, path, name)
                if target is None and not GENERATED.search(name):
                    errors.append(f"{path}: #include \"{name}\" resolves to no file")
                if target:
                    found.append(target)
            includes[path] = found
        return includes[path]

    errors = []
    for path in sorted(set(files)):
        folder = rule_of(path, rules)
        allow = rules[folder]
        seen = {path: None}
        todo = [path]
        while todo:
            cur = todo.pop()
            for target in includes_of(cur):
                if target in seen:
                    continue
                seen[target] = cur
                if not allowed(target, allow):
                    chain = [target]
                    while seen[chain[-1]] is not None:
                        chain.append(seen[chain[-1]])
                    errors.append(f"{path}: reaches {target} (through {' <- '.join(chain[1:])}); "
                                  f"{folder} may include only {', '.join(allow)}")
                    continue
                todo.append(target)
    for e in sorted(set(errors)):
        print("include-rules:", e)
    print(f"include-rules: {len(set(files))} files under {len(rules)} rules, "
          f"{len(set(errors))} broken")
    return 1 if errors else 0


def self_test():
    """A tree that keeps the rules passes; the same tree with one planted include fails."""
    with tempfile.TemporaryDirectory() as root:
        def put(rel, text):
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            open(os.path.join(root, rel), "w").write(text)
        put("docs/ARCHITECTURE.md", "## What each folder may include\n\n| folder | may include |\n"
            "|---|---|\n| `low/` | `low/` |\n| `high/` | `low/`, `high/` |\n"
            "| `high/inner/` | `high/inner/` |\n| `top/` | `low/a.h`, `top/` |\n\n## Next\n")
        put("low/a.h", "#include <stdio.h>\n")
        put("low/a.c", '#include "a.h"\n')
        put("high/b.c", '#include "low/a.h"\n#include "b.h"\n')
        put("high/b.h", "")
        put("high/inner/c.c", '#include "c.h"\n')
        put("high/inner/c.h", "")
        put("low/private.h", "")
        put("top/t.c", '#include "low/a.h"\n')  # a row may name single files of a folder
        if check(root) != 0:
            print("include-rules: self-test: a tree that keeps the rules was refused")
            return 1
        put("high/inner/c.h", '#include "high/b.h"\n')  # transitively, and upwards
        if check(root) == 0:
            print("include-rules: self-test: a planted include went unnoticed")
            return 1
        put("high/inner/c.h", '#include "nowhere.h"\n')
        if check(root) == 0:
            print("include-rules: self-test: an include of no file went unnoticed")
            return 1
        put("high/inner/c.h", "")
        put("top/t.c", '#include "low/a.h"\n#include "low/private.h"\n')
        if check(root) == 0:
            print("include-rules: self-test: a file of a folder the row names only in part "
                  "went unnoticed")
            return 1
    print("include-rules: self-test: the planted includes were caught")
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--self-test"]:
        sys.exit(self_test())
    if len(sys.argv) != 2:
        raise SystemExit("usage: include_rules.py SOURCE_ROOT | --self-test")
    sys.exit(check(sys.argv[1]))
