import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import { RunsApiError, MISSING_PREFIX } from './errors';
import { API_PATH, IRun } from './tokens';

/** Client of the server extension's REST API (`<base_url>tfos-notebook/api/`). */
export class RunsApi {
  constructor(
    private readonly settings: ServerConnection.ISettings = ServerConnection.makeSettings()
  ) {}

  /** Every run in the registry, newest first. */
  async listRuns(): Promise<IRun[]> {
    const data = await this.request<{ runs: IRun[] }>('runs');
    return data.runs;
  }

  /** One run, by run id or name. */
  getRun(which: string): Promise<IRun> {
    return this.request<IRun>(`runs/${encodeURIComponent(which)}`);
  }

  /** Ask the kernel that owns the run to stop it. */
  stopRun(which: string): Promise<IRun> {
    return this.request<IRun>(`runs/${encodeURIComponent(which)}/stop`, {
      method: 'POST'
    });
  }

  private async request<T>(path: string, init: RequestInit = {}): Promise<T> {
    const url = URLExt.join(this.settings.baseUrl, API_PATH, path);
    const response = await ServerConnection.makeRequest(url, init, this.settings);
    let data: any = {};
    const text = await response.text();
    try {
      data = text ? JSON.parse(text) : {};
    } catch {
      // A page that is not ours (the server's own 404 page): no JSON message.
    }
    if (!response.ok) {
      const message =
        data.message ??
        (response.status === 404
          ? `${MISSING_PREFIX} on this Jupyter server (${url} is not found): install tfos_notebook ` +
            'in the environment of the server, run `jupyter server extension enable tfos_notebook.server`, ' +
            'and restart the server.'
          : `${response.status} ${response.statusText}`);
      throw new RunsApiError(response.status, message);
    }
    return data as T;
  }
}
