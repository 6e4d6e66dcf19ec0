/**
 * The extension's service token (`ITfosRuns`), its settings, constants shared by its parts, and the
 * shape of a run as the server sends it.
 */

import { Token } from '@lumino/coreutils';
import { ISignal } from '@lumino/signaling';
import { Widget } from '@lumino/widgets';

/** Path of the server extension's REST API under the server's base URL. */
export const API_PATH = 'tfos-notebook/api';

/**
 * The iframe sandbox exceptions TensorBoard needs: it is a single-page app (scripts) that fetches
 * its data from its own origin, the Jupyter server's, through jupyter-server-proxy (same-origin),
 * and offers CSV/JSON downloads and links to open in a new tab.
 */
export const TENSORBOARD_SANDBOX = [
  'allow-scripts',
  'allow-same-origin',
  'allow-downloads',
  'allow-popups',
  'allow-forms'
] as const;

/**
 * The dashboard a panel opens at. Without one TensorBoard picks the first dashboard with data when
 * the page loads, which for a panel opened as the run starts is Keras's model graph, and keeps it.
 */
export const TENSORBOARD_DASHBOARD = '#timeseries';

/** TensorBoard's own reload button (its page header), pressed to reload the data now. */
export const TENSORBOARD_RELOAD_BUTTON = 'app-header-reload button.reload-button';

/** The class TensorBoard gives its reload button while a load is under way. */
export const TENSORBOARD_LOADING = 'loading';

/** A tag group's header in TensorBoard's Time Series dashboard, its title, and its fold button. */
export const TENSORBOARD_GROUP = 'metrics-card-group-toolbar';
export const TENSORBOARD_GROUP_TITLE = '.group-title';
export const TENSORBOARD_GROUP_TOGGLE = 'button.group-toolbar';

/** The icon of a folded group's header (an open group shows `expand_less_24px`). */
export const TENSORBOARD_GROUP_FOLDED = 'mat-icon[svgicon="expand_more_24px"]';

/** The extension's settings (`schema/plugin.json`, whose defaults these are). */
export interface ITfosSettings {
  /** How often the runs sidebar asks the server for the runs while visible (milliseconds). */
  pollInterval: number;
  /** Whether an open, visible TensorBoard panel reloads TensorBoard's data itself. */
  liveReload: boolean;
  /** How often it does (milliseconds). */
  liveReloadInterval: number;
}

/** The settings until (or without) the settings registry's. */
export const DEFAULT_SETTINGS: Readonly<ITfosSettings> = {
  pollInterval: 2000,
  liveReload: true,
  liveReloadInterval: 1000
};

/** Ids of the extension's commands. */
export namespace CommandIDs {
  export const openRuns = 'tfos:open-runs';
  export const openTensorBoard = 'tfos:open-tensorboard';
  export const stopRun = 'tfos:stop-run';
}

/** Namespace of the TensorBoard panels' tracker (its key in the layout restorer's state). */
export const TENSORBOARD_TRACKER = 'tfos-tensorboard';

/** Id of the runs sidebar (its key in the layout restorer's state). */
export const RUNS_SIDEBAR_ID = 'tfos-runs-sidebar';

/**
 * A run's states, as the registry names them (an evaluation's: waiting, evaluating, then ended; a
 * sweep's: reserving, running, then ended).
 */
export type RunState =
  | 'reserving'
  | 'running'
  | 'relaunching'
  | 'stopping'
  | 'failing'
  | 'finished'
  | 'failed'
  | 'stopped'
  | 'lost'
  | 'waiting'
  | 'evaluating';

/** A run's pace (see `IRun.pace`). */
export interface IRunPace {
  steps_per_sec?: number;
  examples_per_sec?: number;
  fraction?: number;
  eta?: number;
  epoch?: number;
  epochs?: number;
  steps?: number;
  examples?: number;
}

/** One run of the registry, as `GET tfos-notebook/api/runs` sends it. */
export interface IRun {
  run_id: string;
  name: string;
  state: RunState;
  /** finished, failed, stopped or lost: nothing left to stop. */
  ended: boolean;
  num_nodes: number;
  roles: string[];
  host: string;
  started_at: number | null;
  ended_at: number | null;
  step: number | null;
  loss: number | null;
  /** `[step, loss]` across the run so far (bounded, thinned evenly). */
  curve: [number, number][];
  /** How many diagnoses the run raised (an evaluation: checkpoints it failed on). */
  findings: number;
  /**
   * `training`, `evaluation` (a `%%tfos_evaluate` of the run `parent`), or `sweep` (a
   * hyperparameter search: its trials are `training` runs whose `parent` is the sweep's `run_id`,
   * named `<sweep name>/trial-NNN`; its `num_nodes` is per trial, and it has one TensorBoard).
   */
  kind: 'training' | 'evaluation' | 'sweep';
  /** The run an evaluation evaluates, or the sweep a trial belongs to (null: neither). */
  parent: string | null;
  /**
   * An evaluation's latest metrics, at `step`; a sweep's trial counts (`complete`, `pruned`,
   * `failed`, `trials` asked) and, once a trial finished, its best value (`best loss`, say).
   */
  metrics: Record<string, number>;
  error: string | null;
  /**
   * How the run goes, from the nodes' step timing (empty before any step was timed): rates in
   * total, and where the nodes say how far they are `fraction` (0..1), `eta` (seconds), `epoch`
   * (from 1) of `epochs`; once ended, the totals `steps` and `examples` with average rates.
   */
  pace?: IRunPace;
  /** null without a TensorBoard, or when it went with the run's kernel (lost). */
  tensorboard_url: string | null;
  /** The run's MLflow run, when it is logged to MLflow (`%%tfos_train --mlflow`). */
  mlflow_run_id?: string | null;
  /** Its page in the MLflow UI (null for a store no UI serves, such as `sqlite:`). */
  mlflow_url?: string | null;
  /** Why its MLflow logging failed, if it did. */
  mlflow_error?: string | null;
  /** Its relaunches and what led to them (a decommission notice, a lost node), a line each. */
  attempts?: string[];
}

/**
 * The runs the extension lists, and what it does with them: what its plugin provides for other
 * plugins (a status bar item, a command of another extension...) to require.
 */
export interface ITfosRuns {
  /** The runs as last fetched, newest first. */
  readonly runs: readonly IRun[];
  /** Emitted with the runs after each fetch. */
  readonly runsChanged: ISignal<unknown, readonly IRun[]>;
  /** Fetch the runs now. */
  refresh(): Promise<void>;
  /** Open the TensorBoard panel of the run with this id (or focus the open one). */
  openTensorBoard(runId: string): Promise<Widget | undefined>;
  /** Ask the kernel that runs `run` to stop it. */
  stopRun(run: IRun): Promise<void>;
}

/** The token of the tfos_notebook runs service. */
export const ITfosRuns = new Token<ITfosRuns>(
  'tfos-notebook:ITfosRuns',
  'The tfos_notebook runs listed by the runs sidebar, and the actions on them.'
);
