const SVG_NS = 'http://www.w3.org/2000/svg';

/**
 * A run's loss curve as a small inline SVG line, scaled to its own range (a flat curve sits in
 * the middle). `points` are `[step, loss]`; null with fewer than two.
 */
export function sparkline(
  points: readonly (readonly [number, number])[],
  width = 120,
  height = 24
): SVGSVGElement | null {
  if (points.length < 2) {
    return null;
  }
  const steps = points.map(p => p[0]);
  const values = points.map(p => p[1]);
  const [x0, x1] = [Math.min(...steps), Math.max(...steps)];
  const [y0, y1] = [Math.min(...values), Math.max(...values)];
  const pad = 2;
  const x = (step: number) => pad + ((step - x0) / (x1 - x0 || 1)) * (width - 2 * pad);
  const y = (value: number) =>
    y1 === y0 ? height / 2 : height - pad - ((value - y0) / (y1 - y0)) * (height - 2 * pad);
  const svg = document.createElementNS(SVG_NS, 'svg');
  svg.setAttribute('width', String(width));
  svg.setAttribute('height', String(height));
  svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
  const line = document.createElementNS(SVG_NS, 'polyline');
  line.setAttribute(
    'points',
    points.map(([s, v]) => `${x(s).toFixed(1)},${y(v).toFixed(1)}`).join(' ')
  );
  line.setAttribute('fill', 'none');
  line.setAttribute('stroke', 'var(--jp-brand-color1)');
  line.setAttribute('stroke-width', '1.5');
  const title = document.createElementNS(SVG_NS, 'title');
  title.textContent = `loss from ${values[0].toPrecision(3)} to ${values[values.length - 1].toPrecision(3)}`;
  svg.append(title, line);
  return svg;
}

/** `75` -> `1:15`; `3700` -> `1:01:40` (as the notebook's monitor writes durations). */
export function formatDuration(seconds: number): string {
  const s = Math.max(0, Math.floor(seconds));
  const [h, m, r] = [Math.floor(s / 3600), Math.floor((s % 3600) / 60), s % 60];
  const two = (n: number) => String(n).padStart(2, '0');
  return h ? `${h}:${two(m)}:${two(r)}` : `${m}:${two(r)}`;
}
