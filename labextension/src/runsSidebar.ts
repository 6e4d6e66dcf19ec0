import {
  clearIcon,
  LabIcon,
  launchIcon,
  refreshIcon,
  SidePanel,
  stopIcon,
  ToolbarButton
} from '@jupyterlab/ui-components';
import { Poll } from '@lumino/polling';
import { ISignal, Signal } from '@lumino/signaling';
import { Panel, Widget } from '@lumino/widgets';

import { RunsApi } from './api';
import { RunsApiError } from './errors';
import { formatDuration, sparkline } from './sparkline';
import { IRun, IRunPace, RUNS_SIDEBAR_ID } from './tokens';

/** `12.3 steps/s · 394 examples/s · ETA 0:42` (on an ended run: its totals and average rates). */
export function paceText(pace: IRunPace, ended: boolean): string {
  const rate = (value: number | undefined, unit: string) =>
    value
      ? `${value >= 10000 ? `${(value / 1000).toFixed(1)}k` : value.toPrecision(3)} ${unit}/s`
      : '';
  return [
    pace.epochs ? `epoch ${pace.epoch}/${pace.epochs}` : '',
    ended && pace.steps ? `${pace.steps} steps` : '',
    rate(pace.steps_per_sec, 'steps'),
    rate(pace.examples_per_sec, 'examples'),
    !ended && pace.eta !== undefined ? `ETA ${formatDuration(pace.eta)}` : ''
  ]
    .filter(Boolean)
    .join(' · ');
}

/** `attempt 2 (decommission)`: how often the run was relaunched and why, last (empty: never). */
export function attemptsLabel(attempts: string[]): string {
  const ended = attempts.filter(line => / ended: /.test(line));
  if (!ended.length) {
    return '';
  }
  const why = ended[ended.length - 1].split(' ended: ')[1].split(',')[0];
  return `attempt ${ended.length + 1} (${why})`;
}

/** `2 nodes` (`1 node`). */
function nodesLabel(count: number): string {
  return `${count} node${count === 1 ? '' : 's'}`;
}

/**
 * `3/6 trials · 1 pruned · 2 failed`: a sweep's trials done (complete, pruned or failed) of those
 * asked, from its record's counts; no pruned or failed part when there are none, and nothing
 * before the sweep recorded its counts.
 */
export function sweepLabel(metrics: Record<string, number>): string {
  const count = (key: string) => metrics[key] ?? 0;
  const done = count('complete') + count('pruned') + count('failed');
  return [
    metrics.trials !== undefined ? `${done}/${metrics.trials} trials` : '',
    count('pruned') ? `${count('pruned')} pruned` : '',
    count('failed') ? `${count('failed')} failed` : ''
  ]
    .filter(Boolean)
    .join(' · ');
}

/**
 * The values of a row's metrics line: a sweep's best trial value (`best loss 0.123`, not its
 * counts), an evaluation's metrics, or else the run's last loss.
 */
export function metricsLabels(run: IRun): string[] {
  const entries = Object.entries(run.metrics ?? {}).filter(
    ([key]) => run.kind !== 'sweep' || key.startsWith('best ')
  );
  if (entries.length || run.kind === 'sweep') {
    return entries.map(([key, value]) => `${key} ${value.toPrecision(3)}`);
  }
  return [run.loss !== null ? `loss ${run.loss.toPrecision(3)}` : ''];
}

/**
 * The listed run that `run` is listed under: the run an evaluation evaluates, or the sweep a trial
 * belongs to (undefined when that record is gone: the run stands on its own).
 */
function listedUnder(run: IRun, byId: ReadonlyMap<string, IRun>): IRun | undefined {
  const parent = run.parent ? byId.get(run.parent) : undefined;
  return parent && parent !== run && (run.kind === 'evaluation' || parent.kind === 'sweep')
    ? parent
    : undefined;
}

/**
 * The runs in the order the sidebar lists them (otherwise as given, newest first): each
 * evaluation right after the run it evaluates, and each sweep's trials right after the sweep
 * (with their own evaluations after each).
 */
export function orderRuns(runs: readonly IRun[]): IRun[] {
  const byId = new Map(runs.map(run => [run.run_id, run]));
  const withOwn = (run: IRun): IRun[] => [
    run,
    ...runs.filter(other => listedUnder(other, byId) === run).flatMap(withOwn)
  ];
  return runs.filter(run => !listedUnder(run, byId)).flatMap(withOwn);
}

/** Whether `run` is a trial of a sweep that is listed (`byId`: the listed runs by id). */
export function isListedTrial(run: IRun, byId: ReadonlyMap<string, IRun>): boolean {
  return run.kind !== 'evaluation' && listedUnder(run, byId)?.kind === 'sweep';
}

/** What the sidebar's buttons ask of the plugin. */
export interface IRunActions {
  openTensorBoard(run: IRun): void;
  stop(run: IRun): Promise<void>;
  clearEnded(): Promise<void>;
}

/**
 * The left-area list of runs: name, state, a findings badge, node count and elapsed time, last
 * step and loss with a small loss curve, and the actions that apply (TensorBoard while the run has
 * one, Stop while it goes on); a sweep shows its trials done and its best value, its trials listed
 * right below it. Its toolbar refreshes the list and clears the ended runs. Polls the REST API
 * while it is visible, every `pollInterval` milliseconds; says so plainly when the server has no
 * tfos_notebook extension.
 */
export class RunsSidebar extends SidePanel {
  private readonly list = document.createElement('ul');
  private readonly message = document.createElement('div');
  private readonly clear: ToolbarButton;
  private readonly poll: Poll;
  private readonly changed = new Signal<this, readonly IRun[]>(this);
  private _runs: IRun[] = [];
  private fetches = 0; // the latest fetch's number: an older one's answer is stale

  constructor(
    private readonly api: RunsApi,
    private readonly actions: IRunActions,
    pollInterval: number
  ) {
    super({ content: new Panel() });
    this.id = RUNS_SIDEBAR_ID;
    this.addClass('tfos-RunsSidebar');
    this.title.caption = 'TFOS runs';
    const heading = new Widget({ node: document.createElement('h2') });
    heading.node.textContent = 'TFOS runs';
    this.header.addWidget(heading);
    this.clear = new ToolbarButton({
      icon: clearIcon,
      label: 'Clear ended',
      className: 'tfos-RunsSidebar-clear',
      tooltip: 'Remove the finished, failed, stopped and lost runs from the list',
      enabled: false,
      onClick: async () => {
        this.clear.enabled = false;
        await this.actions.clearEnded();
        await this.refresh();
      }
    });
    const refresh = new ToolbarButton({
      icon: refreshIcon,
      className: 'tfos-RunsSidebar-refresh',
      tooltip: 'Fetch the runs now',
      onClick: () => void this.poll.refresh()
    });
    this.toolbar.addItem('refresh', refresh);
    this.toolbar.addItem('clear', this.clear);
    const body = new Widget();
    body.addClass('tfos-RunsSidebar-body');
    this.message.className = 'tfos-RunsSidebar-message';
    this.list.className = 'tfos-RunsSidebar-list';
    body.node.append(this.message, this.list);
    this.addWidget(body);
    this.poll = new Poll({
      factory: () => this.refresh(),
      frequency: { interval: pollInterval, backoff: true, max: 30 * pollInterval },
      // Idle while the sidebar is collapsed or the browser tab hidden.
      standby: () => !this.isVisible || 'when-hidden'
    });
  }

  /** Emitted with the runs after each fetch. */
  get runsChanged(): ISignal<this, readonly IRun[]> {
    return this.changed;
  }

  /** Poll every `interval` milliseconds from now on (backing off up to 30 times that). */
  set pollInterval(interval: number) {
    this.poll.frequency = { interval, backoff: true, max: 30 * interval };
  }

  /** The runs as last fetched, newest first. */
  get runs(): readonly IRun[] {
    return this._runs;
  }

  /** Fetch the runs now and redraw. */
  async refresh(): Promise<void> {
    const fetch = ++this.fetches;
    try {
      const runs = await this.api.listRuns();
      if (fetch !== this.fetches) {
        return; // a later fetch (after Clear ended, say) draws the list
      }
      this._runs = runs;
      this.showMessage(
        this._runs.length ? '' : 'No runs yet: start one with %%tfos_train in a notebook.'
      );
    } catch (error) {
      if (fetch !== this.fetches) {
        return;
      }
      this._runs = [];
      this.changed.emit(this._runs);
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
    this.changed.emit(this._runs);
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

  /** The runs in order: evaluations after their run, a sweep's trials after the sweep. */
  private render(): void {
    const byId = new Map(this._runs.map(run => [run.run_id, run]));
    this.list.replaceChildren(
      ...orderRuns(this._runs).map(run => this.row(run, isListedTrial(run, byId)))
    );
    this.clear.enabled = this._runs.some(run => run.ended);
  }

  /** A run's row; `trial`: a trial listed under its sweep (indented). */
  private row(run: IRun, trial = false): HTMLLIElement {
    const item = document.createElement('li');
    item.className = `tfos-RunRow tfos-mod-${run.state} tfos-mod-${run.kind ?? 'training'}`;
    item.classList.toggle('tfos-mod-trial', trial);
    item.dataset.runId = run.run_id;
    const sweep = run.kind === 'sweep';
    const name = document.createElement('span');
    name.className = 'tfos-RunRow-name';
    name.textContent = run.name;
    name.title = sweep
      ? `${run.run_id} · a sweep of ${nodesLabel(run.num_nodes)} trials on ${run.host}`
      : `${run.run_id} · ${run.roles.join(', ')} on ${run.host}`;
    const state = document.createElement('span');
    state.className = 'tfos-RunRow-state';
    state.textContent = run.state;
    if (run.error) {
      state.title = run.error;
    }
    if (run.findings) {
      const badge = document.createElement('span');
      badge.className = 'tfos-RunRow-findings';
      badge.textContent = `${run.findings} finding${run.findings > 1 ? 's' : ''}`;
      badge.title = 'Diagnoses the run raised: its monitor in the notebook lists them with fixes';
      state.append(badge);
    }
    const details = document.createElement('span');
    details.className = 'tfos-RunRow-details';
    const end = run.ended_at ?? (run.ended ? null : Date.now() / 1000);
    details.textContent = [
      run.kind === 'evaluation' ? 'evaluation' : sweep ? 'sweep' : nodesLabel(run.num_nodes),
      sweep ? sweepLabel(run.metrics ?? {}) : '',
      run.started_at !== null && end !== null ? formatDuration(end - run.started_at) : '',
      attemptsLabel(run.attempts ?? [])
    ]
      .filter(Boolean)
      .join(' · ');
    if (run.attempts?.length) {
      details.title = run.attempts.join('\n');
    }
    const curve = document.createElement('span');
    curve.className = 'tfos-RunRow-curve';
    const line = sparkline(run.curve ?? []);
    if (line) {
      curve.append(line);
    }
    const metrics = document.createElement('span');
    metrics.className = 'tfos-RunRow-metrics';
    metrics.textContent = [run.step !== null ? `step ${run.step}` : '', ...metricsLabels(run)]
      .filter(Boolean)
      .join('  ');
    // Only the actions that apply: TensorBoard while the run has one, Stop while it goes on (an
    // evaluation's curves are in its run's TensorBoard, and it is stopped from its notebook). A
    // sweep has the same ones: its one TensorBoard, and Stop, carried out by the kernel that owns
    // it (no trial starts, the running ones stop).
    const actions = document.createElement('span');
    actions.className = 'tfos-RunRow-actions';
    const actionable = run.kind !== 'evaluation'; // a training run or a sweep
    if (actionable && run.tensorboard_url) {
      const open = this.button('TensorBoard', launchIcon, 'tfos-RunRow-tensorboard', () =>
        this.actions.openTensorBoard(run)
      );
      open.title = sweep
        ? "Open the sweep's TensorBoard (all its trials)"
        : "Open the run's TensorBoard";
      actions.append(open);
    }
    if (actionable && run.mlflow_url) {
      actions.append(this.mlflowLink(run, run.mlflow_url));
    }
    if (actionable && !run.ended) {
      const stop = this.button('Stop', stopIcon, 'tfos-RunRow-stop', async () => {
        stop.disabled = true;
        await this.actions.stop(run);
        await this.refresh();
      });
      if (sweep) {
        stop.title = 'Stop the sweep: no trial starts and the running ones stop';
      }
      actions.append(stop);
    }
    item.append(name, state, details, curve, metrics, ...this.pace(run), actions);
    return item;
  }

  /** A link to the run's MLflow run, opened in a new browser tab (the MLflow UI is its own app). */
  private mlflowLink(run: IRun, url: string): HTMLAnchorElement {
    const link = document.createElement('a');
    link.className = 'jp-mod-styled tfos-RunRow-mlflow';
    link.textContent = 'MLflow';
    link.href = url;
    link.target = '_blank';
    link.rel = 'noopener';
    link.title = run.mlflow_error
      ? `The run's MLflow run (MLflow: ${run.mlflow_error})`
      : `The run's MLflow run ${run.mlflow_run_id ?? ''}`;
    return link;
  }

  /** The run's progress bar (where the nodes say how far they are) and its pace line. */
  private pace(run: IRun): HTMLElement[] {
    const pace = run.pace ?? {};
    const text = paceText(pace, run.ended);
    if (!text) {
      return [];
    }
    const line = document.createElement('span');
    line.className = 'tfos-RunRow-pace';
    line.textContent = text;
    if (pace.fraction === undefined) {
      return [line];
    }
    const bar = document.createElement('progress');
    bar.className = 'tfos-RunRow-progress';
    bar.max = 1;
    bar.value = pace.fraction;
    bar.title = `${Math.round(pace.fraction * 100)}% done`;
    return [bar, line];
  }

  /** A row's action: its icon (the toolkit's) before its label. */
  private button(
    label: string,
    icon: LabIcon,
    className: string,
    onClick: () => void
  ): HTMLButtonElement {
    const button = document.createElement('button');
    button.className = `jp-mod-styled ${className}`;
    button.append(icon.element({ tag: 'span', className: 'tfos-RunRow-icon' }), label);
    button.addEventListener('click', onClick);
    return button;
  }
}
