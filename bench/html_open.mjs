// bench/html_open.mjs: how long the HTML report of a large profile takes to open and draw in
// headless Chromium (Debian's /usr/bin/chromium, driven by tests/export's playwright-core).
//
//   node bench/html_open.mjs [--build DIR] [--runs N] [--fns A] [--leaves B]
//
// Writes a program whose main calls A functions that each call B others, each of which
// allocates (1 + A + A x B stack nodes; default A 1000, B 100: 101,001), runs it with
// `jett run --profile-memory --profile-export html:PAGE`, then opens PAGE N times (default 5)
// in a fresh page and times it from navigation to the flame graph drawn (the canvas sized by
// the script), and a search typed into it. Prints the page's size, its nodes, and the median
// with min-max of each figure. A figure, never a test.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, statSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { createRequire } from 'node:module';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const opt = (name, dflt) => {
    const i = args.indexOf(name);
    return i >= 0 ? args[i + 1] : dflt;
};
const build = opt('--build', join(root, 'build'));
const runs = Number(opt('--runs', '5'));
const A = Number(opt('--fns', '1000')), B = Number(opt('--leaves', '100'));
const require = createRequire(join(root, 'tests/export/package.json'));
const { chromium } = require('playwright-core');

const dir = mkdtempSync(join(tmpdir(), 'jp-html-bench-'));
let src = 'var kept = []\n';
for (let j = 0; j < B; j++) src += `fn b${j}(i: int) -> int {\n    push(kept, str(i))\n    return ${j}\n}\n`;
for (let i = 0; i < A; i++) {
    src += `fn a${i}() -> int {\n    var t = 0\n`;
    for (let j = 0; j < B; j++) src += `    t = t + b${j}(${i})\n`;
    src += '    return t\n}\n';
}
src += 'fn main() {\n    var t = 0\n';
for (let i = 0; i < A; i++) src += `    t = t + a${i}()\n`;
src += '    print(str(t))\n}\n';
writeFileSync(join(dir, 'main.jett'), src);
const page = join(dir, 'page.html');
execFileSync(join(build, 'runtime/jett'), ['run', 'main.jett', '--profile-memory',
    '--profile-export', 'html:' + page], { cwd: dir, stdio: ['ignore', 'ignore', 'ignore'] });

const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[s.length >> 1]; };
const browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-background-networking', '--disable-dev-shm-usage'],
});
const open = [], search = [];
let nodes = 0;
for (let r = 0; r < runs; r++) {
    const p = await browser.newPage({ viewport: { width: 1200, height: 900 } });
    const t0 = Date.now();
    await p.goto(pathToFileURL(page).href);
    await p.waitForFunction(() => document.getElementById('flame').width > 0, null,
        { timeout: 120000 });
    open.push(Date.now() - t0);
    nodes = await p.evaluate(() =>
        Object.values(JSON.parse(document.getElementById('data').textContent).values)[0]
            .nodes.length);
    const t1 = Date.now();
    await p.fill('#q', 'b7');
    await p.waitForFunction(() => document.getElementById('match').textContent !== '');
    search.push(Date.now() - t1);
    await p.close();
}
await browser.close();
const size = statSync(page).size;
rmSync(dir, { recursive: true });
console.log(`bench/html_open.mjs --runs ${runs} --fns ${A} --leaves ${B}`);
console.log(`page: ${size} bytes, ${nodes} stack nodes (alloc_bytes)`);
console.log(`open and draw, ms: median ${median(open)} (min ${Math.min(...open)}, max ${Math.max(...open)})`);
console.log(`search, ms: median ${median(search)} (min ${Math.min(...search)}, max ${Math.max(...search)})`);
