/**
 * A notebook trains a small model on 2 Spark workers; the runs sidebar lists the run, opens its
 * TensorBoard in a main-area panel, and TensorBoard (behind jupyter-server-proxy, in the panel's
 * iframe) draws the run's scalars; a second, long run is stopped from the sidebar. Saves a screenshot to $TFOS_UI_SCREENSHOT (default
 * docs/labextension.png).
 */
import { expect, test } from '@jupyterlab/galata';
import * as path from 'path';

const RUN = 'ui_digits';
const MINUTE = 60 * 1000;

// Two nodes each train tf-keras on scikit-learn's digits for three short epochs; Keras's
// TensorBoard callback (ctx.callbacks) writes epoch_loss under ctx.log_dir, which the driver
// mirrors into the run's TensorBoard.
const TRAIN_CELL = `%%tfos_train --workers 2 --epochs 3 --name ${RUN}
import tensorflow as tf
from tfos_notebook.examples.digits import build_model, load_digits_split

strategy = tf.distribute.MultiWorkerMirroredStrategy()
x, y, _, _ = load_digits_split()
data = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(64)
with strategy.scope():
    model = build_model()
model.fit(data, epochs=args.epochs, steps_per_epoch=8, verbose=0,
          callbacks=ctx.callbacks(checkpoint=False, backup=False))
return "trained"`;

// A run that would go on for minutes, for the sidebar's Stop button.
const LONG_RUN = 'ui_long';
const LONG_CELL = `%%tfos_train --workers 2 --name ${LONG_RUN} --no-tensorboard --monitor none
import time
for i in range(3000):
    ctx.report(i, loss=1.0 / (i + 1))
    time.sleep(0.1)`;

/** The notebook, written as a file (typing into the editor would re-indent the cell). */
function notebook(...cells: string[]): string {
  return JSON.stringify({
    cells: cells.map(source => ({
      cell_type: 'code',
      execution_count: null,
      metadata: {},
      outputs: [],
      source
    })),
    metadata: { kernelspec: { display_name: 'Python 3', language: 'python', name: 'python3' } },
    nbformat: 4,
    nbformat_minor: 5
  });
}

test('a training run shows in the runs sidebar and its TensorBoard draws the scalars', async ({
  page,
  tmpPath
}) => {
  test.setTimeout(8 * MINUTE);

  const file = `${tmpPath}/train.ipynb`;
  await page.contents.uploadContent(
    notebook('%load_ext tfos_notebook', TRAIN_CELL, LONG_CELL),
    'text',
    file
  );
  await page.notebook.openByPath(file);
  await page.notebook.activate('train.ipynb');
  await page.notebook.runCell(0);
  await page.notebook.runCell(1);

  // The sidebar, opened from the command palette's command.
  await page.evaluate(() => (window as any).jupyterapp.commands.execute('tfos:open-runs'));
  const sidebar = page.locator('#tfos-runs-sidebar');
  await expect(sidebar).toBeVisible();
  const row = sidebar.locator('.tfos-RunRow', { hasText: RUN });
  await expect(row).toBeVisible({ timeout: 2 * MINUTE });
  await expect(row.locator('.tfos-RunRow-state')).toHaveText(/reserving|running|finished/);

  // Once the nodes report, the row shows step and loss; TensorBoard's URL comes with the run.
  await expect(row.locator('.tfos-RunRow-metrics')).toContainText('loss', { timeout: 4 * MINUTE });
  const open = row.locator('.tfos-RunRow-tensorboard');
  await expect(open).toBeEnabled({ timeout: 2 * MINUTE });
  await open.click();

  const panel = page.locator('.tfos-TensorBoardPanel');
  await expect(panel).toBeVisible();
  const board = page.frameLocator('.tfos-TensorBoardPanel iframe');
  const card = board.locator('scalar-card', { hasText: 'epoch_loss' }).first();
  await expect(card).toBeVisible({ timeout: 4 * MINUTE });
  await expect(card.locator('line-chart')).toBeVisible();

  await expect(row.locator('.tfos-RunRow-state')).toHaveText('finished', { timeout: 4 * MINUTE });
  await expect(row.locator('.tfos-RunRow-stop')).toBeDisabled();
  await page.waitForTimeout(1500); // the chart's last points
  await page.screenshot({
    path:
      process.env.TFOS_UI_SCREENSHOT ??
      path.resolve(__dirname, '..', '..', '..', 'docs', 'labextension.png')
  });

  // A long run, stopped from the sidebar: the kernel that owns it stops it.
  await page.notebook.activate('train.ipynb');
  await page.notebook.runCell(2);
  const long = sidebar.locator('.tfos-RunRow', { hasText: LONG_RUN });
  await expect(long.locator('.tfos-RunRow-state')).toHaveText('running', { timeout: 2 * MINUTE });
  await expect(long.locator('.tfos-RunRow-tensorboard')).toBeDisabled(); // --no-tensorboard
  await long.locator('.tfos-RunRow-stop').click();
  await expect(long.locator('.tfos-RunRow-state')).toHaveText('stopped', { timeout: MINUTE });
  await expect(long.locator('.tfos-RunRow-stop')).toBeDisabled();

  // The TensorBoard button of a run whose panel is open brings that panel back to the front.
  await open.click();
  await expect(page.locator('.tfos-TensorBoardPanel')).toHaveCount(1);
  await expect(panel).toBeVisible();

  // After a reload the layout restorer re-opens the run's TensorBoard panel (with its tab).
  // (a plain reload: Galata's page.reload() waits for conditions of its own test layout)
  const reloaded = page.waitForEvent('load');
  await page.evaluate(() => window.location.reload());
  await reloaded;
  await page.waitForFunction(() => (window as any).jupyterapp?.restored, null, { timeout: MINUTE });
  await page.evaluate(() => (window as any).jupyterapp.restored);
  await expect(page.locator('.tfos-TensorBoardPanel')).toHaveCount(1, { timeout: MINUTE });
  await page.locator('.lm-TabBar-tab', { hasText: `TensorBoard: ${RUN}` }).click();
  await expect(board.locator('scalar-card').first()).toBeVisible({ timeout: 2 * MINUTE });
});

test('the runs sidebar says so when the server has no tfos_notebook extension', async ({
  page
}) => {
  // What a Jupyter server without the extension answers under its path: its own HTML 404 page.
  await page.route('**/tfos-notebook/api/**', route =>
    route.fulfill({
      status: 404,
      contentType: 'text/html',
      body: '<html><body>404 : Not Found</body></html>'
    })
  );
  await page.evaluate(() => (window as any).jupyterapp.commands.execute('tfos:open-runs'));
  const message = page.locator('#tfos-runs-sidebar .tfos-RunsSidebar-message');
  await expect(message).toContainText('The tfos_notebook server extension is not enabled');
  await expect(message).toContainText('jupyter server extension enable tfos_notebook.server');
  await expect(page.locator('#tfos-runs-sidebar .tfos-RunRow')).toHaveCount(0);
});
