#!/usr/bin/env python3
"""`jettprofd top` in a real terminal (tmux) and in batch mode, on a private run.

A program that keeps growing a list runs under `jett run --profile-memory`; `top --pid` watches
it. In tmux: the frame is drawn in place on the alternate screen, the keys act (s sorts, space
pauses the table, + and - change the interval), a resize redraws within the new width, and q,
SIGINT (C-c) and SIGTERM each give the terminal back as it was (the main screen, the cursor,
the line discipline). When the program ends, top prints its final profile and says so. In batch
mode, frames are plain text without an escape code, as many as --frames says.

Run by meson with JETT_BIN and JETTPROFD_BIN set; exits non-zero naming the first check that
failed.
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

JETT = os.environ["JETT_BIN"]
JPD = os.environ["JETTPROFD_BIN"]
TMUX = ["tmux", "-L", "jp-top-%d" % os.getpid(), "-f", "/dev/null"]

PROGRAM = """namespace watch.me

var kept = []

fn grow(i: int) -> str {
    return "item " + str(i)
}

fn main() {
    for round in 0..1200 {
        for i in 0..40 {
            push(kept, grow(round * 40 + i))
        }
        sleep(100)
    }
    print("done")
}
"""


def fail(what):
    print("FAIL: " + what, file=sys.stderr)
    sys.exit(1)


def tmux(*args, check=True):
    r = subprocess.run(TMUX + list(args), capture_output=True, text=True)
    if check and r.returncode != 0:
        fail("tmux %s: %s" % (" ".join(args), r.stderr.strip()))
    return r.stdout


def screen():
    return tmux("capture-pane", "-p", "-t", "t")


def flag(name):
    return tmux("display-message", "-p", "-t", "t", "#{%s}" % name).strip()


def wait_for(what, cond, timeout=20.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.05)
    fail("%s; the screen was:\n%s" % (what, screen()))


def keys(*k):
    tmux("send-keys", "-t", "t", *k)


def start_top(pid, interval="0.5"):
    keys("%s top --pid %d --interval %s" % (JPD, pid, interval), "Enter")
    wait_for("top draws a frame", lambda: screen().startswith("jettprofd top - run "))
    if flag("alternate_on") != "1":
        fail("top does not draw on the alternate screen")


def expect_restored(how):
    wait_for("the main screen is back after " + how, lambda: flag("alternate_on") == "0")
    text = screen()
    if "jettprofd top - run" in text:
        fail("a frame was left on the main screen after %s:\n%s" % (how, text))
    if "MARKER-BEFORE" not in text:
        fail("the main screen lost what it showed before top (%s):\n%s" % (how, text))
    if flag("cursor_flag") != "1":
        fail("the cursor stays hidden after " + how)
    keys("clear", "Enter")
    keys("echo MARKER-BEFORE; stty -a | tr ' ;' '\\n\\n' | grep -x -e icanon -e echo | "
         "sort | tr '\\n' , ; echo", "Enter")
    wait_for("the terminal's modes are back after " + how,
             lambda: "echo,icanon," in screen())


def main():
    if not shutil.which("tmux"):
        fail("tmux is not installed (scripts/deps.sh installs it)")
    tmp = tempfile.mkdtemp(prefix="jp-top-")
    prog = os.path.join(tmp, "watch.jett")
    with open(prog, "w") as f:
        f.write(PROGRAM)
    run = subprocess.Popen([JETT, "run", prog, "--profile-memory"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, cwd=tmp)
    try:
        check(run, tmp)
    finally:
        tmux("kill-server", check=False)
        if run.poll() is None:
            run.kill()
            run.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    print("top-terminal: batch frames, keys, resize, q / C-c / SIGTERM restore, the end: ok")


def check(run, tmp):
    pid = run.pid
    # batch mode, once the run can be watched
    end = time.monotonic() + 20
    while True:
        b = subprocess.run([JPD, "top", "--pid", str(pid), "--batch", "--frames", "3",
                            "--interval", "0.2"], capture_output=True)
        if b.returncode == 0:
            break
        if time.monotonic() > end:
            fail("top --pid --batch never reached the run: %s" % b.stderr.decode())
        time.sleep(0.1)
    out = b.stdout.decode()
    if b"\x1b" in b.stdout:
        fail("a batch frame holds an escape code")
    if out.count("jettprofd top - run ") != 3:
        fail("--frames 3 printed another count of frames:\n" + out)
    if "watch.me.grow" not in out or "LIVE NOW" not in out:
        fail("a frame lacks the table:\n" + out)

    tmux("new-session", "-d", "-s", "t", "-x", "110", "-y", "32",
         "env TERM=xterm-256color PS1='$ ' bash --norc --noprofile")
    keys("echo MARKER-BEFORE", "Enter")
    wait_for("the shell answers", lambda: "MARKER-BEFORE" in screen())
    start_top(pid)
    text = screen()
    for want in ("- memory -", "LIVE NOW", "watch.me.grow", "live over time",
                 "q quit, space pause, s sort, +/- interval"):
        if want not in text:
            fail("the frame lacks %r:\n%s" % (want, text))
    keys("s")
    wait_for("s sorts by the change of live bytes", lambda: "sorted by change of live" in screen())
    keys("Space")
    wait_for("space pauses the table", lambda: "PAUSED" in screen())
    keys("Space")
    wait_for("space again goes on", lambda: "PAUSED" not in screen())
    keys("+")
    wait_for("+ makes the interval longer", lambda: "every 1 s" in screen())
    keys("-")
    wait_for("- makes it shorter", lambda: "every 0.5 s" in screen())
    tmux("resize-window", "-t", "t", "-x", "64", "-y", "20")

    def fits():
        lines = screen().split("\n")
        return lines[0].startswith("jettprofd top - run ") and \
            any(line.startswith("sorted by") for line in lines[:6])
    wait_for("a resize redraws the frame within the new size", fits)
    keys("q")
    expect_restored("q")

    start_top(pid)
    keys("C-c")
    expect_restored("SIGINT")

    start_top(pid)
    tops = subprocess.run(["pgrep", "-f", "top --pid %d" % pid], capture_output=True, text=True)
    for p in tops.stdout.split():
        os.kill(int(p), signal.SIGTERM)
    expect_restored("SIGTERM")

    # The run ends while top watches: the final profile, said so.
    start_top(pid)
    run.send_signal(signal.SIGINT)
    def history():
        return tmux("capture-pane", "-p", "-t", "t", "-S", "-500")
    wait_for("the end of the run is shown", lambda: "has ended; its final profile" in history())
    if flag("alternate_on") != "0":
        fail("the final profile is not on the main screen")
    text = history()
    if "Memory profile" not in text or "watch.me.grow" not in text:
        fail("the final profile is not printed:\n" + text)
    run.wait(timeout=30)


if __name__ == "__main__":
    main()
