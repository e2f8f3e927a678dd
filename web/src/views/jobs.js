// Jobs: one page of the queue at a time, read with the API's cursor paging (`limit` with `after`, or
// `order=desc` with `before`) so a page is one request and costs the same with 100 or 100,000 jobs in
// history; the view opens on the newest page. State and user filter on the server; the name filter and
// column sorting apply to the page shown. Live: rows update in place from the watch stream, and new
// jobs are appended while the newest page is shown.

import {get, query} from '../api.js';
import {arrayProgress, coalesce, fmtDuration, h, now, reasonText, stateClass} from '../dom.js';
import * as live from '../live.js';

const kStates = ['', 'PENDING', 'HELD', 'STARTING', 'RUNNING', 'COMPLETED', 'FAILED', 'CANCELLED', 'TIMEOUT',
                 'NODE_FAIL', 'PREEMPTED', 'OUT_OF_MEMORY'];

const wait = (j) => (j.submit_time == null ? null : (j.start_time ?? now()) - j.submit_time);
const runtime = (j) => (j.start_time == null ? null : (j.end_time ?? now()) - j.start_time);
const leaves = (j) => (j.leaves_spanned == null ? '' : `${j.leaves_spanned} / ${j.min_leaves}`);

const kColumns = [
  {key: 'id', label: 'ID', num: true, value: (j) => j.id},
  {key: 'name', label: 'Name', value: (j) => (j.name || '') + (j.array_task != null ? `[${j.array_task}]` : '')},
  {key: 'user', label: 'User', value: (j) => j.user || ''},
  {key: 'state', label: 'State', value: (j) => j.state},
  {key: 'gpus', label: 'GPUs', num: true, value: (j) => j.gpus},
  {key: 'leaves', label: 'Leaves (used / min)', num: true, value: (j) => j.leaves_spanned ?? -1, show: leaves},
  {key: 'wait', label: 'Wait', num: true, value: wait, show: (j) => fmtDuration(wait(j))},
  {key: 'run', label: 'Run time', num: true, value: runtime, show: (j) => fmtDuration(runtime(j))},
  {key: 'ttt', label: 'Time-to-train', num: true, value: (j) => j.time_to_train_s,
   show: (j) => fmtDuration(j.time_to_train_s)},
  {key: 'reason', label: 'Reason', value: (j) => arrayProgress(j) || reasonText(j)},
];

// A page of jobs, held in ascending id order. "Newest" and "older" read newest first (`order=desc`,
// `before=`); "oldest" and "newer" read oldest first (`after=`): each move is one request.
class Pager {
  constructor(filters, limit) {
    this.filters = filters;
    this.limit = limit;
    this.jobs = [];
    this.hasNext = false;  // newer jobs exist
    this.hasPrev = false;  // older jobs exist
  }

  fetch(params) {
    return get('/jobs' + query({...this.filters, limit: this.limit, ...params}));
  }

  // Jobs above `after`, oldest first.
  async from(after) {
    const page = await this.fetch({after: after || undefined});
    this.jobs = page.jobs;
    this.hasNext = page.next_after !== null;
    this.hasPrev = after > 0;
  }

  // Jobs below `before` (all when undefined), newest first.
  async below(before) {
    const page = await this.fetch({order: 'desc', before});
    this.jobs = page.jobs.reverse();
    this.hasPrev = page.next_before !== null;
    this.hasNext = before !== undefined;
  }

  first() { return this.from(0); }
  last() { return this.below(undefined); }
  async next() { if (this.jobs.length) await this.from(this.jobs[this.jobs.length - 1].id); }
  async prev() { if (this.jobs.length) await this.below(this.jobs[0].id); }

  // Re-read the page shown (polling mode); at the newest end, follow new jobs.
  async reload() {
    if (!this.jobs.length || !this.hasNext) return this.last();
    const hasPrev = this.hasPrev;
    await this.from(this.jobs[0].id - 1);
    this.hasPrev = hasPrev;
  }
}

export function mount(root, {params}) {
  const filters = {state: params.get('state') || '', user: params.get('user') || ''};
  let nameFilter = params.get('name') || '';
  let sort = {key: 'id', dir: -1};
  let pager = new Pager(filters, Number(params.get('limit')) || 100);
  let stopped = false;
  let loaded = false;

  const stateSel = h('select', {id: 'f-state', onchange: () => { filters.state = stateSel.value; reset(); }},
                     kStates.map((s) => h('option', {value: s, text: s || 'any state'})));
  stateSel.value = filters.state;
  const userIn = h('input', {id: 'f-user', placeholder: 'user', size: 10, value: filters.user,
                             onchange: () => { filters.user = userIn.value.trim(); reset(); }});
  const nameIn = h('input', {id: 'f-name', placeholder: 'name contains (this page)', size: 22, value: nameFilter,
                             oninput: () => { nameFilter = nameIn.value; render(); }});
  const sizeSel = h('select', {id: 'f-limit', onchange: () => { pager.limit = Number(sizeSel.value); reset(); }},
                    [50, 100, 500, 1000].map((n) => h('option', {value: n, text: `${n} per page`})));
  sizeSel.value = String(pager.limit);
  const nav = (fn) => async () => { await fn(); render(); };
  const btn = (label, fn) => h('button', {type: 'button', text: label, onclick: nav(fn)});
  const bFirst = btn('« First', () => pager.first());
  const bPrev = btn('‹ Prev', () => pager.prev());
  const bNext = btn('Next ›', () => pager.next());
  const bLast = btn('Newest »', () => pager.last());
  const info = h('span', {class: 'muted'});
  const thead = h('thead');
  const tbody = h('tbody');
  const table = h('table', {class: 'jobs', id: 'jobs-table'}, thead, tbody);
  root.append(h('h1', {text: 'Jobs'}),
              h('div', {class: 'toolbar'}, stateSel, userIn, nameIn, sizeSel, bFirst, bPrev, bNext, bLast, info),
              table);

  function renderHead() {
    thead.replaceChildren(h('tr', {}, kColumns.map((c) => h('th', {
      class: c.num ? 'num sortable' : 'sortable', 'data-key': c.key,
      text: c.label + (sort.key === c.key ? (sort.dir > 0 ? ' ▲' : ' ▼') : ''),
      onclick: () => { sort = {key: c.key, dir: sort.key === c.key ? -sort.dir : (c.num ? -1 : 1)}; render(); },
    }))));
  }

  function row(j) {
    return h('tr', {'data-id': j.id}, kColumns.map((c) => {
      if (c.key === 'id') return h('td', {class: 'num'}, h('a', {href: `#/job/${j.id}`, text: j.id}));
      if (c.key === 'state') return h('td', {}, h('span', {class: stateClass(j.state), text: j.state}));
      const v = c.show ? c.show(j) : c.value(j);
      return h('td', {class: c.num ? 'num' : '', text: v ?? ''});
    }));
  }

  const render = coalesce(() => {
    if (stopped) return;
    renderHead();
    const col = kColumns.find((c) => c.key === sort.key);
    const needle = nameFilter.toLowerCase();
    const rows = pager.jobs.filter((j) => !needle || String(j.name || '').toLowerCase().includes(needle));
    rows.sort((a, b) => {
      const x = col.value(a), y = col.value(b);
      if (x === y) return b.id - a.id;
      if (x === null || x === undefined) return 1;
      if (y === null || y === undefined) return -1;
      return (x < y ? -1 : 1) * sort.dir;
    });
    const frag = document.createDocumentFragment();
    for (const j of rows) frag.appendChild(row(j));
    tbody.replaceChildren(frag);
    bFirst.disabled = bPrev.disabled = !pager.hasPrev;
    bNext.disabled = !pager.hasNext;
    const ids = pager.jobs.map((j) => j.id);
    info.textContent = ids.length
      ? `jobs ${Math.min(...ids)}–${Math.max(...ids)} · ${rows.length} shown${pager.hasNext ? '' : ' · newest'}`
      : 'no jobs';
    if (loaded) table.dataset.ready = '1';  // the first page has arrived (tests wait on this)
  });

  async function reset() {
    pager = new Pager(filters, pager.limit);
    const q = new URLSearchParams(Object.entries(filters).filter(([, v]) => v));
    history.replaceState(null, '', `#/jobs${q.toString() ? '?' + q : ''}`);
    await pager.last();
    loaded = true;
    render();
  }

  const matches = (j) => (!filters.state || j.state === filters.state) && (!filters.user || j.user === filters.user);
  const onJob = (msg) => {
    const j = msg.job;
    if (!j || typeof j.id !== 'number') return;
    const i = pager.jobs.findIndex((x) => x.id === j.id);
    if (i >= 0) pager.jobs[i] = j;
    else if (!pager.hasNext && matches(j) && (!pager.jobs.length || j.id > pager.jobs[pager.jobs.length - 1].id)) {
      pager.jobs.push(j);
      if (pager.jobs.length > pager.limit) { pager.jobs.shift(); pager.hasPrev = true; }
    } else return;
    render();
  };
  let busy = false;
  const poll = async () => {
    if (busy || stopped) return;
    busy = true;
    try {
      await pager.reload();
      loaded = true;
      render();
    } finally {
      busy = false;
    }
  };
  const offs = [live.on('job', onJob), live.on('tick', poll), live.on('reconnect', poll)];
  const clock = setInterval(render, 5000);  // wait and run times move on
  reset().catch((e) => root.appendChild(h('p', {class: 'error', text: `cannot list jobs: ${e.message}`})));
  return () => {
    stopped = true;
    clearInterval(clock);
    offs.forEach((off) => off());
  };
}
