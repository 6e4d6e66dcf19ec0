import { ILayoutRestorer, JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICommandPalette, InputDialog, Notification, WidgetTracker } from '@jupyterlab/apputils';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { listIcon } from '@jupyterlab/ui-components';

import { RunsApi } from './api';
import { RunsSidebar } from './runsSidebar';
import { TensorBoardPanel } from './tensorboardPanel';
import {
  CommandIDs,
  DEFAULT_SETTINGS,
  IRun,
  ITfosRuns,
  ITfosSettings,
  TENSORBOARD_TRACKER
} from './tokens';

const PLUGIN_ID = 'tfos-notebook:plugin';

/** Let the user pick one of `runs` by name (undefined when cancelled or there is none). */
async function pickRun(runs: IRun[], title: string): Promise<IRun | undefined> {
  if (!runs.length) {
    Notification.warning(`${title}: there is no such run.`, { autoClose: 5000 });
    return undefined;
  }
  const labels = runs.map(r => `${r.name} (${r.state}, ${r.run_id})`);
  const choice = await InputDialog.getItem({ title, items: labels });
  return choice.button.accept ? runs[labels.indexOf(choice.value ?? '')] : undefined;
}

/** The settings in `composite` (the registry's, defaults included), each checked. */
function readSettings(composite: Partial<Record<keyof ITfosSettings, unknown>>): ITfosSettings {
  const number = (value: unknown, fallback: number) =>
    typeof value === 'number' && value > 0 ? value : fallback;
  return {
    pollInterval: number(composite.pollInterval, DEFAULT_SETTINGS.pollInterval),
    liveReload:
      typeof composite.liveReload === 'boolean'
        ? composite.liveReload
        : DEFAULT_SETTINGS.liveReload,
    liveReloadInterval: number(composite.liveReloadInterval, DEFAULT_SETTINGS.liveReloadInterval)
  };
}

/**
 * The plugin: a runs sidebar in the left area, one TensorBoard panel per run in the main area
 * (restored after a reload), and palette commands to open them and to stop a run. Everything comes
 * from the server extension's REST API. Its settings (`schema/plugin.json`) apply as they change;
 * it provides `ITfosRuns` for other plugins.
 */
const plugin: JupyterFrontEndPlugin<ITfosRuns> = {
  id: PLUGIN_ID,
  description: 'TensorBoard panels and a runs sidebar for tfos_notebook runs',
  autoStart: true,
  provides: ITfosRuns,
  optional: [ICommandPalette, ILayoutRestorer, ISettingRegistry],
  activate: (
    app: JupyterFrontEnd,
    palette: ICommandPalette | null,
    restorer: ILayoutRestorer | null,
    settingRegistry: ISettingRegistry | null
  ): ITfosRuns => {
    const api = new RunsApi();
    const tracker = new WidgetTracker<TensorBoardPanel>({ namespace: TENSORBOARD_TRACKER });
    let settings: ITfosSettings = { ...DEFAULT_SETTINGS };

    // One panel per run: focus the open one, else fetch the run for its TensorBoard URL.
    const openTensorBoard = async (which: string): Promise<TensorBoardPanel | undefined> => {
      const open = tracker.find(p => p.runId === which);
      if (open) {
        app.shell.activateById(open.id);
        return open;
      }
      let run: IRun;
      try {
        run = await api.getRun(which);
      } catch (error) {
        Notification.error(`Cannot open the TensorBoard of ${which}: ${(error as Error).message}`);
        return undefined;
      }
      if (!run.tensorboard_url) {
        Notification.warning(`Run ${run.name} has no TensorBoard (yet).`, { autoClose: 5000 });
        return undefined;
      }
      const panel = new TensorBoardPanel(run, run.tensorboard_url, settings);
      void tracker.add(panel);
      app.shell.add(panel, 'main');
      app.shell.activateById(panel.id);
      return panel;
    };

    const stopRun = async (run: IRun): Promise<void> => {
      try {
        await api.stopRun(run.run_id);
        Notification.info(`Asked the kernel of ${run.name} to stop it.`, { autoClose: 4000 });
      } catch (error) {
        Notification.error(`Cannot stop ${run.name}: ${(error as Error).message}`);
      }
    };

    const clearEnded = async (): Promise<void> => {
      try {
        const cleared = await api.clearEnded();
        Notification.info(`Cleared ${cleared} ended run${cleared === 1 ? '' : 's'}.`, {
          autoClose: 3000
        });
      } catch (error) {
        Notification.error(`Cannot clear the ended runs: ${(error as Error).message}`);
      }
    };

    const sidebar = new RunsSidebar(
      api,
      {
        openTensorBoard: run => void openTensorBoard(run.run_id),
        stop: stopRun,
        clearEnded
      },
      settings.pollInterval
    );
    sidebar.title.icon = listIcon;
    app.shell.add(sidebar, 'left', { rank: 900 });

    if (settingRegistry) {
      const apply = (loaded: ISettingRegistry.ISettings) => {
        settings = readSettings(loaded.composite as Partial<Record<keyof ITfosSettings, unknown>>);
        sidebar.pollInterval = settings.pollInterval;
        tracker.forEach(panel => panel.configure(settings));
      };
      settingRegistry
        .load(PLUGIN_ID)
        .then(loaded => {
          apply(loaded);
          loaded.changed.connect(apply);
        })
        .catch(reason => console.warn(`tfos-notebook: its settings could not be read (${reason})`));
    }

    app.commands.addCommand(CommandIDs.openRuns, {
      label: 'TFOS: Open runs',
      execute: () => app.shell.activateById(sidebar.id)
    });
    app.commands.addCommand(CommandIDs.openTensorBoard, {
      label: args =>
        args.run ? `TFOS: Open TensorBoard for ${args.run}` : 'TFOS: Open TensorBoard for run…',
      execute: async args => {
        const which =
          (args.run as string | undefined) ??
          (
            await pickRun(
              (await api.listRuns()).filter(r => r.tensorboard_url),
              'Open TensorBoard for run'
            )
          )?.run_id;
        return which ? openTensorBoard(which) : undefined;
      }
    });
    app.commands.addCommand(CommandIDs.stopRun, {
      label: 'TFOS: Stop run',
      execute: async args => {
        const runs = await api.listRuns();
        const run = args.run
          ? runs.find(r => r.run_id === args.run || r.name === args.run)
          : await pickRun(
              runs.filter(r => !r.ended),
              'Stop run'
            );
        if (run) {
          await stopRun(run);
          await sidebar.refresh();
        }
      }
    });
    for (const command of [CommandIDs.openRuns, CommandIDs.openTensorBoard, CommandIDs.stopRun]) {
      palette?.addItem({ command, category: 'TFOS' });
    }

    // After a reload: the sidebar where it was, and each TensorBoard panel re-opened by run id.
    if (restorer) {
      restorer.add(sidebar, sidebar.id);
      void restorer.restore(tracker, {
        command: CommandIDs.openTensorBoard,
        args: panel => ({ run: panel.runId }),
        name: panel => panel.runId
      });
    }

    return {
      get runs() {
        return sidebar.runs;
      },
      runsChanged: sidebar.runsChanged,
      refresh: () => sidebar.refresh(),
      openTensorBoard,
      stopRun
    };
  }
};

export default plugin;
