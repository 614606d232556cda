/**
 * The bench chart, an SVG written by hand (no dependency).
 *
 * Row 1: bars of the ceiling (best inputs/s per sessions x threads layout, raw ORT) and of the peers
 * called in-process. Then one row per HTTP workload: left, throughput against concurrency, one line
 * per target, with the ceiling best as a bar at the right; right, p50 (solid) and p99 (dashed)
 * latency against concurrency on a log scale, with the raw single-input ORT latency as a reference.
 */
import type { BenchReport } from './run.js';
import type { HttpPoint } from './http.js';

const W = 1200;
const PANEL_W = 560;
const PANEL_H = 270;
const MARGIN = { left: 70, right: 20, top: 36, bottom: 46 };
const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#8c564b', '#e377c2', '#17becf'];
const CEILING_COLOR = '#7f7f7f';

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

function fmt(v: number): string {
  if (!Number.isFinite(v)) return '-';
  if (v >= 1000) return `${Math.round(v / 100) / 10}k`;
  if (v >= 100) return String(Math.round(v));
  if (v >= 10) return (Math.round(v * 10) / 10).toString();
  return (Math.round(v * 100) / 100).toString();
}

function niceMax(v: number): number {
  if (!(v > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

function linTicks(max: number, n = 5): number[] {
  return Array.from({ length: n + 1 }, (_, i) => (max * i) / n);
}

function logTicks(min: number, max: number): number[] {
  const out: number[] = [];
  for (let e = Math.floor(Math.log10(min)); e <= Math.ceil(Math.log10(max)); e++) {
    for (const m of [1, 2, 5]) {
      const v = m * 10 ** e;
      if (v >= min * 0.999 && v <= max * 1.001) out.push(v);
    }
  }
  return out;
}

class Svg {
  parts: string[] = [];
  text(
    x: number,
    y: number,
    s: string,
    opts: { size?: number; anchor?: 'start' | 'middle' | 'end'; weight?: string; fill?: string; rotate?: boolean } = {},
  ): void {
    const t = opts.rotate ? ` transform="rotate(-90 ${x} ${y})"` : '';
    this.parts.push(
      `<text x="${x.toFixed(1)}" y="${y.toFixed(1)}" font-size="${opts.size ?? 11}" text-anchor="${opts.anchor ?? 'start'}"${opts.weight ? ` font-weight="${opts.weight}"` : ''} fill="${opts.fill ?? '#222'}"${t}>${esc(s)}</text>`,
    );
  }
  line(x1: number, y1: number, x2: number, y2: number, stroke = '#ccc', width = 1, dash?: string): void {
    this.parts.push(
      `<line x1="${x1.toFixed(1)}" y1="${y1.toFixed(1)}" x2="${x2.toFixed(1)}" y2="${y2.toFixed(1)}" stroke="${stroke}" stroke-width="${width}"${dash ? ` stroke-dasharray="${dash}"` : ''}/>`,
    );
  }
  rect(x: number, y: number, w: number, h: number, fill: string, title?: string): void {
    this.parts.push(
      `<rect x="${x.toFixed(1)}" y="${y.toFixed(1)}" width="${Math.max(w, 0).toFixed(1)}" height="${Math.max(h, 0).toFixed(1)}" fill="${fill}">${title ? `<title>${esc(title)}</title>` : ''}</rect>`,
    );
  }
  polyline(pts: Array<[number, number]>, stroke: string, dash?: string): void {
    if (pts.length === 0) return;
    this.parts.push(
      `<polyline points="${pts.map(([x, y]) => `${x.toFixed(1)},${y.toFixed(1)}`).join(' ')}" fill="none" stroke="${stroke}" stroke-width="2"${dash ? ` stroke-dasharray="${dash}"` : ''}/>`,
    );
    for (const [x, y] of pts)
      this.parts.push(`<circle cx="${x.toFixed(1)}" cy="${y.toFixed(1)}" r="3" fill="${stroke}"/>`);
  }
}

interface Frame {
  x0: number;
  y0: number;
  w: number;
  h: number;
}

function frame(ox: number, oy: number): Frame {
  return {
    x0: ox + MARGIN.left,
    y0: oy + MARGIN.top,
    w: PANEL_W - MARGIN.left - MARGIN.right,
    h: PANEL_H - MARGIN.top - MARGIN.bottom,
  };
}

function legend(
  svg: Svg,
  f: Frame,
  items: Array<{ label: string; color: string; dash?: string; bar?: boolean }>,
): void {
  let x = f.x0 + 6;
  const y = f.y0 + 10;
  for (const it of items) {
    if (it.bar) svg.rect(x, y - 7, 14, 9, it.color);
    else svg.line(x, y - 3, x + 14, y - 3, it.color, 2, it.dash);
    svg.text(x + 18, y, it.label, { size: 10 });
    x += 24 + it.label.length * 5.8;
  }
}

function barsPanel(
  svg: Svg,
  ox: number,
  oy: number,
  title: string,
  bars: Array<{ label: string; value: number; color: string; range?: [number, number] }>,
  yLabel: string,
): void {
  const f = frame(ox, oy);
  svg.text(ox + PANEL_W / 2, oy + 18, title, { size: 13, anchor: 'middle', weight: 'bold' });
  if (bars.length === 0) {
    svg.text(f.x0 + f.w / 2, f.y0 + f.h / 2, 'no data', { anchor: 'middle', fill: '#888' });
    return;
  }
  const max = niceMax(Math.max(...bars.map((b) => b.range?.[1] ?? b.value)) * 1.1);
  for (const t of linTicks(max)) {
    const y = f.y0 + f.h - (t / max) * f.h;
    svg.line(f.x0, y, f.x0 + f.w, y, '#eee');
    svg.text(f.x0 - 6, y + 4, fmt(t), { anchor: 'end', size: 10 });
  }
  const slot = f.w / bars.length;
  bars.forEach((b, i) => {
    const h = (b.value / max) * f.h;
    const x = f.x0 + i * slot + slot * 0.15;
    svg.rect(x, f.y0 + f.h - h, slot * 0.7, h, b.color, `${b.label}: ${fmt(b.value)}`);
    if (b.range) {
      const cx = x + slot * 0.35;
      svg.line(cx, f.y0 + f.h - (b.range[0] / max) * f.h, cx, f.y0 + f.h - (b.range[1] / max) * f.h, '#333', 1);
    }
    svg.text(x + slot * 0.35, f.y0 + f.h - h - 4, fmt(b.value), { anchor: 'middle', size: 10 });
    const words = b.label.split('\n');
    words.forEach((w, k) => svg.text(x + slot * 0.35, f.y0 + f.h + 14 + k * 11, w, { anchor: 'middle', size: 9 }));
  });
  svg.line(f.x0, f.y0 + f.h, f.x0 + f.w, f.y0 + f.h, '#444');
  svg.line(f.x0, f.y0, f.x0, f.y0 + f.h, '#444');
  svg.text(ox + 14, f.y0 + f.h / 2, yLabel, { rotate: true, anchor: 'middle', size: 11 });
}

interface Series {
  label: string;
  color: string;
  points: Array<[number, number]>;
  dash?: string;
}

/** Concurrency on a categorical x axis (the measured levels), optional extra bar slot at the right. */
function linePanel(
  svg: Svg,
  ox: number,
  oy: number,
  title: string,
  xs: number[],
  series: Series[],
  opts: {
    yLabel: string;
    log?: boolean;
    bar?: { label: string; value: number };
    ref?: { label: string; value: number };
  },
): void {
  const f = frame(ox, oy);
  svg.text(ox + PANEL_W / 2, oy + 18, title, { size: 13, anchor: 'middle', weight: 'bold' });
  const values = series.flatMap((s) => s.points.map(([, y]) => y)).filter((v) => Number.isFinite(v) && v > 0);
  if (opts.bar) values.push(opts.bar.value);
  if (opts.ref) values.push(opts.ref.value);
  if (values.length === 0 || xs.length === 0) {
    svg.text(f.x0 + f.w / 2, f.y0 + f.h / 2, 'no data', { anchor: 'middle', fill: '#888' });
    return;
  }
  const slots = xs.length + (opts.bar ? 1 : 0);
  const slot = f.w / slots;
  const xOf = (c: number): number => f.x0 + slot * (xs.indexOf(c) + 0.5);
  let yOf: (v: number) => number;
  let ticks: number[];
  if (opts.log) {
    const lo = 10 ** Math.floor(Math.log10(Math.min(...values)));
    const hi = 10 ** Math.ceil(Math.log10(Math.max(...values)));
    yOf = (v) =>
      f.y0 + f.h - ((Math.log10(Math.max(v, lo)) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo))) * f.h;
    ticks = logTicks(lo, hi);
  } else {
    const max = niceMax(Math.max(...values) * 1.1);
    yOf = (v) => f.y0 + f.h - (v / max) * f.h;
    ticks = linTicks(max);
  }
  for (const t of ticks) {
    const y = yOf(t);
    svg.line(f.x0, y, f.x0 + f.w, y, '#eee');
    svg.text(f.x0 - 6, y + 4, fmt(t), { anchor: 'end', size: 10 });
  }
  for (const c of xs) {
    svg.line(xOf(c), f.y0 + f.h, xOf(c), f.y0 + f.h + 4, '#444');
    svg.text(xOf(c), f.y0 + f.h + 16, String(c), { anchor: 'middle', size: 10 });
  }
  if (opts.bar) {
    const x = f.x0 + slot * xs.length + slot * 0.2;
    const y = yOf(opts.bar.value);
    svg.rect(x, y, slot * 0.6, f.y0 + f.h - y, CEILING_COLOR, `${opts.bar.label}: ${fmt(opts.bar.value)}`);
    svg.text(x + slot * 0.3, y - 4, fmt(opts.bar.value), { anchor: 'middle', size: 10 });
    svg.text(x + slot * 0.3, f.y0 + f.h + 16, opts.bar.label, { anchor: 'middle', size: 10 });
    svg.line(f.x0, y, f.x0 + slot * xs.length, y, CEILING_COLOR, 1, '2 3');
  }
  if (opts.ref) {
    const y = yOf(opts.ref.value);
    svg.line(f.x0, y, f.x0 + f.w, y, CEILING_COLOR, 1, '2 3');
    svg.text(f.x0 + f.w - 4, y - 4, `${opts.ref.label} ${fmt(opts.ref.value)}`, {
      anchor: 'end',
      size: 9,
      fill: '#555',
    });
  }
  for (const s of series)
    svg.polyline(
      s.points.filter(([c, v]) => xs.includes(c) && Number.isFinite(v) && v > 0).map(([c, v]) => [xOf(c), yOf(v)]),
      s.color,
      s.dash,
    );
  svg.line(f.x0, f.y0 + f.h, f.x0 + f.w, f.y0 + f.h, '#444');
  svg.line(f.x0, f.y0, f.x0, f.y0 + f.h, '#444');
  svg.text(f.x0 + f.w / 2, f.y0 + f.h + 34, 'concurrent clients', { anchor: 'middle', size: 11 });
  svg.text(ox + 14, f.y0 + f.h / 2, opts.yLabel, { rotate: true, anchor: 'middle', size: 11 });
}

export function renderChart(report: BenchReport): string {
  const svg = new Svg();
  const http = report.http ?? [];
  const workloads = [...new Set(http.flatMap((t) => t.points.map((p) => p.workload)))];
  const rows = 1 + workloads.length;
  const H = 70 + rows * (PANEL_H + 20);
  const m = report.machine;
  svg.text(20, 26, 'onnx-gateway bench', { size: 18, weight: 'bold' });
  svg.text(
    20,
    46,
    `${report.startedAt}  |  ${m.cpuModel}, ${m.cores} cores  |  Node ${m.node}, onnxruntime-node ${m.onnxruntimeNode}${report.quick ? '  |  QUICK (smoke) run' : ''}`,
    { size: 11, fill: '#444' },
  );
  svg.text(20, 60, 'median of repeats; whiskers min-max; throughput from 2xx responses only', {
    size: 10,
    fill: '#666',
  });

  const ceiling = report.ceiling;
  // Row 1: ceiling layouts and peers in-process.
  const embedBars: Array<{ label: string; value: number; color: string; range?: [number, number] }> = [];
  const rerankBars: typeof embedBars = [];
  if (ceiling) {
    const byLayout = (points: typeof ceiling.embed, out: typeof embedBars, color: string): void => {
      const layouts = [...new Set(points.map((p) => `${p.sessions}x${p.threads}`))];
      for (const l of layouts) {
        const best = points
          .filter((p) => `${p.sessions}x${p.threads}` === l)
          .sort((a, b) => b.inputsPerSec.median - a.inputsPerSec.median)[0];
        if (!best) continue;
        out.push({
          label: `ORT ${best.sessions} sess x ${best.threads} thr\nbatch ${best.batch}`,
          value: best.inputsPerSec.median,
          color,
          range: [best.inputsPerSec.min, best.inputsPerSec.max],
        });
      }
    };
    byLayout(ceiling.embed, embedBars, CEILING_COLOR);
    byLayout(ceiling.rerank, rerankBars, CEILING_COLOR);
  }
  for (const p of report.peers ?? []) {
    const bar = {
      label: `${p.peer}\n${p.case.replace(/^(embed|rerank) /, '').replace(/ per call$/, '/call')}`,
      value: p.perSec.median,
      color: COLORS[1]!,
      range: [p.perSec.min, p.perSec.max] as [number, number],
    };
    (p.unit === 'pairs' ? rerankBars : embedBars).push(bar);
  }
  barsPanel(svg, 20, 70, 'Embeddings, no HTTP: raw ORT best per layout; peers in-process', embedBars, 'inputs/s');
  barsPanel(
    svg,
    20 + PANEL_W + 40,
    70,
    'Rerank, no HTTP: raw ORT best per layout; peers in-process',
    rerankBars,
    'pairs/s',
  );

  const targets = http.map((t) => t.name);
  const color = (name: string): string => COLORS[targets.indexOf(name) % COLORS.length]!;
  const singleRef = ceiling?.singleLatency.find((l) => l.threads === 1) ?? ceiling?.singleLatency[0];
  workloads.forEach((wl, i) => {
    const oy = 70 + (i + 1) * (PANEL_H + 20);
    const pts = http.flatMap((t) => t.points.filter((p) => p.workload === wl));
    const xs = [...new Set(pts.map((p) => p.concurrency))].sort((a, b) => a - b);
    const unit = pts[0]?.unit ?? 'inputs';
    const of = (t: string, f: (p: HttpPoint) => number): Array<[number, number]> =>
      pts.filter((p) => p.target === t).map((p) => [p.concurrency, f(p)]);
    const best = unit === 'pairs' ? ceiling?.bestRerank : ceiling?.bestEmbed;
    linePanel(
      svg,
      20,
      oy,
      `${wl}: throughput`,
      xs,
      targets.map((t) => ({ label: t, color: color(t), points: of(t, (p) => p.unitsPerSec.median) })),
      { yLabel: `${unit}/s`, bar: best ? { label: 'raw ORT', value: best.inputsPerSec.median } : undefined },
    );
    legend(svg, frame(20, oy), [
      ...targets.map((t) => ({ label: t, color: color(t) })),
      ...(best ? [{ label: 'raw ORT best', color: CEILING_COLOR, bar: true }] : []),
    ]);
    // Raw ORT has no request latency (its per-run times are not comparable beyond concurrency 1).
    const servers = http.filter((t) => t.kind !== 'raw').map((t) => t.name);
    linePanel(
      svg,
      20 + PANEL_W + 40,
      oy,
      `${wl}: latency p50 (solid), p99 (dashed)`,
      xs,
      servers.flatMap((t) => [
        { label: `${t} p50`, color: color(t), points: of(t, (p) => p.p50Ms.median) },
        { label: `${t} p99`, color: color(t), points: of(t, (p) => p.p99Ms.median), dash: '5 4' },
      ]),
      {
        yLabel: 'ms (log)',
        log: true,
        ref:
          wl.startsWith('embed-1') && singleRef ? { label: 'raw ORT 1 input', value: singleRef.medianMs } : undefined,
      },
    );
    legend(
      svg,
      frame(20 + PANEL_W + 40, oy),
      servers.map((t) => ({ label: t, color: color(t) })),
    );
  });

  return (
    `<?xml version="1.0" encoding="UTF-8"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="Helvetica, Arial, sans-serif">\n` +
    `<rect width="100%" height="100%" fill="#fff"/>\n${svg.parts.join('\n')}\n</svg>\n`
  );
}

/** A minimal well-formedness check: tags balance, attributes quoted, entities known. */
export function checkXml(xml: string): string | null {
  const body = xml.replace(/^<\?xml[^>]*\?>\s*/, '');
  const stack: string[] = [];
  const re = /<(\/?)([A-Za-z][\w:-]*)((?:\s+[\w:-]+="[^"<]*")*)\s*(\/?)>|<!--[\s\S]*?-->|([^<]+)/gy;
  let m: RegExpExecArray | null;
  let pos = 0;
  while (pos < body.length) {
    re.lastIndex = pos;
    m = re.exec(body);
    if (!m) return `unparsable at offset ${pos}: ${body.slice(pos, pos + 40)}`;
    pos = re.lastIndex;
    if (m[5] !== undefined) {
      if (/&(?!(amp|lt|gt|quot|apos|#\d+);)/.test(m[5])) return `bad entity in text near ${m[5].slice(0, 40)}`;
      continue;
    }
    if (!m[2]) continue;
    if (m[1]) {
      if (stack.pop() !== m[2]) return `mismatched </${m[2]}>`;
    } else if (!m[4]) stack.push(m[2]);
  }
  return stack.length ? `unclosed <${stack[stack.length - 1]}>` : null;
}
