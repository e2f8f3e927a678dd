// Audit (admin): the audit log of mutating requests (GET /api/v1/audit: who, from where, what, the answer),
// newest first. The API returns the newest `limit` rows oldest first; the page reverses them. Shown only
// to an admin (main.js checks the role from /whoami); the API refuses anyone else with 403 anyway.

import {get, query} from '../api.js';
import {debounce, h} from '../dom.js';
import * as live from '../live.js';

const kLimits = [100, 1000, 10000];

// "2026-01-02 03:04:05.678" in UTC, like the other views' times (with milliseconds: rows are often close).
function fmtMs(ms) {
  return new Date(ms).toISOString().replace('T', ' ').slice(0, 23);
}

export function mount(root) {
  const user = h('input', {id: 'audit-user', placeholder: 'actor', size: 14, oninput: () => soon()});
  const limit = h('select', {id: 'audit-limit', onchange: () => load()},
                  kLimits.map((n) => h('option', {value: n, text: `last ${n}`})));
  const status = h('span', {id: 'audit-status', class: 'muted'});
  const tbody = h('tbody');
  const table = h('table', {class: 'jobs', id: 'audit-table'},
    h('thead', {}, h('tr', {}, ['Time (UTC)', 'Actor', 'Source', 'Method', 'Target', 'Status']
      .map((t) => h('th', {text: t})))), tbody);
  root.append(h('h1', {text: 'Audit log'}),
              h('div', {class: 'toolbar'}, user, limit,
                h('button', {type: 'button', id: 'audit-refresh', text: 'Refresh', onclick: () => load()}), status),
              table);
  let stopped = false;

  const row = (r) => h('tr', {'data-target': r.target, 'data-status': r.status},
    h('td', {class: 'nowrap', text: fmtMs(r.time_ms)}), h('td', {class: 'actor', text: r.actor || '(none)'}),
    h('td', {class: 'source', text: r.source}), h('td', {text: r.method}), h('td', {class: 'target', text: r.target}),
    h('td', {class: `num ${r.status >= 400 ? 'error' : ''}`, text: r.status}));

  async function load() {
    try {
      const res = await get('/audit' + query({user: user.value.trim(), limit: limit.value}));
      if (stopped) return;
      const rows = res.rows.slice().reverse();
      tbody.replaceChildren(...rows.map(row));
      status.textContent = `${rows.length} row${rows.length === 1 ? '' : 's'}`;
      table.dataset.ready = '1';
    } catch (e) {
      if (!stopped) status.textContent = `cannot read the audit log: ${e.message}`;
    }
  }
  // A change a row records shows up as a job or node message (or, when polling, a tick); a refused request
  // changes nothing and streams nothing, so the page also re-reads every 5 s.
  const soon = debounce(load, 300);
  const offs = [live.on('job', soon), live.on('node', soon), live.on('tick', soon), live.on('reconnect', soon)];
  const timer = setInterval(load, 5000);
  load();
  return () => { stopped = true; soon.cancel(); clearInterval(timer); offs.forEach((off) => off()); };
}
