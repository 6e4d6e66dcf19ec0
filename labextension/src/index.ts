import { ILayoutRestorer, JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICommandPalette, InputDialog, Notification, WidgetTracker } from '@jupyterlab/apputils';
import { listIcon } from '@jupyterlab/ui-components';

import { RunsApi } from './api';
import { RunsSidebar } from './runsSidebar';
import { TensorBoardPanel } from './tensorboardPanel';
import { CommandIDs, IRun, TENSORBOARD_TRACKER } from './tokens';

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

/**
 * The plugin: a runs sidebar in the left area, one TensorBoard panel per run in the main area
 * (restored after a reload), and palette commands to open them and to stop a run. Everything comes
 * from the server extension's REST API.
 */
const plugin: JupyterFrontEndPlugin<void> = {
  id: 'tfos-notebook:plugin',
  description: 'TensorBoard panels and a runs sidebar for tfos_notebook runs',
  autoStart: true,
  optional: [ICommandPalette, ILayoutRestorer],
  activate: (
    app: JupyterFrontEnd,
    palette: ICommandPalette | null,
    restorer: ILayoutRestorer | null
  ) => {
    const api = new RunsApi();
    const tracker = new WidgetTracker<TensorBoardPanel>({ namespace: TENSORBOARD_TRACKER });

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
      const panel = new TensorBoardPanel(run, run.tensorboard_url);
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

    const sidebar = new RunsSidebar(api, {
      openTensorBoard: run => void openTensorBoard(run.run_id),
      stop: stopRun,
      clearEnded
    });
    sidebar.title.icon = listIcon;
    app.shell.add(sidebar, 'left', { rank: 900 });

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
  }
};

export default plugin;
