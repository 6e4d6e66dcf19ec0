/**
 * The run's monitor in Notebook 7 (served by the test's Jupyter server at /notebooks/...): a
 * notebook trains on 2 local Spark workers and the widget shows the run's state, a row per node
 * and the loss curve. Once the run has ended and the notebook is saved, the file keeps a static
 * copy of the monitor with the curve (hidden while the live widget is on the page), and a copy of
 * the file opened afresh, without the widget, shows it.
 */
import { expect, Page, test } from '@playwright/test';

import { notebook } from './notebookFile';

const MINUTE = 60 * 1000;
const RUN = 'nb7_run';
const STEPS = 12;
const CELLS = [
  '%load_ext tfos_notebook',
  `%%tfos_train --workers 2 --name ${RUN} --no-tensorboard
import time
for i in range(${STEPS}):
    ctx.report(i, loss=1.0 / (i + 1))
    time.sleep(0.25)
return "done"`
];

/** Opens a notebook in Notebook 7 and waits until its kernel is idle. */
async function openNotebook(page: Page, file: string): Promise<void> {
  await page.goto(`notebooks/${file}`);
  await page.waitForFunction(() => (window as any).jupyterapp?.restored, null, { timeout: MINUTE });
  await page.waitForFunction(
    () =>
      (window as any).jupyterapp.shell.currentWidget?.sessionContext?.session?.kernel?.status ===
      'idle',
    null,
    { timeout: 2 * MINUTE }
  );
}

test('Notebook 7 shows the monitor, and the saved notebook keeps the curve', async ({
  page,
  request
}) => {
  test.setTimeout(8 * MINUTE);
  const put = (file: string, content: string) =>
    request.put(`api/contents/${file}`, {
      data: { type: 'notebook', format: 'json', content: JSON.parse(content) }
    });
  expect((await put('nb7.ipynb', notebook(...CELLS))).ok()).toBeTruthy();
  await openNotebook(page, 'nb7.ipynb');
  await page.evaluate(() => (window as any).jupyterapp.commands.execute('notebook:run-all-cells'));

  const output = page.locator('.jp-Notebook .jp-Cell').nth(1).locator('.jp-OutputArea');
  const widget = output.locator('.widget-vbox').first();
  await expect(widget).toContainText(RUN, { timeout: 2 * MINUTE });
  await expect(widget).toContainText('finished', { timeout: 4 * MINUTE });
  await expect(widget.locator('tr[data-task]')).toHaveCount(2);
  await expect(widget.locator('tr[data-task]').first()).toContainText('chief:0');
  const curves = widget.locator('svg.tfos-curve[data-metric="loss"] polyline');
  await expect(curves).toHaveCount(2); // a line per node
  const points = (await curves.first().getAttribute('points')) ?? '';
  expect(points.trim().split(/\s+/).length).toBeGreaterThan(1);
  // The static copy of the ended run is in the cell, hidden while the widget shows.
  const snapshot = output.locator('.tfos-snapshot');
  await expect(snapshot).toHaveCount(1);
  await expect(snapshot).toBeHidden();
  await output.screenshot({ path: test.info().outputPath('notebook7-monitor.png') });

  // Saved, the file holds the curve as plain HTML.
  await page.evaluate(() => (window as any).jupyterapp.commands.execute('docmanager:save'));
  let saved: any = null;
  await expect
    .poll(
      async () => {
        saved = (await (await request.get('api/contents/nb7.ipynb')).json()).content;
        return saved.cells[1].outputs
          .map((o: any) => (o.data ?? {})['text/html'] ?? '')
          .find((html: string) => html.includes('tfos-snapshot'));
      },
      { timeout: MINUTE }
    )
    .toContain('finished');
  const html: string = saved.cells[1].outputs
    .map((o: any) => (o.data ?? {})['text/html'] ?? '')
    .find((h: string) => h.includes('tfos-snapshot'));
  expect(html.match(/<polyline data-node="(chief|worker):0" points="[^"]+"/g)).toHaveLength(2);

  // Opened afresh (a copy: no widget models behind it), the notebook shows the static copy.
  expect((await put('nb7-reopened.ipynb', JSON.stringify(saved))).ok()).toBeTruthy();
  await openNotebook(page, 'nb7-reopened.ipynb');
  const reopened = page.locator('.jp-Notebook .jp-Cell').nth(1).locator('.jp-OutputArea');
  await expect(reopened.locator('.tfos-snapshot')).toBeVisible();
  await expect(reopened.locator('.tfos-snapshot')).toContainText('finished');
  await expect(
    reopened.locator('.tfos-snapshot svg.tfos-curve[data-metric="loss"] polyline')
  ).toHaveCount(2);
  await expect(reopened.locator('.tfos-snapshot tr[data-task]')).toHaveCount(2);

  // Leave the server as found for the next test: no kernel (this one holds a local Spark), no run.
  for (const session of await (await request.get('api/sessions')).json()) {
    expect((await request.delete(`api/sessions/${session.id}`)).ok()).toBeTruthy();
  }
  expect((await request.delete('tfos-notebook/api/runs')).ok()).toBeTruthy();
});
