// The document of the notebook's TensorBoard frame (an iframe's srcdoc, so that it runs where core
// ipywidgets render HTML: JupyterLab, Notebook 7, VS Code, Databricks). TENSORBOARD_URL is set by
// panel.py. TensorBoard's page lists its dashboards once, at load, and re-fetches data every 30 s
// at best, so this document opens TensorBoard only once the run has event files (its /data/runs
// is not empty) and then presses TensorBoard's own reload button every second while the page is
// visible, unless a load is under way; it unfolds each tag group that appears after the first
// ones it saw, once (TensorBoard folds groups that appear after its first load). It reaches into
// TensorBoard's page only when that page is on the notebook's origin (jupyter-server-proxy, the
// Databricks driver proxy); elsewhere TensorBoard opens at once and keeps its own period.
(function () {
  'use strict';
  const base = TENSORBOARD_URL;
  const waiting = document.getElementById('tfos-waiting');
  let frame = null;
  let groups = null;

  function open() {
    frame = document.createElement('iframe');
    frame.src = base + '#timeseries';
    frame.title = 'TensorBoard';
    document.body.appendChild(frame);
    waiting.remove();
  }

  async function hasRuns() {
    try {
      const answer = await fetch(base + 'data/runs', { credentials: 'same-origin' });
      return answer.ok ? (await answer.json()).length > 0 : false;
    } catch (error) {
      return null; // another origin: TensorBoard cannot be asked from here
    }
  }

  async function openWhenReady() {
    if ((await hasRuns()) === false) {
      setTimeout(openWhenReady, 1000);
    } else {
      open();
    }
  }

  function unfoldNewGroups(page) {
    const shown = [...page.querySelectorAll('metrics-card-group-toolbar')].map(toolbar => ({
      toolbar,
      name: (toolbar.querySelector('.group-title')?.textContent ?? '').trim()
    }));
    if (groups === null) {
      groups = shown.length ? new Set(shown.map(group => group.name)) : null;
      return;
    }
    for (const { toolbar, name } of shown) {
      if (!groups.has(name)) {
        groups.add(name);
        if (toolbar.querySelector('mat-icon[svgicon="expand_more_24px"]')) {
          toolbar.querySelector('button.group-toolbar')?.click();
        }
      }
    }
  }

  function reload() {
    if (frame === null || document.hidden) {
      return;
    }
    let page = null;
    try {
      page = frame.contentDocument;
    } catch (error) {
      return;
    }
    if (!page) {
      return;
    }
    unfoldNewGroups(page);
    const button = page.querySelector('app-header-reload button.reload-button');
    if (button && !button.disabled && !button.classList.contains('loading')) {
      button.click();
    }
  }

  openWhenReady();
  setInterval(reload, 1000);
})();
