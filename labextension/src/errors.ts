/** A refusal of the runs API: the HTTP status and the server's message. */
export class RunsApiError extends Error {
  /**
   * @param status - the HTTP status.
   * @param message - what went wrong and what to do, shown to the user as it is.
   * @param serverExtensionMissing - nothing answered under the API's path: the Jupyter server has
   *   no tfos_notebook extension (nothing changes until the server is restarted with it).
   */
  constructor(
    readonly status: number,
    message: string,
    readonly serverExtensionMissing = false
  ) {
    super(message);
    this.name = 'RunsApiError';
  }
}
