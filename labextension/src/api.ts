import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import { RunsApiError } from './errors';
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

  /** Remove the ended runs from the registry; how many went. */
  async clearEnded(): Promise<number> {
    const data = await this.request<{ cleared: number }>('runs', { method: 'DELETE' });
    return data.cleared;
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
    let data: any = undefined;
    const text = await response.text();
    try {
      data = text ? JSON.parse(text) : {};
    } catch {
      // Not our answer (the server's own HTML error page).
    }
    if (!response.ok) {
      if (typeof data?.message === 'string') {
        throw new RunsApiError(response.status, data.message);
      }
      if (response.status === 404) {
        throw new RunsApiError(
          404,
          'The tfos_notebook server extension is not enabled on this Jupyter server ' +
            `(${url} is not found): install tfos_notebook in the server's environment, run ` +
            '`jupyter server extension enable tfos_notebook.server`, and restart the server.',
          true
        );
      }
      throw new RunsApiError(response.status, `${response.status} ${response.statusText}`);
    }
    return data as T;
  }
}
