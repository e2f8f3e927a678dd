// Cluster map: groups (the switch above each leaf, e.g. a spine or scalable unit) → leaf switches →
// nodes → one cell per GPU, coloured by the job holding it. One canvas for the whole cluster, so
// 1,000+ nodes (8,000+ cells) draw in a few milliseconds; hovering hit-tests the node rectangles.
//
// GPU ids are global and numbered in the cluster's depth-first node order (topology/README.md), the
// order of GET /nodes: node i holds ids offset[i] .. offset[i] + gpus - 1.

import {get, listAll} from '../api.js';
import {debounce, h, jobColor} from '../dom.js';
import * as live from '../live.js';

const kCell = 7, kGap = 1, kCols = 4, kNodeGap = 4, kHeader = 18, kPad = 8;
const kFree = '#dfe4ea', kUnknown = '#7d8590', kDown = '#3b1f1f', kDrain = '#f08c00';

// Expands "dgx[001-004,010]" style host lists (one bracket group), arrays, or single names.
export function expandHosts(spec) {
  if (Array.isArray(spec)) return spec.flatMap(expandHosts);
  if (typeof spec !== 'string') return [];
  const m = /^(.*)\[([^\]]+)\](.*)$/.exec(spec);
  if (!m) return spec.split(',').filter(Boolean);
  const out = [];
  for (const part of m[2].split(',')) {
    const [a, b] = part.split('-');
    if (b === undefined) { out.push(m[1] + a + m[3]); continue; }
    for (let i = Number(a); i <= Number(b); i++) out.push(m[1] + String(i).padStart(a.length, '0') + m[3]);
  }
  return out;
}

function parents(topology) {
  const parent = new Map();
  for (const s of (topology && topology.switches) || []) {
    for (const c of expandHosts(s.children || [])) parent.set(c, s.name);
  }
  return parent;
}

// → [{name, leaves: [{name, nodes: [node]}]}] in node order.
function groupNodes(nodes, parent) {
  const groups = [];
  const byName = new Map();
  for (const n of nodes) {
    const leaf = n.leaf || '(no leaf)';
    const top = parent.get(leaf) || '';
    let g = byName.get(top);
    if (!g) { g = {name: top, leaves: [], byLeaf: new Map()}; byName.set(top, g); groups.push(g); }
    let l = g.byLeaf.get(leaf);
    if (!l) { l = {name: leaf, nodes: []}; g.byLeaf.set(leaf, l); g.leaves.push(l); }
    l.nodes.push(n);
  }
  return groups;
}

// owner[global GPU id] = the job holding it (MIG slices mark their GPU); offset: node name → first id.
function gpuOwners(nodes, jobs) {
  const offset = new Map();
  let total = 0;
  for (const n of nodes) { offset.set(n.name, total); total += n.gpus; }
  const owner = new Array(total).fill(null);
  for (const j of jobs) {
    for (const g of j.gpu_ids || []) {
      const id = typeof g === 'object' ? g.gpu : g;
      if (id >= 0 && id < total) owner[id] = j;
    }
  }
  return {owner, offset};
}

// Positions only: group and leaf captions, and one rectangle per node, leaves wrapping into rows.
function layoutMap(groups, offset, width) {
  const nodeW = kCols * (kCell + kGap) + kGap;
  const perRow = Math.max(1, Math.floor((width - 2 * kPad - 8 + kNodeGap) / (nodeW + kNodeGap)));
  const texts = [];
  const rects = [];
  let y = kPad;
  for (const g of groups) {
    if (g.name) { texts.push({text: g.name, x: kPad, y: y + 13, bold: true}); y += kHeader; }
    for (const l of g.leaves) {
      const busy = l.nodes.reduce((a, n) => a + n.gpus_allocated, 0);
      const gpus = l.nodes.reduce((a, n) => a + n.gpus, 0);
      texts.push({text: `leaf ${l.name} · ${l.nodes.length} nodes · ${busy}/${gpus} GPUs busy`, x: kPad + 8, y: y + 13});
      y += kHeader;
      let col = 0, rowH = 0;
      for (const n of l.nodes) {
        const hgt = Math.ceil(n.gpus / kCols) * (kCell + kGap) + kGap;
        rects.push({x: kPad + 8 + col * (nodeW + kNodeGap), y, w: nodeW, hgt, node: n, base: offset.get(n.name)});
        rowH = Math.max(rowH, hgt);
        if (++col >= perRow) { col = 0; y += rowH + kNodeGap; rowH = 0; }
      }
      if (col) y += rowH + kNodeGap;
      y += 6;
    }
  }
  return {texts, rects, height: y + kPad};
}

function cellXY(r, i) {
  return [r.x + kGap + (i % kCols) * (kCell + kGap), r.y + kGap + Math.floor(i / kCols) * (kCell + kGap)];
}

function paintMap(canvas, {texts, rects, height}, owner, width) {
  const dpr = window.devicePixelRatio || 1;
  canvas.width = width * dpr;
  canvas.height = height * dpr;
  canvas.style.width = `${width}px`;
  canvas.style.height = `${height}px`;
  const ctx = canvas.getContext('2d');
  ctx.scale(dpr, dpr);
  ctx.fillStyle = '#fff';
  ctx.fillRect(0, 0, width, height);
  ctx.fillStyle = '#333';
  for (const t of texts) {
    ctx.font = t.bold ? 'bold 13px sans-serif' : '12px sans-serif';
    ctx.fillText(t.text, t.x, t.y);
  }
  for (const r of rects) {
    const n = r.node;
    const down = n.health === 'down' || n.health === 'removed';
    ctx.fillStyle = down ? kDown : '#f7f8fa';
    ctx.fillRect(r.x, r.y, r.w, r.hgt);
    // Allocated GPUs whose job is not listed (e.g. cancelled, not yet released by its agent) are grey.
    let extra = n.gpus_allocated;
    for (let i = 0; i < n.gpus; i++) if (owner[r.base + i]) extra--;
    for (let i = 0; i < n.gpus; i++) {
      const j = owner[r.base + i];
      const unknown = !j && !down && extra > 0;
      if (unknown) extra--;
      ctx.fillStyle = down ? '#6b3a3a' : j ? jobColor(j.id) : unknown ? kUnknown : kFree;
      const [cx, cy] = cellXY(r, i);
      ctx.fillRect(cx, cy, kCell, kCell);
    }
  }
  ctx.strokeStyle = kDrain;
  ctx.lineWidth = 2;
  for (const r of rects) if (r.node.health === 'drain') ctx.strokeRect(r.x - 1, r.y - 1, r.w + 2, r.hgt + 2);
}

export function mount(root) {
  const canvas = h('canvas', {id: 'map-canvas'});
  const tip = h('div', {class: 'tip', id: 'map-tip', hidden: true});
  const summary = h('p', {class: 'muted', id: 'map-summary'});
  const legend = h('div', {class: 'legend'},
    [['free', kFree], ['job (one colour each)', jobColor(7)], ['allocated, job not listed', kUnknown],
     ['node down', kDown], ['node drained (outline)', kDrain]].map(([t, c]) =>
      h('span', {}, h('i', {style: `background:${c}`}), t)));
  root.append(h('h1', {text: 'Cluster map'}), summary, legend,
              h('div', {class: 'map-wrap'}, canvas, tip));
  let topology = null;
  let rects = [];  // [{x, y, w, hgt, node, base}] of the last drawing, for hovering
  let stopped = false;

  const draw = (nodes, jobs) => {
    const {owner, offset} = gpuOwners(nodes, jobs);
    const width = Math.max(600, Math.min(root.clientWidth || 1200, 1600));
    const layout = layoutMap(groupNodes(nodes, parents(topology)), offset, width);
    rects = layout.rects;
    paintMap(canvas, layout, owner, width);
    canvas.owner = owner;
  };

  const load = async () => {
    try {
      if (!topology) topology = await get('/topology').catch(() => ({}));
      const [nodesRes, running, starting] = await Promise.all([
        get('/nodes'), listAll({state: 'RUNNING'}), listAll({state: 'STARTING'})]);
      if (stopped) return;
      const nodes = nodesRes.nodes;
      const jobs = [...running, ...starting];
      const t0 = performance.now();
      draw(nodes, jobs);
      const gpus = nodes.reduce((a, n) => a + n.gpus, 0);
      const busy = nodes.reduce((a, n) => a + n.gpus_allocated, 0);
      const down = nodes.filter((n) => n.health === 'down').length;
      const drain = nodes.filter((n) => n.health === 'drain').length;
      summary.textContent = `${nodes.length} nodes · ${gpus} GPUs · ${busy} busy · ${jobs.length} jobs placed · ` +
        `${down} down · ${drain} drained · drawn in ${(performance.now() - t0).toFixed(1)} ms`;
      canvas.dataset.nodes = String(nodes.length);
      root.dataset.ready = '1';
    } catch (e) {
      summary.textContent = `cannot read the cluster: ${e.message}`;
    }
  };

  canvas.addEventListener('mousemove', (ev) => {
    const b = canvas.getBoundingClientRect();
    const mx = ev.clientX - b.left, my = ev.clientY - b.top;
    const r = rects.find((q) => mx >= q.x && mx < q.x + q.w && my >= q.y && my < q.y + q.hgt);
    if (!r) { tip.hidden = true; return; }
    const i = Math.floor((mx - r.x - kGap) / (kCell + kGap)) + kCols * Math.floor((my - r.y - kGap) / (kCell + kGap));
    const gpu = Math.max(0, Math.min(r.node.gpus - 1, i));
    const j = canvas.owner ? canvas.owner[r.base + gpu] : null;
    const n = r.node;
    const lines = [`${n.name} · GPU ${gpu} · ${n.gpu_type || ''} · ${n.health}${n.reason ? ' (' + n.reason + ')' : ''}`,
                   j ? `job ${j.id} · ${j.name || ''} · user ${j.user}` : 'free'];
    tip.replaceChildren(...lines.map((l) => h('div', {text: l})));
    tip.hidden = false;
    tip.style.left = `${mx + 14}px`;
    tip.style.top = `${my + 10}px`;
  });
  canvas.addEventListener('mouseleave', () => { tip.hidden = true; });

  const soon = debounce(load, 300);
  const offs = [live.on('job', soon), live.on('node', soon), live.on('tick', soon), live.on('reconnect', soon)];
  load();
  return () => { stopped = true; soon.cancel(); offs.forEach((off) => off()); };
}
