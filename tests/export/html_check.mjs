// The HTML report in a real browser: Debian's chromium, headless, driven by playwright-core.
//
//   node html_check.mjs FILE [--memory] [--diff] [--hostile NAME]...
//
// Opens FILE (a page `jettprofd export --format html` or `diff --format html` wrote) and checks
// what a person would: no request of any kind leaves the page, no script error, no dialog; the
// flame graph is drawn; hovering a frame shows its name, value and share; search highlights and
// says the matched share and goes into the URL's fragment, as a click's zoom does, and a reload
// of that URL restores both; reset undoes them. --memory: the value selector offers several
// values and the memory chart is drawn. --diff: frames are coloured by the diff. --hostile NAME:
// a frame of that name is shown as text (in the table and the tooltip) and runs nothing. With
// scripts off, the tables are still there. Prints one line per check; exits 1 naming the
// first that failed.
import { chromium } from 'playwright-core';
import { pathToFileURL } from 'node:url';

const args = process.argv.slice(2);
const file = args[0];
const memory = args.includes('--memory');
const diff = args.includes('--diff');
const hostile = [];
for (let i = 1; i < args.length; i++) if (args[i] === '--hostile') hostile.push(args[++i]);

function fail(what) {
    console.error('FAIL: ' + what);
    process.exit(1);
}

const url = pathToFileURL(file).href;
// The page's own fragment, read in the page: page.url() learns of replaceState only later.
const hashOf = (page) => page.evaluate(() => location.hash);
const browser = await chromium.launch({
    executablePath: process.env.JETT_TEST_CHROMIUM || '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-background-networking', '--disable-dev-shm-usage'],
});
try {
    const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
    const page = await context.newPage();
    const requests = [], errors = [], dialogs = [];
    page.on('request', (r) => requests.push(r.url()));
    page.on('pageerror', (e) => errors.push(String(e)));
    page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
    page.on('dialog', async (d) => { dialogs.push(d.message()); await d.dismiss(); });
    await page.goto(url);
    await page.waitForFunction(() => document.getElementById('flame').width > 0);
    const others = requests.filter((r) => r.split('#')[0] !== url);
    if (others.length) fail('the page asked for ' + others.join(', '));
    if (errors.length) fail('script errors: ' + errors.join('; '));
    console.log('ok: loaded with no request and no error');

    // the flame graph is drawn: some pixel of the canvas is not blank
    const drawn = await page.evaluate(() => {
        const c = document.getElementById('flame');
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        for (let i = 3; i < d.length; i += 4) if (d[i]) return true;
        return false;
    });
    if (!drawn) fail('the flame graph is blank');
    console.log('ok: flame graph drawn');

    // the root row is at the bottom: hover its first box
    await page.locator('#flame').scrollIntoViewIfNeeded();
    const box = await page.locator('#flame').boundingBox();
    const x = box.x + 4, y = box.y + box.height - 8;
    await page.mouse.move(x, y);
    const tip = await page.locator('#tip').textContent();
    const shown = await page.locator('#tip').isVisible();
    if (!shown || !/%/.test(tip)) fail('no tooltip with a share over a frame: ' + tip);
    console.log('ok: tooltip: ' + tip.split('\n')[0]);

    // search by part of the hovered frame's name: highlighted share, kept in the fragment
    const name = tip.split('\n')[0];
    const part = name.slice(0, Math.max(1, Math.min(4, name.length)));
    await page.fill('#q', part);
    const match = await page.locator('#match').textContent();
    if (!/^matched: \d+\.\d\d%$/.test(match)) fail('search says ' + JSON.stringify(match));
    const searched = decodeURIComponent(await hashOf(page));
    if (!searched.includes('q=' + part)) fail('search not in the fragment: ' + searched);
    console.log('ok: search ' + JSON.stringify(part) + ': ' + match);

    // a click zooms, kept in the fragment; a reload restores zoom and search
    await page.locator('#flame').scrollIntoViewIfNeeded();
    const b1 = await page.locator('#flame').boundingBox();
    await page.mouse.click(b1.x + 4, b1.y + b1.height - 8);
    const zoomed = await hashOf(page);
    if (!/zoom=[1-9]/.test(zoomed)) fail('a click did not zoom: ' + zoomed);
    await page.reload();
    await page.waitForFunction(() => document.getElementById('flame').width > 0);
    await page.locator('#flame').scrollIntoViewIfNeeded();
    if ((await page.inputValue('#q')) !== part) fail('the search was not restored from the URL');
    if ((await hashOf(page)) !== zoomed) fail('the zoom was not kept in the URL');
    console.log('ok: zoom and search restored from ' + zoomed);
    await page.click('#reset');
    if (!/zoom=0$/.test(await hashOf(page))) fail('reset left ' + (await hashOf(page)));
    console.log('ok: reset');

    if (memory) {
        const options = await page.locator('#value option').allTextContents();
        if (options.length < 3 || !options.includes('alloc_count')) fail('values: ' + options);
        await page.selectOption('#value', 'alloc_count');
        await page.locator('#flame').scrollIntoViewIfNeeded();
        const b2 = await page.locator('#flame').boundingBox();
        await page.mouse.move(b2.x + 4, b2.y + b2.height - 8);
        const t2 = await page.locator('#tip').textContent();
        if (!/allocations/.test(t2)) fail('alloc_count is not shown: ' + t2);
        const chart = await page.evaluate(() => {
            const c = document.getElementById('chart');
            if (c.style.display === 'none') return false;
            const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
            for (let i = 3; i < d.length; i += 4) if (d[i]) return true;
            return false;
        });
        if (!chart) fail('the memory chart is not drawn');
        console.log('ok: values ' + options.join(' ') + '; memory chart drawn');
    }
    if (diff) {
        const colours = await page.evaluate(() => {
            const D = JSON.parse(document.getElementById('data').textContent);
            return D.colour ? D.colour.length : 0;
        });
        if (!colours) fail('a diff page without colours');
        const changes = await page.locator('pre.changes').textContent();
        if (!/largest change first/.test(changes)) fail('no ranked changes: ' + changes);
        console.log('ok: diff colours for ' + colours + ' frames and its changes');
    }
    for (const h of hostile) {
        const text = await page.locator('table.bn').textContent();
        if (!text.includes(h)) fail('the table does not show ' + JSON.stringify(h) + ' as text');
        const names = await page.evaluate(() =>
            JSON.parse(document.getElementById('data').textContent).frames.map((f) => f[0]));
        if (!names.some((n) => n.endsWith(h))) fail('the data lost ' + JSON.stringify(h));
        console.log('ok: ' + JSON.stringify(h) + ' is text');
    }
    if (dialogs.length) fail('a dialog opened: ' + dialogs.join('; '));
    const pwned = await page.evaluate(() => document.querySelectorAll('img').length);
    if (pwned) fail('markup from the profile became elements');

    // scripts off: the tables are the page
    const off = await browser.newContext({ javaScriptEnabled: false });
    const p2 = await off.newPage();
    await p2.goto(url);
    const rows = await p2.locator('table.totals tr').count();
    const body = await p2.locator('body').textContent();
    if (rows < 5 || !/bottlenecks/.test(body)) fail('without scripts the tables are missing');
    console.log('ok: without scripts, ' + rows + ' totals and the bottlenecks');
} finally {
    await browser.close();
}
