/**
 * Galata's Playwright settings, with Debian's chromium (Playwright cannot download its own
 * browsers here) and a JupyterLab started for the run on $TFOS_UI_PORT (default 8888).
 */
const baseConfig = require('@jupyterlab/galata/lib/playwright-config');

const port = process.env.TFOS_UI_PORT || '8888';
const chromium = process.env.CHROMIUM || '/usr/bin/chromium';

module.exports = {
  ...baseConfig,
  timeout: 8 * 60 * 1000,
  retries: 0,
  workers: 1,
  reporter: [['list']],
  use: {
    ...baseConfig.use,
    baseURL: `http://127.0.0.1:${port}`,
    viewport: { width: 1400, height: 900 },
    launchOptions: {
      executablePath: chromium,
      args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking']
    },
    trace: 'off',
    video: 'off'
  },
  webServer: {
    command: 'jupyter lab --config jupyter_server_test_config.py',
    url: `http://127.0.0.1:${port}/lab`,
    timeout: 120 * 1000,
    reuseExistingServer: false,
    stdout: 'pipe',
    stderr: 'pipe'
  }
};
