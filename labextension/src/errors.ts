/** A refusal of the runs API: the HTTP status and the server's message. */
export class RunsApiError extends Error {
  constructor(
    readonly status: number,
    message: string
  ) {
    super(message);
    this.name = 'RunsApiError';
  }

  /** True when the server has no tfos_notebook extension (nothing answers under its path). */
  get serverExtensionMissing(): boolean {
    return this.status === 404 && this.message.startsWith(MISSING_PREFIX);
  }
}

/** Start of the message given for a 404 that did not come from the extension itself. */
export const MISSING_PREFIX = 'The tfos_notebook server extension is not enabled';
