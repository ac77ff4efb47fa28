#!/usr/bin/env python3
"""The line between jettprofd's server and its sessions, checked.

daemon/server.h declares the server's functions; a session reaches the server only through the
ones it marks "for sessions" (the comment above a declaration, or above the group of
declarations it belongs to, says so). The session's files are the ones daemon/session.h lists
in its opening comment. This fails naming the session file, the line and the server function
it calls without that mark.

  server_rules.py SOURCE_ROOT      check the tree
  server_rules.py --self-test      check that a planted call is caught
"""
import os
import re
import sys
import tempfile

DECL = re.compile(r"^[A-Za-z_][^;(]*?\b(jpd_\w+)\s*\(", re.M)
SESSION_FILE = re.compile(r"^\s\*\s+(\w+\.c)\s", re.M)
MARK = re.compile(r"for sessions", re.I)


def strip_comments(text):
    """The text with every comment and string blanked, line breaks kept."""
    out = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.S)
    out = re.sub(r"//[^\n]*", "", out)
    return re.sub(r'"(\\.|[^"\\])*"', '""', out)


def server_functions(header):
    """{name: marked} for every function server.h declares."""
    lines = header.splitlines()
    found = {}
    comment = ""
    in_comment = False
    for line in lines:
        stripped = line.strip()
        if in_comment or stripped.startswith("/*"):
            if stripped.startswith("/*") and not in_comment:
                comment = ""
            comment += " " + stripped
            in_comment = "*/" not in stripped
            continue
        if not stripped:
            comment = ""  # a blank line ends a group: its comment says nothing of what follows
            continue
        m = DECL.match(line)
        if m and not stripped.startswith(("#", "typedef")):
            found[m.group(1)] = bool(MARK.search(comment))
    return found


def session_files(session_h):
    head = session_h.split("*/", 1)[0]
    return sorted(set(SESSION_FILE.findall(head)))


def check(root):
    daemon = os.path.join(root, "daemon")
    funcs = server_functions(open(os.path.join(daemon, "server.h"), encoding="utf-8").read())
    files = session_files(open(os.path.join(daemon, "session.h"), encoding="utf-8").read())
    if not funcs or not files:
        print("server-rules: found no server functions or no session files")
        return 1
    unmarked = sorted(n for n, marked in funcs.items() if not marked)
    errors = []
    for f in files:
        text = strip_comments(open(os.path.join(daemon, f), encoding="utf-8").read())
        for no, line in enumerate(text.splitlines(), 1):
            for name in unmarked:
                if re.search(r"\b%s\s*\(" % re.escape(name), line):
                    errors.append(f"daemon/{f}:{no}: calls {name}, which daemon/server.h does "
                                  f"not mark \"for sessions\"")
    for e in errors:
        print("server-rules:", e)
    print(f"server-rules: {len(files)} session files, {len(funcs)} server functions "
          f"({len(funcs) - len(unmarked)} for sessions), {len(errors)} broken")
    return 1 if errors else 0


def self_test():
    """A tree that keeps the rule passes; the same tree with one planted call fails."""
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "daemon"))

        def put(rel, text):
            open(os.path.join(root, rel), "w").write(text)
        put("daemon/server.h", "/* For sessions: a run id. */\nint jpd_take(void);\n"
            "void jpd_near(void);\n\n/* Main loop only. */\nvoid jpd_stop(void);\n")
        put("daemon/session.h", "/* The session's files:\n *   a.c  the one\n */\n")
        put("daemon/a.c", "/* jpd_stop() is named in a comment only */\n"
            "void f(void) { jpd_take(); jpd_near(); }\n")
        if check(root) != 0:
            print("server-rules: self-test: a tree that keeps the rule was refused")
            return 1
        put("daemon/a.c", "void f(void) { jpd_take(); jpd_stop(); }\n")
        if check(root) == 0:
            print("server-rules: self-test: a planted call went unnoticed")
            return 1
    print("server-rules: self-test: the planted call was caught")
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--self-test"]:
        sys.exit(self_test())
    if len(sys.argv) != 2:
        raise SystemExit("usage: server_rules.py SOURCE_ROOT | --self-test")
    sys.exit(check(sys.argv[1]))
