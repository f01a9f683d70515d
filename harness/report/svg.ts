// The report's small inline SVG charts: the outcome bars, per-file stacked bars and a line plot of a
// numeric CSV attachment.

import { esc, fmtNum } from './format.ts';

const PLOT_POINTS_MAX = 800;

export function barChart(items: { label: string; value: number; color: string }[]): string {
  const w = 520;
  const lw = 140;
  const rowH = 26;
  const max = Math.max(1, ...items.map((i) => i.value));
  const h = items.length * rowH + 4;
  const bars = items.map((it, i) => {
    const y = i * rowH + 4;
    const bw = it.value > 0 ? Math.max(2, Math.round(((w - lw - 50) * it.value) / max)) : 0;
    return `<text x="${lw - 8}" y="${y + 13}" text-anchor="end">${esc(it.label)}</text><rect x="${lw}" y="${y}" width="${bw}" height="18" rx="3" fill="${it.color}"/><text x="${lw + bw + 6}" y="${y + 13}" class="v">${it.value}</text>`;
  });
  return `<svg class="chart" viewBox="0 0 ${w} ${h}" width="${w}" height="${h}" role="img" aria-label="Test outcomes"><line x1="${lw}" y1="0" x2="${lw}" y2="${h}" stroke="#d0d7de"/>${bars.join('')}</svg>`;
}

export function stackBar(segs: { value: number; color: string }[], w: number, h: number): string {
  const total = segs.reduce((n, s) => n + s.value, 0);
  if (total === 0) return `<svg width="${w}" height="${h}" class="sbar"><rect width="${w}" height="${h}" rx="2" fill="#eaeef2"/></svg>`;
  let x = 0;
  const rects = segs
    .filter((s) => s.value > 0)
    .map((s) => {
      const sw = (w * s.value) / total;
      const r = `<rect x="${x.toFixed(1)}" width="${sw.toFixed(1)}" height="${h}" fill="${s.color}"/>`;
      x += sw;
      return r;
    });
  return `<svg width="${w}" height="${h}" class="sbar"><g>${rects.join('')}</g></svg>`;
}

const SERIES_COLORS = ['#0969da', '#cf222e', '#1a7f37', '#8250df'];

/** A line plot of a numeric CSV attachment: first column on x, up to four further numeric columns. */
export function csvPlot(text: string, sep: string): string {
  const lines = text.split(/\r?\n/).filter((l) => l.trim() !== '');
  if (lines.length < 3) return '';
  const header = lines[0]!.split(sep).map((s) => s.trim());
  const rows = lines.slice(1).map((l) => l.split(sep).map((s) => Number(s.trim())));
  const numericCols = header.map((_, i) => rows.every((r) => r.length > i && Number.isFinite(r[i]!)));
  if (!numericCols[0]) return '';
  const series = header.map((_, i) => i).filter((i) => i > 0 && numericCols[i]).slice(0, SERIES_COLORS.length);
  if (!series.length) return '';
  const stride = Math.max(1, Math.ceil(rows.length / PLOT_POINTS_MAX));
  const pts = rows.filter((_, i) => i % stride === 0 || i === rows.length - 1);
  const xs = pts.map((r) => r[0]!);
  const ys = pts.flatMap((r) => series.map((i) => r[i]!));
  const [x0, x1] = [Math.min(...xs), Math.max(...xs)];
  let [y0, y1] = [Math.min(...ys), Math.max(...ys)];
  if (y0 === y1) [y0, y1] = [y0 - 1, y1 + 1];
  const W = 640;
  const H = 220;
  const L = 64;
  const B = 24;
  const px = (x: number): string => (L + ((x - x0) / (x1 - x0 || 1)) * (W - L - 10)).toFixed(1);
  const py = (y: number): string => (8 + (1 - (y - y0) / (y1 - y0)) * (H - B - 8)).toFixed(1);
  const lines2 = series.map((i, k) => `<polyline fill="none" stroke="${SERIES_COLORS[k]}" stroke-width="1.4" points="${pts.map((r) => `${px(r[0]!)},${py(r[i]!)}`).join(' ')}"/>`);
  const legendItems = series.map((i, k) => `<tspan fill="${SERIES_COLORS[k]}">■</tspan> ${esc(header[i]!)}  `).join('');
  return `<svg class="plot" viewBox="0 0 ${W} ${H + 18}" width="${W}" height="${H + 18}" role="img" aria-label="Plot">
<rect x="${L}" y="8" width="${W - L - 10}" height="${H - B - 8}" fill="#fff" stroke="#d0d7de"/>
<text x="${L - 6}" y="14" text-anchor="end">${esc(fmtNum(y1))}</text><text x="${L - 6}" y="${H - B}" text-anchor="end">${esc(fmtNum(y0))}</text>
<text x="${L}" y="${H - 8}">${esc(fmtNum(x0))}</text><text x="${W - 10}" y="${H - 8}" text-anchor="end">${esc(fmtNum(x1))}</text><text x="${(W + L) / 2}" y="${H - 8}" text-anchor="middle">${esc(header[0]!)}</text>
${lines2.join('')}<text x="${L}" y="${H + 12}">${legendItems}</text></svg>`;
}

export function legend(items: [string, string][]): string {
  return items.map(([c, l]) => `<span class="lg"><i style="background:${c}"></i>${esc(l)}</span>`).join('');
}