/** A notebook of code cells as .ipynb JSON: written as a file, since typing into the editor would
 * re-indent the cells. */
export function notebook(...cells: string[]): string {
  return JSON.stringify({
    cells: cells.map(source => ({
      cell_type: 'code',
      execution_count: null,
      metadata: {},
      outputs: [],
      source
    })),
    metadata: { kernelspec: { display_name: 'Python 3', language: 'python', name: 'python3' } },
    nbformat: 4,
    nbformat_minor: 5
  });
}
