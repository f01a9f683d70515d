// The report's measurement plots as inline SVG: a motion test's position and target per moving axis
// against time with its following error below and the configured limit drawn, and the run's cycle
// lateness histogram with the configured limit. Scales, "nice" ticks and tick labels come from d3-scale,
// paths from d3-shape (small, well-kept, no DOM needed); the elements are written here. Vega-Lite was
// measured for this and not taken: 25 MB of dependencies and about 120 ms per chart on this machine
// against well under 1 ms here, with SVG about three times larger (docs/architecture.md "Report").
// Deterministic: the same data gives the same bytes.

import { scaleLinear, scaleLog } from 'd3-scale';
import { line } from 'd3-shape';
import type { AxisSeries } from '../motion.ts';
import { esc } from './format.ts';

const W = 620;
const L = 62; // left margin (tick labels)
const R = 12;
const COLORS = { position: '#0969da', target: '#8250df', fe: '#bc4c00', limit: '#cf222e', bar: '#57606a' };

/** One panel: a frame, y ticks with labels, optional x ticks, series, and a dashed horizontal limit. */
function panel(o: {
  y0: number;
  h: number;
  x: (v: number) => number;
  xTicks: number[];
  xFormat: (v: number) => string;
  xLabel?: string;
  yDomain: [number, number];
  yLabel: string;
  series: { t: number[]; v: number[]; color: string; name: string; dash?: string }[];
  limit?: { value: number; label: string };
}): string {
  const y = scaleLinear().domain(o.yDomain).nice(4).range([o.y0 + o.h, o.y0]);
  const out: string[] = [`<rect x="${L}" y="${o.y0}" width="${W - L - R}" height="${o.h}" fill="#fff" stroke="#d0d7de"/>`];
  const fy = y.tickFormat(4);
  for (const t of y.ticks(4)) {
    const py = y(t).toFixed(1);
    out.push(`<line x1="${L}" x2="${W - R}" y1="${py}" y2="${py}" stroke="#eaeef2"/><text x="${L - 5}" y="${py}" dy="3.5" text-anchor="end">${esc(fy(t))}</text>`);
  }
  out.push(`<text x="12" y="${o.y0 + o.h / 2}" transform="rotate(-90 12 ${o.y0 + o.h / 2})" text-anchor="middle">${esc(o.yLabel)}</text>`);
  if (o.xLabel !== undefined) {
    for (const t of o.xTicks) out.push(`<text x="${o.x(t).toFixed(1)}" y="${o.y0 + o.h + 13}" text-anchor="middle">${esc(o.xFormat(t))}</text>`);
    out.push(`<text x="${(L + W - R) / 2}" y="${o.y0 + o.h + 27}" text-anchor="middle">${esc(o.xLabel)}</text>`);
  }
  for (const s of o.series) {
    const d = line<number>()
      .x((_, i) => o.x(s.t[i]!))
      .y((v) => y(v))
      .digits(1)(s.v);
    if (d) out.push(`<path d="${d}" fill="none" stroke="${s.color}" stroke-width="1.5"${s.dash ? ` stroke-dasharray="${s.dash}"` : ''}><title>${esc(s.name)}</title></path>`);
  }
  if (o.limit) {
    const py = y(o.limit.value).toFixed(1);
    out.push(`<line class="limit" x1="${L}" x2="${W - R}" y1="${py}" y2="${py}" stroke="${COLORS.limit}" stroke-dasharray="6 4" stroke-width="1.5"/><text x="${W - R - 4}" y="${py}" dy="-4" text-anchor="end" fill="${COLORS.limit}">${esc(o.limit.label)}</text>`);
  }
  return out.join('');
}

function legendRow(y: number, x0: number, items: [string, string, string?][]): string {
  let x = x0;
  return items
    .map(([color, label, dash]) => {
      const s = `<line x1="${x}" x2="${x + 18}" y1="${y}" y2="${y}" stroke="${color}" stroke-width="2"${dash ? ` stroke-dasharray="${dash}"` : ''}/><text x="${x + 22}" y="${y}" dy="3.5">${esc(label)}</text>`;
      x += 34 + label.length * 6.2;
      return s;
    })
    .join('');
}

/** A moving axis of a motion test: position and target against time, following error below with its limit. */
export function motionPlot(s: AxisSeries, title: string): string {
  const n = Math.min(s.t.length, s.position.length, s.target.length, s.following_error.length);
  if (n < 2) return '';
  const t = s.t.slice(0, n);
  const x = scaleLinear()
    .domain([t[0]!, t[n - 1]! > t[0]! ? t[n - 1]! : t[0]! + 1])
    .range([L, W - R]);
  const xTicks = x.ticks(8);
  const xFormat = x.tickFormat(8);
  const pos = s.position.slice(0, n);
  const tgt = s.target.slice(0, n);
  const fe = s.following_error.slice(0, n);
  const lo = Math.min(...pos, ...tgt);
  const hi = Math.max(...pos, ...tgt);
  const pad = hi > lo ? 0 : Math.max(Math.abs(hi) * 1e-3, 1e-6);
  const feTop = Math.max(...fe, s.following_error_limit ?? 0) * 1.08 || 1e-6;
  const H1 = 150;
  const H2 = 110;
  const top = 40;
  const gap = 22;
  const height = top + H1 + gap + H2 + 34;
  const body = [
 `<text x="${L}" y="14" class="pt">${esc(title.length > 95 ? `${title.slice(0, 94)}…` : title)}</text>`,
    legendRow(30, L, [[COLORS.target, 'target', '4 3'], [COLORS.position, 'position'], [COLORS.fe, 'following error'], ...(s.following_error_limit !== undefined ? ([[COLORS.limit, 'limit', '6 4']] as [string, string, string][]) : [])]),
    panel({
      y0: top,
      h: H1,
      x,
      xTicks,
      xFormat,
      yDomain: [lo - pad, hi + pad],
      yLabel: `${s.axis} (${s.unit})`,
      series: [
        { t, v: tgt, color: COLORS.target, name: 'target', dash: '4 3' },
        { t, v: pos, color: COLORS.position, name: 'position' },
      ],
    }),
    panel({
      y0: top + H1 + gap,
      h: H2,
      x,
      xTicks,
      xFormat,
      xLabel: 'time in the window (ms)',
      yDomain: [0, feTop],
      yLabel: `error (${s.unit})`,
      series: [{ t, v: fe, color: COLORS.fe, name: 'following error' }],
      ...(s.following_error_limit !== undefined ? { limit: { value: s.following_error_limit, label: `limit ${s.following_error_limit} ${s.unit} (configured)` } } : {}),
    }),
  ];
  return `<svg class="plot motion" data-plot="motion" viewBox="0 0 ${W} ${height}" width="${W}" height="${height}" role="img" aria-label="${esc(`${title}: position, target and following error of ${s.axis}`)}">${body.join('')}</svg>`;
}

/** The run's cycle lateness histogram (log x axis, bucket upper edges in us) with the configured limit. */
export function latenessHistogram(hist: readonly { upper_us: number; count: number }[], limitUs: number | undefined, width = W): string {
  if (!hist.length) return '';
  const H = 120;
  const top = 8;
  const lo = Math.max(0.5, Math.min(...hist.map((b) => b.upper_us)) / 1.2);
  const hi = Math.max(...hist.map((b) => b.upper_us), limitUs ?? 0) * 1.3;
  const x = scaleLog().domain([lo, hi]).range([L, width - R]);
  const max = Math.max(...hist.map((b) => b.count));
  const y = scaleLog()
    .domain([0.8, max * 1.2])
    .range([top + H, top]);
  const out: string[] = [`<rect x="${L}" y="${top}" width="${width - L - R}" height="${H}" fill="#fff" stroke="#d0d7de"/>`];
  for (const t of y.ticks(4).filter((v) => Number.isInteger(Math.log10(v)))) {
    const py = y(t).toFixed(1);
    out.push(`<line x1="${L}" x2="${width - R}" y1="${py}" y2="${py}" stroke="#eaeef2"/><text x="${L - 5}" y="${py}" dy="3.5" text-anchor="end">${esc(String(t))}</text>`);
  }
  const step = 10 ** (1 / 20);
  for (const b of hist) {
    const x0 = x(Math.max(lo, b.upper_us / step));
    const x1 = x(b.upper_us);
    const y1 = y(b.count);
    const over = limitUs !== undefined && b.upper_us / step >= limitUs;
    out.push(`<rect class="bin" x="${x0.toFixed(1)}" y="${y1.toFixed(1)}" width="${Math.max(1, x1 - x0 - 0.5).toFixed(1)}" height="${(top + H - y1).toFixed(1)}" fill="${over ? COLORS.limit : COLORS.bar}"><title>${esc(`<= ${b.upper_us} us: ${b.count} cycles`)}</title></rect>`);
  }
  for (const t of x.ticks().filter((v) => Number.isInteger(Math.log10(v)))) {
    out.push(`<text x="${x(t).toFixed(1)}" y="${top + H + 13}" text-anchor="middle">${esc(t >= 1000 ? `${t / 1000} ms` : `${t} us`)}</text>`);
  }
  if (limitUs !== undefined) {
    const px = x(limitUs).toFixed(1);
    out.push(`<line class="limit" x1="${px}" x2="${px}" y1="${top}" y2="${top + H}" stroke="${COLORS.limit}" stroke-dasharray="6 4" stroke-width="1.5"/><text x="${px}" y="${top + 12}" dx="4" fill="${COLORS.limit}">limit ${limitUs} us (configured)</text>`);
  }
  out.push(`<text x="${(L + width - R) / 2}" y="${top + H + 27}" text-anchor="middle">cycle lateness (log scale); cycles per bucket (log scale)</text>`);
  const height = top + H + 34;
  return `<svg class="plot lateness" data-plot="lateness" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" role="img" aria-label="Cycle lateness histogram">${out.join('')}</svg>`;
}

/**
 * A measurement night by night (the nightly history): one point per night, joined where consecutive
 * nights have a value, a point outside its limit drawn red, and the limit as the dashed line.
 */
export function trendPlot(points: readonly { label: string; value: number | undefined; outside?: boolean }[], title: string, unit: string, limit?: { value: number; label: string }): string {
  const n = points.length;
  if (n === 0 || points.every((p) => p.value === undefined)) return '';
  const x = scaleLinear()
    .domain([0, Math.max(1, n - 1)])
    .range([L + 44, W - R - 44]); // room for a night's label centred under the first and last points
  const idx = points.map((_, i) => i);
  const values = points.map((p) => p.value).filter((v): v is number => v !== undefined);
  const hi = Math.max(...values, limit?.value ?? -Infinity);
  const lo = Math.min(0, ...values);
  const H = 120;
  const top = 26;
  // Labels for at most ~8 nights so they never overlap; every point keeps its own <title>.
  const every = Math.max(1, Math.ceil(n / 8));
  const xTicks = idx.filter((i) => i % every === 0 || i === n - 1);
  // Runs of nights with a value, each drawn as its own line (a night without one leaves a gap).
  const runs: number[][] = [];
  for (const i of idx) {
    if (points[i]!.value === undefined) continue;
    const last = runs.at(-1);
    if (last && last.at(-1) === i - 1) last.push(i);
    else runs.push([i]);
  }
  const body = [
    `<text x="${L}" y="14" class="pt">${esc(title)}</text>`,
    panel({
      y0: top,
      h: H,
      x,
      xTicks,
      xFormat: (i) => points[i]?.label ?? '',
      xLabel: 'night',
      yDomain: [lo, hi > lo ? hi * 1.08 : lo + 1],
      yLabel: unit,
      series: runs.map((r) => ({ t: r, v: r.map((i) => points[i]!.value!), color: COLORS.position, name: title })),
      ...(limit ? { limit } : {}),
    }),
  ];
  const y = scaleLinear()
    .domain([lo, hi > lo ? hi * 1.08 : lo + 1])
    .nice(4)
    .range([top + H, top]);
  for (const i of idx) {
    const p = points[i]!;
    if (p.value === undefined) continue;
    body.push(`<circle class="pt${p.outside ? ' outside' : ''}" cx="${x(i).toFixed(1)}" cy="${y(p.value).toFixed(1)}" r="3.5" fill="${p.outside ? COLORS.limit : COLORS.position}"><title>${esc(`${p.label}: ${p.value} ${unit}${p.outside ? ' (outside the limit)' : ''}`)}</title></circle>`);
  }
  const height = top + H + 34;
  return `<svg class="plot trend" data-plot="trend" viewBox="0 0 ${W} ${height}" width="${W}" height="${height}" role="img" aria-label="${esc(`${title} by night`)}">${body.join('')}</svg>`;
}
