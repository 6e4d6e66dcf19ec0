import { IFrame, MainAreaWidget } from '@jupyterlab/apputils';

import {
  EMPTY_RELOAD_MS,
  IRun,
  LIVE_RELOAD_MS,
  TENSORBOARD_NO_DATA,
  TENSORBOARD_RELOAD_BUTTON,
  TENSORBOARD_SANDBOX
} from './tokens';

/**
 * A run's TensorBoard in the main area: an iframe on its proxy URL, titled by the run's name.
 *
 * TensorBoard's page re-fetches its data every 30 s at best (its settings refuse a shorter
 * period), while the driver's TensorBoard has a new point within about a second. So while the
 * panel is visible it presses TensorBoard's own reload button every `LIVE_RELOAD_MS`: the frame
 * is same-origin (behind jupyter-server-proxy), and without the button (another TensorBoard
 * release) the panel just falls back to TensorBoard's own period. A page loaded before the run
 * wrote anything says "No dashboards are active" and stays so on a data reload: that page is
 * loaded afresh instead, at most every `EMPTY_RELOAD_MS`.
 */
export class TensorBoardPanel extends MainAreaWidget<IFrame> {
  /** The run shown; the restorer re-opens the panel from it after a reload. */
  readonly runId: string;
  private readonly timer: number;
  private lastPageLoad = Date.now();

  constructor(run: IRun, url: string) {
    const content = new IFrame({
      sandbox: [...TENSORBOARD_SANDBOX],
      referrerPolicy: 'same-origin'
    });
    content.url = url;
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
    let page: Document | null | undefined;
    try {
      page = frame?.contentDocument;
    } catch {
      return; // not same-origin (a TensorBoard outside the proxy): its own period applies
    }
    if (!page || page.readyState !== 'complete') {
      return;
    }
    const empty = [...page.querySelectorAll('h3')].some(h =>
      h.textContent?.includes(TENSORBOARD_NO_DATA)
    );
    if (empty) {
      if (Date.now() - this.lastPageLoad >= EMPTY_RELOAD_MS) {
        this.lastPageLoad = Date.now();
        frame?.contentWindow?.location.reload();
      }
      return;
    }
    const button = page.querySelector<HTMLButtonElement>(TENSORBOARD_RELOAD_BUTTON);
    if (button && !button.disabled) {
      button.click();
    }
  }

  dispose(): void {
    window.clearInterval(this.timer);
    super.dispose();
  }
}
