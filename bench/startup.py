#!/usr/bin/env python3
# bench/startup.py: what a profiled run costs to start, and what the daemon costs to load.
#
#   python3 bench/startup.py BUILD_DIR      (a release build: meson setup build-rel --buildtype=release)
#
# Times 20 runs each of `jettprofd --version`, `jett run hello.jett` and `jett run hello.jett
# --profile` (a one-line program written to /tmp), printing each median with min and max, the
# profiled run less the unprofiled one (medians), and how many shared libraries `ldd` lists for
# jettprofd. A figure, not a test: run it alone on a quiet machine.
import subprocess, time, statistics, os, sys
b = sys.argv[1] if len(sys.argv) > 1 else 'build-rel'
hello = '/tmp/hello42.jett'
open(hello, 'w').write('fn main() {\n    print("hello")\n}\n')
def t(cmd, n=20):
    xs = []
    for _ in range(n):
        t0 = time.perf_counter(); subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); xs.append((time.perf_counter() - t0) * 1000)
    return statistics.median(xs), min(xs), max(xs)
def show(name, r): print('%-44s median %7.2f ms (min %.2f, max %.2f)' % (name, *r))
show('jettprofd --version', t([b + '/daemon/jettprofd', '--version']))
plain = t([b + '/runtime/jett', 'run', hello]); show('jett run hello.jett', plain)
prof = t([b + '/runtime/jett', 'run', hello, '--profile']); show('jett run hello.jett --profile', prof)
print('profiled minus unprofiled, medians: %.2f ms' % (prof[0] - plain[0]))
libs = subprocess.run(['ldd', b + '/daemon/jettprofd'], capture_output=True, text=True).stdout.count('=>')
print('jettprofd shared libraries (ldd): %d' % libs)
