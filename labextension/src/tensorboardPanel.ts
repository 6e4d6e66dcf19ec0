import { IFrame, MainAreaWidget } from '@jupyterlab/apputils';

import { IRun, TENSORBOARD_SANDBOX } from './tokens';

/** A run's TensorBoard in the main area: an iframe on its proxy URL, titled by the run's name. */
export class TensorBoardPanel extends MainAreaWidget<IFrame> {
  /** The run shown; the restorer re-opens the panel from it after a reload. */
  readonly runId: string;

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
  }
}
