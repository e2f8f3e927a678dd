// Time-to-train: completed jobs that reached their target, grouped by workload (the job name), each
// run's time-to-train against its GPU count and against when it finished.

import {listAll} from '../api.js';
import {scatter} from '../charts.js';
import {debounce, fmtDuration, fmtTime, h, jobColor} from '../dom.js';
import * as live from '../live.js';

export function mount(root) {
  const body = h('div');
  root.append(h('h1', {text: 'Time-to-train'}),
              h('p', {class: 'muted', text: 'Completed runs that reached their quality target, by workload name.'}),
              body);
  let stopped = false;
  const load = async () => {
    let jobs;
    try {
      jobs = await listAll({state: 'COMPLETED'});
    } catch (e) {
      body.replaceChildren(h('p', {class: 'error', text: `cannot list jobs: ${e.message}`}));
      return;
    }
    if (stopped) return;
    const groups = new Map();
    for (const j of jobs) {
      if (j.time_to_train_s == null) continue;
      const name = j.name || '(no name)';
      if (!groups.has(name)) groups.set(name, []);
      groups.get(name).push(j);
    }
    if (!groups.size) {
      body.replaceChildren(h('p', {class: 'muted', id: 'ttt-empty', text: 'No run has reached its target yet.'}));
      root.dataset.ready = '1';
      return;
    }
    body.replaceChildren();
    for (const [name, runs] of [...groups].sort((a, b) => b[1].length - a[1].length)) {
      const best = runs.reduce((a, b) => (b.time_to_train_s < a.time_to_train_s ? b : a));
      const section = h('section', {class: 'panel workload'},
        h('h2', {}, h('span', {class: 'jobname', text: name}), ' ',
          h('span', {class: 'muted', text: `${runs.length} runs · best ${fmtDuration(best.time_to_train_s)} on ${best.gpus} GPUs`})));
      const charts = h('div', {class: 'grid2'});
      section.appendChild(charts);
      const label = (j) => `job ${j.id} · ${j.gpus} GPUs · ${fmtDuration(j.time_to_train_s)} · leaves ${j.leaves_spanned ?? '?'}/${j.min_leaves ?? '?'}`;
      const vsGpus = h('div', {}, h('h3', {text: 'vs GPU count'}));
      const overTime = h('div', {}, h('h3', {text: 'over time'}));
      charts.append(vsGpus, overTime);
      body.appendChild(section);
      scatter(vsGpus, {points: runs.map((j) => ({x: j.gpus, y: j.time_to_train_s, label: label(j), color: jobColor(j.gpus)})),
                       xLabel: 'GPUs', yLabel: 'time-to-train (s)', yFormat: (v) => fmtDuration(v)});
      scatter(overTime, {points: runs.map((j) => ({x: j.end_time ?? j.submit_time, y: j.time_to_train_s, label: label(j),
                                                   color: jobColor(j.gpus)})),
                         xLabel: 'finished', yLabel: 'time-to-train (s)', xFormat: (t) => fmtTime(t).slice(5, 16),
                         yFormat: (v) => fmtDuration(v)});
      const recent = [...runs].sort((a, b) => b.id - a.id).slice(0, 20);
      section.appendChild(h('table', {class: 'jobs'},
        h('thead', {}, h('tr', {}, ['job', 'GPUs', 'leaves', 'time-to-train', 'finished'].map((t) => h('th', {text: t})))),
        h('tbody', {}, recent.map((j) => h('tr', {},
          h('td', {}, h('a', {href: `#/job/${j.id}`, text: j.id})), h('td', {class: 'num', text: j.gpus}),
          h('td', {class: 'num', text: j.leaves_spanned == null ? '' : `${j.leaves_spanned}/${j.min_leaves}`}),
          h('td', {class: 'num', text: fmtDuration(j.time_to_train_s)}), h('td', {text: fmtTime(j.end_time)}))))));
    }
    root.dataset.ready = '1';
  };
  const soon = debounce(load, 1000);
  const offs = [live.on('job', (m) => { if (m.job && m.job.time_to_train_s != null) soon(); }),
                live.on('reconnect', soon)];
  const timer = setInterval(() => { if (live.currentMode() !== 'live') load(); }, 10000);
  load();
  return () => { stopped = true; soon.cancel(); clearInterval(timer); offs.forEach((off) => off()); };
}
