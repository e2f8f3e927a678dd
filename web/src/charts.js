// Charts: uPlot (a global from vendor/uPlot.iife.min.js) for time series, a small canvas scatter for
// time-to-train points (several runs may share one x, which uPlot's aligned data does not suit).

import {h} from './dom.js';

// series: [{label, stroke, dash?}], data: [xs, ys1, ys2...]. opts.time: x is unix seconds.
export function lineChart(container, {series, data, time = true, yLabel = '', xLabel = '', yRange, height = 220}) {
  const width = Math.max(320, Math.min(container.clientWidth || 720, 960));
  const opts = {
    width, height,
    // One sample (a fresh page) would otherwise stretch the x axis over years.
    scales: {x: {time, range: (u, min, max) => (min === max ? [min - (time ? 60 : 1), max + 1] : [min, max])},
             y: yRange ? {range: yRange} : {}},
    axes: [{label: xLabel}, {label: yLabel}],
    series: [{}, ...series.map((s) => ({label: s.label, stroke: s.stroke, width: 2, dash: s.dash,
                                        points: {show: s.points ?? false}}))],
    legend: {show: true},
  };
  // eslint-disable-next-line no-undef
  const plot = new uPlot(opts, data, container);
  return {
    update: (d) => plot.setData(d),
    destroy: () => plot.destroy(),
  };
}

// points: [{x, y, label, color}]. Draws axes with min/max ticks; hovering a point shows its label.
export function scatter(container, {points, xLabel, yLabel, xFormat = String, yFormat = String, width = 420,
                                    height = 220}) {
  const canvas = h('canvas', {class: 'scatter', width, height});
  const tip = h('div', {class: 'tip', hidden: true});
  const wrap = h('div', {class: 'scatter-wrap'}, canvas, tip);
  container.appendChild(wrap);
  const ctx = canvas.getContext('2d');
  const pad = {l: 64, r: 12, t: 12, b: 40};
  const xs = points.map((p) => p.x), ys = points.map((p) => p.y);
  let [x0, x1] = [Math.min(...xs), Math.max(...xs)];
  let [y0, y1] = [0, Math.max(...ys)];
  if (x0 === x1) { x0 -= 1; x1 += 1; }
  if (y1 <= y0) y1 = y0 + 1;
  const sx = (x) => pad.l + ((x - x0) / (x1 - x0)) * (width - pad.l - pad.r);
  const sy = (y) => height - pad.b - ((y - y0) / (y1 - y0)) * (height - pad.t - pad.b);
  ctx.strokeStyle = '#999';
  ctx.beginPath();
  ctx.moveTo(pad.l, pad.t);
  ctx.lineTo(pad.l, height - pad.b);
  ctx.lineTo(width - pad.r, height - pad.b);
  ctx.stroke();
  ctx.fillStyle = '#444';
  ctx.font = '11px sans-serif';
  ctx.textAlign = 'center';
  ctx.fillText(xFormat(x0), pad.l, height - pad.b + 14);
  ctx.fillText(xFormat(x1), width - pad.r - 20, height - pad.b + 14);
  ctx.fillText(xLabel, (width + pad.l) / 2, height - 6);
  ctx.textAlign = 'right';
  ctx.fillText(yFormat(y1), pad.l - 4, pad.t + 8);
  ctx.fillText(yFormat(y0), pad.l - 4, height - pad.b);
  ctx.save();
  ctx.translate(12, (height - pad.b) / 2);
  ctx.rotate(-Math.PI / 2);
  ctx.textAlign = 'center';
  ctx.fillText(yLabel, 0, 0);
  ctx.restore();
  for (const p of points) {
    ctx.fillStyle = p.color || '#2a6fdb';
    ctx.beginPath();
    ctx.arc(sx(p.x), sy(p.y), 4, 0, 2 * Math.PI);
    ctx.fill();
  }
  canvas.addEventListener('mousemove', (ev) => {
    const r = canvas.getBoundingClientRect();
    const mx = ev.clientX - r.left, my = ev.clientY - r.top;
    const hit = points.find((p) => Math.hypot(sx(p.x) - mx, sy(p.y) - my) < 6);
    tip.hidden = !hit;
    if (hit) {
      tip.textContent = hit.label;
      tip.style.left = `${mx + 12}px`;
      tip.style.top = `${my + 8}px`;
    }
  });
  canvas.addEventListener('mouseleave', () => { tip.hidden = true; });
}
