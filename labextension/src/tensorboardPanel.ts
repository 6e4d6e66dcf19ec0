import { IFrame, MainAreaWidget } from '@jupyterlab/apputils';

import {
  IRun,
  LIVE_RELOAD_MS,
  TENSORBOARD_DASHBOARD,
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
 * panel is visible it presses TensorBoard's own reload button every `LIVE_RELOAD_MS`: the frame
 * is same-origin (behind jupyter-server-proxy), and without the button (another TensorBoard
 * release) the panel just falls back to TensorBoard's own period. A page opened before the run
 * wrote anything ("No dashboards are active") shows the run's dashboards on the next press.
 */
export class TensorBoardPanel extends MainAreaWidget<IFrame> {
  /** The run shown; the restorer re-opens the panel from it after a reload. */
  readonly runId: string;
  private readonly timer: number;

  constructor(run: IRun, url: string) {
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
    this.timer = window.setInterval(() => this.reload(), LIVE_RELOAD_MS);
  }

  /** Ask TensorBoard's page to fetch its data now (when visible and loaded). */
  reload(): void {
    if (!this.isVisible || document.hidden) {
      return;
    }
    const frame = this.content.node.querySelector('iframe');
    let button: HTMLButtonElement | null | undefined;
    try {
      button = frame?.contentDocument?.querySelector<HTMLButtonElement>(TENSORBOARD_RELOAD_BUTTON);
    } catch {
      return; // not same-origin (a TensorBoard outside the proxy): its own period applies
    }
    // While TensorBoard is still loading (its button spins), a press would restart the load: on a
    // busy machine the page would then never finish one.
    if (button && !button.disabled && !button.classList.contains(TENSORBOARD_LOADING)) {
      button.click();
    }
  }

  dispose(): void {
    window.clearInterval(this.timer);
    super.dispose();
  }
}
