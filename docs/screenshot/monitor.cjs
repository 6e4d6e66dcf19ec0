// Opens a notebook in a running JupyterLab, runs all its cells, waits for the run's monitor to
// show the end, and saves a screenshot of the training cell with its monitor.
//   node monitor.cjs <lab notebook URL> <out.png>
// Needs playwright-core (NODE_PATH) and Debian's chromium (CHROMIUM, default /usr/bin/chromium).
const { chromium } = require('playwright-core');

const MINUTE = 60 * 1000;

function kernelIdle() {
  const panel = window.jupyterapp.shell.currentWidget;
  const kernel = panel && panel.sessionContext && panel.sessionContext.session &&
    panel.sessionContext.session.kernel;
  return Boolean(kernel && kernel.status === 'idle');
}

function runEnded() {
  return [...document.querySelectorAll('.widget-html-content')].some(
    (e) => /\b(finished|failed|stopped)\b/.test(e.textContent) && e.textContent.includes('· run ')
  );
}

(async () => {
  const [url, out] = process.argv.slice(2);
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  });
  try {
    const page = await browser.newPage({ viewport: { width: 1300, height: 1800 } });
    await page.goto(url);
    await page.waitForFunction(() => window.jupyterapp && window.jupyterapp.shell.currentWidget, null,
      { timeout: 2 * MINUTE });
    await page.waitForFunction(kernelIdle, null, { timeout: 2 * MINUTE });
    await page.evaluate(() => window.jupyterapp.commands.execute('notebook:run-all-cells'));
    await page.waitForFunction(runEnded, null, { timeout: 8 * MINUTE, polling: 500 });
    await page.waitForTimeout(1500); // let the last sync settle
    const news = page.getByRole('button', { name: 'No', exact: true });
    if (await news.isVisible()) {
      await news.click(); // the "official Jupyter news?" toast would cover the picture
    }
    const cell = page.locator('.jp-Notebook .jp-CodeCell').nth(1);
    await cell.scrollIntoViewIfNeeded();
    await cell.screenshot({ path: out });
    console.log(`saved ${out}`);
  } finally {
    await browser.close();
  }
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
