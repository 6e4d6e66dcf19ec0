import { IFrame, MainAreaWidget } from '@jupyterlab/apputils';
import { Poll } from '@lumino/polling';

import {
  IRun,
  ITfosSettings,
  TENSORBOARD_DASHBOARD,
  TENSORBOARD_GROUP,
  TENSORBOARD_GROUP_FOLDED,
  TENSORBOARD_GROUP_TITLE,
  TENSORBOARD_GROUP_TOGGLE,
  TENSORBOARD_LOADING,
  TENSORBOARD_RELOAD_BUTTON,
  TENSORBOARD_SANDBOX
} from './tokens';

/**
 * A run's TensorBoard in the main area: an iframe on its proxy URL at the Time Series dashboard,
 * titled by the run's name.
 *
 * TensorBoard's page re-fetches its data every 30 s at best (its settings refuse a shorter
 * period), while the driver's TensorBoard has a new point within about a second. So while the
 * panel is visible it presses TensorBoard's own reload button every `liveReloadInterval`
 * milliseconds (the settings' `liveReload` turns this off): the frame is same-origin (behind
 * jupyter-server-proxy), and without the button (another TensorBoard release) the panel just falls
 * back to TensorBoard's own period. A page opened before the run
 * wrote anything ("No dashboards are active") shows the run's dashboards on the next press.
 *
 * The Time Series dashboard opens the first two tag groups of its first load that has any and
 * folds every group that appears later: in a panel opened as the run starts, a scalar the nodes
 * begin to write later would draw nothing until someone unfolds it. So the panel unfolds each
 * group that appears after the first ones it saw, once (a group the person folds stays folded).
 */
export class TensorBoardPanel extends MainAreaWidget<IFrame> {
  /** The run shown; the restorer re-opens the panel from it after a reload. */
  readonly runId: string;
  /** Presses the reload button; standing by while the panel is hidden or not live. */
  private readonly poll: Poll;
  private live: boolean;
  /** The tag groups TensorBoard's page has shown, by name; undefined until it showed some. */
  private groups: Set<string> | undefined;

  constructor(run: IRun, url: string, settings: Readonly<ITfosSettings>) {
    const content = new IFrame({
      sandbox: [...TENSORBOARD_SANDBOX],
      referrerPolicy: 'same-origin'
    });
    content.url = url + TENSORBOARD_DASHBOARD;
    content.addClass('tfos-TensorBoard-frame');
    super({ content });
    this.runId = run.run_id;
    this.id = `tfos-tensorboard-${run.run_id}`;
    this.addClass('tfos-TensorBoardPanel');
    this.title.label = `TensorBoard: ${run.name}`;
    this.title.caption = `TensorBoard of run ${run.name} (${run.run_id})\n${url}`;
    this.title.closable = true;
    this.live = settings.liveReload;
    this.poll = new Poll({
      factory: async () => this.reload(),
      frequency: { interval: settings.liveReloadInterval, backoff: false },
      standby: () => !this.live || !this.isVisible || 'when-hidden'
    });
  }

  /** Follow changed settings: live or not, and the reload period. */
  configure(settings: Readonly<ITfosSettings>): void {
    this.live = settings.liveReload;
    this.poll.frequency = { ...this.poll.frequency, interval: settings.liveReloadInterval };
  }

  /** Ask TensorBoard's page to fetch its data now (once it is loaded). */
  reload(): void {
    const frame = this.content.node.querySelector('iframe');
    let page: Document | null | undefined;
    try {
      page = frame?.contentDocument;
    } catch {
      return; // not same-origin (a TensorBoard outside the proxy): its own period applies
    }
    if (!page) {
      return;
    }
    this.unfoldNewGroups(page);
    const button = page.querySelector<HTMLButtonElement>(TENSORBOARD_RELOAD_BUTTON);
    // While TensorBoard is still loading (its button spins), a press would restart the load: on a
    // busy machine the page would then never finish one.
    if (button && !button.disabled && !button.classList.contains(TENSORBOARD_LOADING)) {
      button.click();
    }
  }

  /** Unfold the tag groups that appeared since the first ones seen (each once). */
  private unfoldNewGroups(page: Document): void {
    const shown = [...page.querySelectorAll(TENSORBOARD_GROUP)].map(toolbar => ({
      toolbar,
      name: toolbar.querySelector(TENSORBOARD_GROUP_TITLE)?.textContent?.trim() ?? ''
    }));
    if (this.groups === undefined) {
      // TensorBoard's own choice for its first groups: left as it is.
      this.groups = shown.length ? new Set(shown.map(group => group.name)) : undefined;
      return;
    }
    for (const { toolbar, name } of shown) {
      if (!this.groups.has(name)) {
        this.groups.add(name);
        if (toolbar.querySelector(TENSORBOARD_GROUP_FOLDED)) {
          toolbar.querySelector<HTMLButtonElement>(TENSORBOARD_GROUP_TOGGLE)?.click();
        }
      }
    }
  }

  dispose(): void {
    this.poll.dispose();
    super.dispose();
  }
}
