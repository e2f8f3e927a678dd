// Job detail: placement (nodes, GPUs, leaves used vs the minimum, the API's cost-model estimate of a
// 1 GiB allreduce over them), the quality curve from MLLOG (eval_accuracy vs wall time since run_start,
// with the target line), throughput, time-to-train, events and the last log lines. A part whose route
// fails (a logs read without a token, an agent that does not answer) shows "not available".

import {get, getToken, query} from '../api.js';
import {lineChart} from '../charts.js';
import {arrayProgress, coalesce, containerRows, debounce, dependsOn, fmtDuration, fmtTime, h, reasonText, stateClass} from '../dom.js';
import * as live from '../live.js';

// One MLLOG event as the agent reported it ({"key", "t", "value", "unit", "status", ...}): what the watch
// stream's metrics messages carry in "events", and the metrics route in each sample's "data".
const sampleOf = (e) => ({key: e.key, t: Number(e.t), value: e.value, unit: e.unit, status: e.status});

// GET /jobs/ID/metrics: {"job", "time_to_train_s", "samples": [{"alloc", "key", "t", "data": {...}}]}; the
// sample's own key and time (a telemetry sample's data has neither).
const routeSamples = (res) => (res ? res.samples.map((s) => ({...sampleOf(s.data), key: s.key, t: Number(s.t)})) : []);

function targetOf(job) {
  const t = job.spec && job.spec.target;
  return t && Number.isFinite(Number(t.value)) ? {metric: t.metric || 'eval_accuracy', value: Number(t.value)} : null;
}

const kTailBytes = 16384;

// The last kTailBytes of rank 0's stdout: one read for the file size, one for its end. Needs a token
// (the job's owner or an admin); answers a string, or an object {note} saying why there is none.
async function tailLog(id) {
  if (!getToken()) return {note: 'log lines need a token (the job owner or an admin)'};
  try {
    const head = await get(`/jobs/${id}/logs` + query({rank: 0, stream: 'out', offset: 0, max_bytes: 1}));
    const size = Number(head.size) || 0;
    if (size <= 1) return head.data || '';
    const offset = Math.max(0, size - kTailBytes);
    const tail = await get(`/jobs/${id}/logs` + query({rank: 0, stream: 'out', offset, max_bytes: kTailBytes}));
    const text = String(tail.data || '');
    return offset > 0 ? text.slice(text.indexOf('\n') + 1) : text;
  } catch (e) {
    return {note: [404, 405, 501].includes(e.status) ? 'logs not available' : `logs: ${e.message}`};
  }
}

// tailLog's answer: the text, or null when there is none (a {note} says why).
const logText = (res) => (typeof res === 'string' ? res : null);

// The agent's history note for a stopped run without a time-to-train starts so (agent/streams/metrics.hpp).
const kNoTimeToTrain = 'no time-to-train: ';

// Time-to-train as a duration, or why there is none; its title holds the seconds to the millisecond, as
// MLPerf counts them (`railyard show` prints the same).
function tttText(job, note) {
  const s = job.time_to_train_s;
  if (s != null) return fmtDuration(s);
  return note ? `none: ${note.slice(kNoTimeToTrain.length)}` : 'not reached';
}
const tttTitle = (job) => (job.time_to_train_s != null ? `${Number(job.time_to_train_s).toFixed(3)} s` : undefined);

// The API's cost-model estimate (GET /jobs/ID only) as one line, like `railyard show`.
function estimateText(e) {
  if (!e) return 'none';
  if (!(e.seconds > 0)) return 'one GPU: no collective crosses a link';
  const size = e.allreduce_bytes >= 2 ** 30 ? `${e.allreduce_bytes / 2 ** 30} GiB` : `${e.allreduce_bytes} B`;
  const time = e.seconds < 1 ? `${(e.seconds * 1000).toFixed(1)} ms` : `${e.seconds.toFixed(2)} s`;
  const slowest = e.bottleneck_gbits_s == null ? '' : `, slowest link ${Math.round(e.bottleneck_gbits_s)} Gb/s`;
  return `${size} in ${time} (${e.algorithm || 'ring'}, bus ${e.bus_gbytes_s.toFixed(1)} GB/s${slowest}, ` +
         `within one ${e.span}${e.rail_aligned === false ? ', rails crossed' : ''})`;
}

// The job's environment as one line, KEY=value ...: the API gives values only to the job's owner and admins
// (env_hidden: the others get each value as "<hidden>"), so the line then says why none shows.
function envText(job) {
  const env = job.spec && job.spec.env;
  const keys = env ? Object.keys(env) : [];
  if (!keys.length) return null;
  if (job.env_hidden) return `${keys.join(', ')} (values hidden: only the job's owner and admins see them)`;
  return keys.map((k) => `${k}=${env[k]}`).join(' ');
}

function kv(rows) {
  return h('table', {class: 'kv'}, rows.filter(Boolean).map(([k, v]) => h('tr', {}, h('th', {text: k}),
                                                                          h('td', {}, v ?? ''))));
}

export function mount(root, {args}) {
  const id = Number(args[0]);
  const head = h('div');
  const placement = h('section', {class: 'panel', id: 'placement'});
  const quality = h('section', {class: 'panel', id: 'quality'});
  const events = h('section', {class: 'panel', id: 'events'});
  const logs = h('section', {class: 'panel', id: 'logs'});
  root.append(h('p', {}, h('a', {href: '#/jobs', text: '← Jobs'})), head,
              h('div', {class: 'grid2'}, placement, quality), events, logs);
  let job = null;
  let metrics = [];
  let routeMetrics = [];
  const streamed = [];
  const mergeMetrics = () => {
    const seen = new Set();
    metrics = [...routeMetrics, ...streamed].filter((m) => {
      const k = `${m.key}|${m.t}|${m.value}`;
      return seen.has(k) ? false : (seen.add(k), true);
    });
  };
  let metricsRes = null;
  // Why a stopped run has no time-to-train, as the agent put it in the job's history ("no time-to-train:
  // the run did not succeed ..."); null until the events say so.
  let tttNote = null;
  let chart = null;
  let stopped = false;

  const renderHead = () => {
    head.replaceChildren(
      h('h1', {}, `Job ${job.id}: `, h('span', {class: 'jobname', text: job.name || '(no name)'}), ' ',
        h('span', {class: stateClass(job.state), text: job.state})),
      kv([['user', job.user], ['project', job.project], ['GPUs', `${job.gpus}${job.gpu_type ? ' × ' + job.gpu_type : ''}`],
          ...containerRows(job),
          ['submitted', fmtTime(job.submit_time)], ['started', fmtTime(job.start_time)], ['ended', fmtTime(job.end_time)],
          ['exit code', job.exit_code ?? ''], ['reason', reasonText(job)],
          job.array_tasks ? ['array', arrayProgress(job)] : null,
          job.array_job != null ? ['array', `task ${job.array_task} of array ${job.array_job}`] : null,
          dependsOn(job) ? ['depends on', dependsOn(job)] : null,
          job.held_by ? ['held by', job.held_by + (job.held_by_admin ? ' (an admin: only an admin may release it)' : '')] : null,
          envText(job) ? ['environment', h('span', {id: 'env', text: envText(job)})] : null,
          job.estimated_start ? ['estimated start', fmtTime(job.estimated_start)] : null,
          ['time-to-train', h('b', {id: 'ttt', text: tttText(job, tttNote), title: tttTitle(job)})]]));
    const gpuText = (job.gpu_ids || []).map((g) => (typeof g === 'object' ? `${g.gpu}:${g.mig}` : String(g))).join(', ');
    placement.replaceChildren(h('h2', {text: 'Placement'}), job.nodes && job.nodes.length ? kv([
      ['nodes', (job.nodes || []).join(', ')],
      ['GPU ids', gpuText],
      ['leaf switches', job.leaves_spanned == null ? '' : `${job.leaves_spanned} used, ${job.min_leaves} minimum`],
      ['allreduce estimate', h('span', {id: 'estimate', text: estimateText(job.estimate)})],
    ]) : h('p', {class: 'muted', text: 'not placed yet'}));
  };

  const renderQuality = () => {
    const target = targetOf(job);
    const metric = target ? target.metric : 'eval_accuracy';
    const start = metrics.find((m) => m.key === 'run_start');
    const points = metrics.filter((m) => m.key === metric && Number.isFinite(Number(m.value)))
      .sort((a, b) => a.t - b.t);
    const t0 = start ? start.t : points.length ? points[0].t : 0;
    const thr = metrics.filter((m) => m.key === 'throughput');
    const lastThr = thr.length ? thr[thr.length - 1] : null;
    const stop = metrics.find((m) => m.key === 'run_stop');
    const xs = points.map((p) => p.t - t0);
    const data = [xs, points.map((p) => Number(p.value))];
    const series = [{label: metric, stroke: '#2a6fdb', points: true}];
    if (target) { data.push(xs.map(() => target.value)); series.push({label: 'target', stroke: '#d9480f', dash: [6, 4]}); }
    if (!quality.firstChild) {
      quality.append(h('h2', {text: 'Quality'}), h('div', {class: 'qinfo'}), h('div', {class: 'chart', id: 'quality-chart'}));
    }
    const info = quality.querySelector('.qinfo');
    info.replaceChildren(kv([
      ['target', target ? `${target.metric} ≥ ${target.value}` : 'none declared'],
      ['latest', points.length ? `${Number(points[points.length - 1].value).toFixed(4)} at ${fmtDuration(xs[xs.length - 1])}` : 'no points yet'],
      ['throughput', lastThr ? `${Number(lastThr.value).toFixed(1)} ${lastThr.unit || ''}` : ''],
      ['run_stop', stop ? String(stop.status || '') : ''],
    ]));
    const box = quality.querySelector('.chart');
    if (!points.length) {
      if (chart) { chart.destroy(); chart = null; }
      box.replaceChildren(h('p', {class: 'muted', text: metricsRes === null ? 'metrics not available' : 'no points yet'}));
      return;
    }
    if (chart && chart.series !== series.length) { chart.destroy(); chart = null; }
    if (!chart) {
      box.replaceChildren();
      chart = lineChart(box, {series, data, time: false, xLabel: 'wall time since run_start (s)', yLabel: metric});
      chart.series = series.length;
    } else chart.update(data);
  };

  // GET /jobs/ID/events: {"job", "events": [{"time", "time_ms", "actor", "what"}]}; null when it failed.
  const renderEvents = (res) => {
    const list = res ? res.events : null;
    const note = list && [...list].reverse().find((e) => String(e.what || '').startsWith(kNoTimeToTrain));
    if (note && note.what !== tttNote) {
      tttNote = note.what;
      renderHead();
    }
    events.replaceChildren(h('h2', {text: 'Events'}), list === null ? h('p', {class: 'muted', text: 'events not available'})
      : h('table', {class: 'events'}, list.slice(-200).map((e) =>
        h('tr', {}, h('td', {class: 'nowrap', text: fmtTime(e.time)}), h('td', {class: 'muted', text: e.actor}),
          h('td', {text: e.what})))));
  };

  const renderLogs = (res) => {
    const text = logText(res);
    const lines = text === null ? null : text.split('\n').slice(-50).join('\n');
    logs.replaceChildren(h('h2', {text: 'Last log lines (rank 0)'}),
                         lines === null ? h('p', {class: 'muted', text: (res && res.note) || 'logs not available'})
                                        : h('pre', {class: 'log', text: lines || '(empty)'}));
  };

  // Points are the union of the metrics route's answer and what the watch socket streamed since the
  // page opened (the route may lag the stream, or be missing on an older daemon).
  const loadExtras = async () => {
    if (!job) return;
    const [m, ev, lg] = await Promise.all([
      get(`/jobs/${id}/metrics`).catch(() => null),
      get(`/jobs/${id}/events`).catch(() => null),
      job.start_time ? tailLog(id) : Promise.resolve(null),
    ]);
    if (stopped) return;
    if (m !== null) {
      metricsRes = m;
      routeMetrics = routeSamples(m);
    }
    mergeMetrics();
    renderQuality();
    renderEvents(ev);
    renderLogs(lg);
    root.dataset.ready = '1';
  };
  const load = async () => {
    try {
      job = await get(`/jobs/${id}`);
    } catch (e) {
      head.replaceChildren(h('p', {class: 'error', text: `job ${args[0]}: ${e.message}`}));
      return;
    }
    if (stopped) return;
    renderHead();
    await loadExtras();
  };
  const reload = debounce(load, 300);
  const reloadExtras = debounce(loadExtras, 300);
  const redrawQuality = coalesce(() => !stopped && job && renderQuality());
  const offs = [
    live.on('job', (msg) => {
      if (!msg.job || msg.job.id !== id) return;
      // The stream's job has no estimate: keep the last one while the placement is the same.
      const same = job && JSON.stringify(job.gpu_ids) === JSON.stringify(msg.job.gpu_ids);
      job = {...msg.job, estimate: msg.job.estimate ?? (same ? job.estimate : null)};
      renderHead();
      reloadExtras();
    }),
    live.on('metrics', (msg) => {
      if (Number(msg.job) !== id) return;
      streamed.push(...msg.events.map(sampleOf));
      if (metricsRes === null) metricsRes = {streamed: true};
      mergeMetrics();
      redrawQuality();
    }),
    live.on('tick', load),
    live.on('reconnect', reload),
  ];
  const logTimer = setInterval(() => { if (job && job.state === 'RUNNING') reloadExtras(); }, 5000);
  load();
  return () => {
    stopped = true;
    clearInterval(logTimer);
    reload.cancel();
    reloadExtras.cancel();
    offs.forEach((off) => off());
    if (chart) chart.destroy();
  };
}
