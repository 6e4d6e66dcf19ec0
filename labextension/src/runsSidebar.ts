import { Poll } from '@lumino/polling';
import { Widget } from '@lumino/widgets';

import { RunsApi } from './api';
import { RunsApiError } from './errors';
import { IRun, POLL_INTERVAL_MS, RUNS_SIDEBAR_ID } from './tokens';

/** What the sidebar's buttons ask of the plugin. */
export interface IRunActions {
  openTensorBoard(run: IRun): void;
  stop(run: IRun): Promise<void>;
}

/**
 * The left-area list of runs: name, state, last step and loss, and the actions open TensorBoard
 * and stop. Polls the REST API while it is visible; says so plainly when the server has no
 * tfos_notebook extension.
 */
export class RunsSidebar extends Widget {
  private readonly list = document.createElement('ul');
  private readonly message = document.createElement('div');
  private readonly poll: Poll;
  private _runs: IRun[] = [];

  constructor(
    private readonly api: RunsApi,
    private readonly actions: IRunActions
  ) {
    super();
    this.id = RUNS_SIDEBAR_ID;
    this.addClass('tfos-RunsSidebar');
    this.title.caption = 'TFOS runs';
    const header = document.createElement('h2');
    header.textContent = 'TFOS runs';
    this.message.className = 'tfos-RunsSidebar-message';
    this.list.className = 'tfos-RunsSidebar-list';
    this.node.append(header, this.message, this.list);
    this.poll = new Poll({
      factory: () => this.refresh(),
      frequency: { interval: POLL_INTERVAL_MS, backoff: true, max: 30 * POLL_INTERVAL_MS },
      // Idle while the sidebar is collapsed or the browser tab hidden.
      standby: () => !this.isVisible || 'when-hidden'
    });
  }

  /** The runs as last fetched, newest first. */
  get runs(): readonly IRun[] {
    return this._runs;
  }

  /** Fetch the runs now and redraw. */
  async refresh(): Promise<void> {
    try {
      this._runs = await this.api.listRuns();
      this.showMessage(
        this._runs.length ? '' : 'No runs yet: start one with %%tfos_train in a notebook.'
      );
    } catch (error) {
      this._runs = [];
      this.showMessage(
        error instanceof RunsApiError ? error.message : `Cannot reach the runs API: ${error}`,
        true
      );
      this.render();
      if (error instanceof RunsApiError && error.serverExtensionMissing) {
        return; // nothing will change until the server restarts: no backoff noise
      }
      throw error; // the poll backs off
    }
    this.render();
  }

  protected onAfterShow(): void {
    void this.poll.refresh();
  }

  dispose(): void {
    this.poll.dispose();
    super.dispose();
  }

  private showMessage(text: string, isError = false): void {
    this.message.textContent = text;
    this.message.hidden = !text;
    this.message.classList.toggle('tfos-mod-error', isError);
  }

  private render(): void {
    this.list.replaceChildren(...this._runs.map(run => this.row(run)));
  }

  private row(run: IRun): HTMLLIElement {
    const item = document.createElement('li');
    item.className = `tfos-RunRow tfos-mod-${run.state}`;
    item.dataset.runId = run.run_id;
    const name = document.createElement('span');
    name.className = 'tfos-RunRow-name';
    name.textContent = run.name;
    name.title = `${run.run_id} · ${run.roles.join(', ')} on ${run.host}`;
    const state = document.createElement('span');
    state.className = 'tfos-RunRow-state';
    state.textContent = run.state;
    if (run.error) {
      state.title = run.error;
    }
    const metrics = document.createElement('span');
    metrics.className = 'tfos-RunRow-metrics';
    metrics.textContent = [
      run.step !== null ? `step ${run.step}` : '',
      run.loss !== null ? `loss ${run.loss.toPrecision(3)}` : ''
    ]
      .filter(Boolean)
      .join('  ');
    const open = this.button('TensorBoard', 'tfos-RunRow-tensorboard', () =>
      this.actions.openTensorBoard(run)
    );
    open.disabled = !run.tensorboard_url;
    open.title = run.tensorboard_url ? "Open the run's TensorBoard" : 'This run has no TensorBoard';
    const stop = this.button('Stop', 'tfos-RunRow-stop', async () => {
      stop.disabled = true;
      await this.actions.stop(run);
      await this.refresh();
    });
    stop.disabled = run.ended;
    const actions = document.createElement('span');
    actions.className = 'tfos-RunRow-actions';
    actions.append(open, stop);
    item.append(name, state, metrics, actions);
    return item;
  }

  private button(label: string, className: string, onClick: () => void): HTMLButtonElement {
    const button = document.createElement('button');
    button.className = `jp-mod-styled ${className}`;
    button.textContent = label;
    button.addEventListener('click', onClick);
    return button;
  }
}
