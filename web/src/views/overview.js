// Overview: GPUs busy/free/down, jobs by state, queue wait, utilization over time. The utilization
// series starts with the last hour the daemon derives from its job history (`/utilization`, read once
// per mount; left out when that read fails), then goes on with samples taken by this page, kept in
// sessionStorage for the tab.

import {get, parseMetrics, query} from '../api.js';
import {lineChart} from '../charts.js';
import {debounce, fmtDuration, h, now} from '../dom.js';
import * as live from '../live.js';

const KEY = 'railyard.util';
const kMaxSamples = 3600;

function loadSamples() {
  try { return JSON.parse(sessionStorage.getItem(KEY)) || []; } catch { return []; }
}

// The daemon's history of the last hour before the page's first sample: [[t, busy %], ...] at 10 s
// steps (t: the step's start).
async function history(samples) {
  const since = Math.floor(now()) - kHistorySeconds;
  const until = Math.floor(samples.length ? samples[0][0] : now());
  if (until - since < 10) return [];
  const res = await get('/utilization' + query({since, until, step: 10})).catch(() => null);
  if (!res || !res.gpus) return [];
  // Idle steps before the first busy one are left out (the daemon may not have run then).
  const first = res.samples.findIndex(([, busy]) => busy > 0);
  return first < 0 ? [] : res.samples.slice(Math.max(0, first - 1)).map(([t, busy]) => [t, (100 * busy) / res.gpus]);
}
const kHistorySeconds = 3600;

function card(label, value, cls) {
  return h('div', {class: `card ${cls || ''}`}, h('div', {class: 'value', text: value}),
           h('div', {class: 'label', text: label}));
}

export async function summary() {
  const [nodesRes, metricsText, pending] = await Promise.all([
    get('/nodes'), get('/metrics').catch(() => ''), get('/jobs' + query({state: 'PENDING', limit: 1})),
  ]);
  const nodes = nodesRes.nodes;
  const s = {gpus: 0, busy: 0, down: 0, drained: 0, nodes: nodes.length, nodesDown: 0, nodesDrain: 0};
  for (const n of nodes) {
    if (n.health === 'removed') continue;  // out of the cluster until resumed: not capacity
    s.gpus += n.gpus;
    if (n.health === 'down') { s.down += n.gpus; s.nodesDown++; continue; }
    s.busy += n.gpus_allocated;
    if (n.health === 'drain') { s.drained += n.gpus - n.gpus_allocated; s.nodesDrain++; }
  }
  s.free = s.gpus - s.busy - s.down - s.drained;
  const m = parseMetrics(metricsText);
  s.byState = {};
  for (const [k, v] of Object.entries(m)) {
    const mm = /^railyard_jobs\{state="([A-Z_]+)"\}$/.exec(k);
    if (mm) s.byState[mm[1]] = v;
  }
  const oldest = pending.jobs[0];
  s.oldestWait = oldest ? now() - oldest.submit_time : null;
  return s;
}

export function mount(root) {
  const cards = h('div', {class: 'cards'});
  const chartBox = h('div', {class: 'chart'});
  root.append(h('h1', {text: 'Overview'}), cards, h('h2', {text: 'GPU utilization'}), chartBox);
  let samples = loadSamples();
  let chart = null;
  let stopped = false;

  let seeded = null;  // the history read, once
  const refresh = async () => {
    if (!seeded) seeded = history(samples).then((past) => { samples = [...past, ...samples]; });
    let s;
    try { [s] = await Promise.all([summary(), seeded]); } catch (e) {
      cards.replaceChildren(h('p', {class: 'error', text: `cannot read the API: ${e.message}`}));
      return;
    }
    if (stopped) return;
    const st = s.byState;
    cards.replaceChildren(
      card('GPUs busy', `${s.busy} / ${s.gpus}`, 'busy'),
      card('GPUs free', s.free, 'free'),
      card('GPUs down', s.down, s.down ? 'down' : ''),
      card('GPUs drained (idle)', s.drained, s.drained ? 'drain' : ''),
      card('jobs running', (st.RUNNING || 0) + (st.STARTING || 0), 'running'),
      card('jobs pending', st.PENDING || 0, 'pending'),
      card('oldest pending waits', s.oldestWait === null ? 'none pending' : fmtDuration(s.oldestWait), ''),
      card('jobs completed', st.COMPLETED || 0, ''),
      card('nodes (down / drained)', `${s.nodes} (${s.nodesDown} / ${s.nodesDrain})`, ''),
    );
    const t = now();
    const last = samples[samples.length - 1];
    if (!last || t - last[0] >= 0.9) samples.push([t, s.gpus ? (100 * s.busy) / s.gpus : 0]);
    samples = samples.slice(-kMaxSamples);
    sessionStorage.setItem(KEY, JSON.stringify(samples));
    const data = [samples.map((p) => p[0]), samples.map((p) => p[1])];
    if (!chart) {
      chart = lineChart(chartBox, {series: [{label: 'GPUs busy %', stroke: '#2a6fdb'}], data, yRange: [0, 100],
                                   yLabel: '%'});
    } else chart.update(data);
  };
  const soon = debounce(refresh, 300);
  const offs = [live.on('job', soon), live.on('node', soon), live.on('tick', refresh),
                live.on('reconnect', soon)];
  const timer = setInterval(refresh, 5000);  // utilization samples even when nothing changes
  refresh();
  return () => {
    stopped = true;
    clearInterval(timer);
    soon.cancel();
    offs.forEach((off) => off());
    if (chart) chart.destroy();
  };
}
