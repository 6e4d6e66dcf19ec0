/**
 * A sweep from a notebook in JupyterLab: the runs sidebar lists the sweep with its trials done and
 * its best value, and its trials right below it; a long sweep is stopped from the sidebar (the
 * kernel that owns it stops it and its running trial).
 */
import { expect, test } from '@jupyterlab/galata';

import { notebook } from './notebookFile';

const MINUTE = 60 * 1000;

const SETUP_CELL = `%load_ext tfos_notebook
from tfos_notebook.examples.sweep_trial import trial as trial_fn
space = {"lr": [0.01, 0.02, 0.5], "optimizer": ["adam"], "steps": 3, "step_secs": 0.2, "fail_above": 0.4}
long_space = {"lr": (0.001, 0.1, "log"), "optimizer": ["adam"], "steps": 3000, "step_secs": 0.1}`;

// Three trials of 2 nodes, one at a time on the notebook's local Spark; lr 0.5 fails.
const SWEEP_CELL = `%%tfos_sweep --space space --trials 3 --parallel 1 --sampler grid --pruner none --name ui_sweep --no-tensorboard
return trial_fn(args, ctx)`;

const LONG_CELL = `%%tfos_sweep --space long_space --trials 4 --parallel 1 --name ui_long_sweep --no-tensorboard --monitor none
return trial_fn(args, ctx)`;

test('a sweep shows in the runs sidebar with its trials below it and is stopped from there', async ({
  page,
  tmpPath
}) => {
  test.setTimeout(6 * MINUTE);
  const file = `${tmpPath}/sweep.ipynb`;
  await page.contents.uploadContent(notebook(SETUP_CELL, SWEEP_CELL, LONG_CELL), 'text', file);
  await page.notebook.openByPath(file);
  await page.notebook.activate('sweep.ipynb');
  await page.notebook.runCell(0);
  await page.notebook.runCell(1);

  await page.evaluate(() => (window as any).jupyterapp.commands.execute('tfos:open-runs'));
  const sidebar = page.locator('#tfos-runs-sidebar');
  const sweep = sidebar.locator('.tfos-RunRow.tfos-mod-sweep', { hasText: 'ui_sweep' });
  await expect(sweep.locator('.tfos-RunRow-state')).toHaveText('finished', { timeout: 3 * MINUTE });
  await expect(sweep.locator('.tfos-RunRow-details')).toContainText(
    'sweep · 3/3 trials · 1 failed'
  );
  await expect(sweep.locator('.tfos-RunRow-metrics')).toContainText('best loss');
  await expect(sweep.locator('.tfos-RunRow-stop')).toHaveCount(0);
  // The trials right below their sweep, marked as its trials.
  const names = await sidebar.locator('.tfos-RunRow .tfos-RunRow-name').allTextContents();
  const at = names.indexOf('ui_sweep');
  expect(names.slice(at + 1, at + 4).sort()).toEqual([
    'ui_sweep/trial-000',
    'ui_sweep/trial-001',
    'ui_sweep/trial-002'
  ]);
  await expect(sidebar.locator('.tfos-RunRow.tfos-mod-trial')).toHaveCount(3);

  // A long sweep, stopped from the sidebar: its running trial stops with it.
  await page.notebook.runCell(2);
  const long = sidebar.locator('.tfos-RunRow.tfos-mod-sweep', { hasText: 'ui_long_sweep' });
  await expect(long.locator('.tfos-RunRow-state')).toHaveText('running', { timeout: 2 * MINUTE });
  const trial = sidebar.locator('.tfos-RunRow.tfos-mod-trial', {
    hasText: 'ui_long_sweep/trial-000'
  });
  await expect(trial.locator('.tfos-RunRow-state')).toHaveText('running', { timeout: 2 * MINUTE });
  await long.locator('.tfos-RunRow-stop').click();
  await expect(long.locator('.tfos-RunRow-state')).toHaveText('stopped', { timeout: MINUTE });
  await expect(trial.locator('.tfos-RunRow-state')).toHaveText('stopped', { timeout: MINUTE });
  await expect(long.locator('.tfos-RunRow-details')).toContainText('sweep · 0/4 trials');
});
