// Sharing: how the queue divides the cluster. Fair share by user or project (GET /api/v1/fairshare: decayed
// GPU-hours, share of all usage, shares, the factor the priority uses, GPUs held, jobs waiting) and the quotas
// admins set (GET /api/v1/quotas: GPU bounds with the GPUs in use against each, and shares). Public, as both
// routes are; refreshed as jobs change.

import {get, query} from '../api.js';
import {debounce, h} from '../dom.js';
import * as live from '../live.js';

const pct = (x) => `${(100 * x).toFixed(1)} %`;

export function mount(root) {
  const by = h('select', {id: 'share-by', onchange: () => load()},
               ['user', 'project'].map((v) => h('option', {value: v, text: `by ${v}`})));
  const status = h('span', {id: 'share-status', class: 'muted'});
  const shareBody = h('tbody');
  const shareTable = h('table', {class: 'jobs', id: 'share-table'},
    h('thead', {}, h('tr', {}, ['Name', 'Usage (GPU-h, decayed)', 'Usage share', 'Shares', 'Fair share', 'Factor',
                                'GPUs in use', 'Pending'].map((t) => h('th', {text: t})))), shareBody);
  const quotaBody = h('tbody');
  const quotaTable = h('table', {class: 'jobs', id: 'quota-table'},
    h('thead', {}, h('tr', {}, ['Kind', 'Name', 'Quota (GPUs)', 'In use', 'Shares'].map((t) => h('th', {text: t})))),
    quotaBody);
  const halfLife = h('p', {class: 'muted', id: 'share-half-life'});
  root.append(h('h1', {text: 'Sharing'}), h('div', {class: 'toolbar'}, by, status),
              shareTable, halfLife, h('h2', {text: 'Quotas'}), quotaTable);
  let stopped = false;

  const shareRow = (r, key) => h('tr', {'data-name': r[key]},
    h('td', {text: r[key]}), h('td', {class: 'num', text: r.usage_gpu_hours.toFixed(1)}),
    h('td', {class: 'num', text: pct(r.usage_share)}), h('td', {class: 'num', text: r.shares}),
    h('td', {class: 'num', text: pct(r.fair_share)}),
    h('td', {class: 'num', text: r.factor.toFixed(3)}), h('td', {class: 'num', text: r.gpus_in_use}),
    h('td', {class: 'num', text: r.pending_jobs}));
  const quotaRow = (q) => h('tr', {'data-kind': q.kind, 'data-name': q.name},
    h('td', {text: q.kind}), h('td', {text: q.name}), h('td', {class: 'num', text: q.gpus ?? '-'}),
    h('td', {class: `num ${q.gpus !== null && q.in_use >= q.gpus ? 'error' : ''}`, text: q.in_use}),
    h('td', {class: 'num', text: q.shares}));

  async function load() {
    try {
      const [share, quotas] = await Promise.all([get('/fairshare' + query({by: by.value})), get('/quotas')]);
      if (stopped) return;
      shareBody.replaceChildren(...share.rows.map((r) => shareRow(r, share.by)));
      quotaBody.replaceChildren(...(quotas.quotas.length ? quotas.quotas.map(quotaRow)
        : [h('tr', {}, h('td', {colspan: 5, class: 'muted', text: 'no quotas: every user and project may use every GPU, with 1 share'}))]));
      const days = share.half_life_s / 86400;
      halfLife.textContent = share.half_life_s > 0
        ? `Usage halves every ${days >= 1 ? `${+days.toFixed(1)} days` : `${+(share.half_life_s / 3600).toFixed(1)} hours`}; ` +
          'the factor is 2^(−usage share / fair share), and a job\'s priority adds its fair-share weight × the mean of its user\'s and project\'s factors.'
        : 'This scheduler keeps no fair-share usage.';
      status.textContent = `${share.rows.length} ${share.by}${share.rows.length === 1 ? '' : 's'}`;
      root.dataset.ready = '1';
    } catch (e) {
      if (!stopped) status.textContent = `cannot read the sharing state: ${e.message}`;
    }
  }
  const soon = debounce(load, 500);
  const offs = [live.on('job', soon), live.on('tick', soon), live.on('reconnect', soon)];
  load();
  return () => { stopped = true; soon.cancel(); offs.forEach((off) => off()); };
}
