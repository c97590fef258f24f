// A small SVG line chart (time on x, seconds on y), scaled by its viewBox.

import { h } from './dom.js';
import { duration } from './format.js';

/** The viewBox's size: its width follows the space the chart gets, so text stays legible on a phone. */
const MAX_W = 640;
const H = 200;
const PAD = { left: 56, right: 12, top: 12, bottom: 28 };
/** About the widest character of the labels' 11px font, in viewBox units: the left pad fits the longest label. */
const CHAR_W = 6.5;

const svg = (tag, props, ...children) => h(`svg:${tag}`, props, ...children);
const clock = (ms) => new Date(ms).toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit' });

/** Rounds a maximum up to 1, 2 or 5 times a power of ten, so the grid reads well. */
function niceMax(value) {
  if (!(value > 0)) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  return [1, 2, 5, 10].map((m) => m * power).find((m) => m >= value) ?? 10 * power;
}

/**
 * @param {{ label: string, from: number, to: number, width?: number,
 *   series: Array<{ name: string, className: string, points: Array<[number, number]> }> }} spec
 */
export function lineChart({ label, from, to, series, width = MAX_W }) {
  const W = Math.max(300, Math.min(MAX_W, Math.round(width)));
  const max = niceMax(Math.max(0, ...series.flatMap((s) => s.points.map(([, v]) => v))));
  const ticks = [0, max / 2, max].map((v) => [v, duration(v)]);
  const left = Math.max(PAD.left, Math.ceil(10 + CHAR_W * Math.max(...ticks.map(([, text]) => text.length))));
  const x = (t) => left + ((t - from) / Math.max(1, to - from)) * (W - left - PAD.right);
  const y = (v) => H - PAD.bottom - (v / max) * (H - PAD.top - PAD.bottom);
  const grid = ticks.map(([v, text]) =>
    svg(
      'g',
      { class: 'grid' },
      svg('line', { x1: left, x2: W - PAD.right, y1: y(v), y2: y(v) }),
      svg('text', { x: left - 6, y: y(v) + 4, 'text-anchor': 'end' }, text),
    ),
  );
  const times = [from, (from + to) / 2, to].map((t, i) => svg('text', { x: x(t), y: H - 8, 'text-anchor': ['start', 'middle', 'end'][i] }, clock(t)));
  const lines = series.map((s) =>
    s.points.length === 1
      ? svg('circle', { class: s.className, cx: x(s.points[0][0]), cy: y(s.points[0][1]), r: 3 })
      : svg('polyline', { class: s.className, points: s.points.map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(' ') }),
  );
  const chart = svg('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': label, class: 'chart' }, grid, times, lines);
  const legend = h(
    'ul',
    { class: 'legend', 'aria-hidden': 'true' },
    series.map((s) => h('li', null, h('span', { class: `swatch ${s.className}` }), s.name)),
  );
  return h('figure', { class: 'chart-figure' }, chart, legend);
}
