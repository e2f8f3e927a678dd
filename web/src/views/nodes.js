// Nodes (admin): every node with its health; drain with a reason, resume. Shown only once the user
// entered an admin token (main.js checks it); every action goes through the API with that token.

import {get, post} from '../api.js';
import {debounce, h} from '../dom.js';
import * as live from '../live.js';

export function mount(root) {
  const filter = h('input', {id: 'node-filter', placeholder: 'node name contains', size: 20,
                             oninput: () => render()});
  const healthSel = h('select', {id: 'node-health', onchange: () => render()},
                      ['', 'up', 'drain', 'down', 'removed'].map((s) => h('option', {value: s, text: s || 'any health'})));
  const status = h('span', {id: 'node-status', class: 'muted'});
  const tbody = h('tbody');
  const table = h('table', {class: 'jobs', id: 'nodes-table'},
    h('thead', {}, h('tr', {}, ['Node', 'Leaf', 'GPU type', 'GPUs', 'Allocated', 'Health', 'Reason', 'Action']
      .map((t) => h('th', {text: t})))), tbody);
  root.append(h('h1', {text: 'Nodes'}), h('div', {class: 'toolbar'}, filter, healthSel, status), table);
  let nodes = [];
  let stopped = false;

  const act = async (node, action, reason) => {
    status.textContent = `${action} ${node.name}…`;
    try {
      const res = await post(`/nodes/${encodeURIComponent(node.name)}/${action}`, action === 'drain' ? {reason} : undefined);
      status.textContent = `${res.name}: ${res.health}`;
      await load();
    } catch (e) {
      status.textContent = `${action} ${node.name} refused: ${e.message}`;
    }
  };

  const row = (n) => {
    const reason = h('input', {placeholder: 'reason', size: 16, class: 'reason'});
    const action = n.health === 'drain' || n.health === 'removed'
      ? h('button', {type: 'button', class: 'resume', text: 'Resume', onclick: () => act(n, 'resume')})
      : h('span', {}, reason, h('button', {type: 'button', class: 'drain', text: 'Drain',
                                           onclick: () => act(n, 'drain', reason.value)}));
    return h('tr', {'data-node': n.name},
      h('td', {text: n.name}), h('td', {text: n.leaf ?? ''}), h('td', {text: n.gpu_type ?? ''}),
      h('td', {class: 'num', text: n.gpus}), h('td', {class: 'num', text: n.gpus_allocated}),
      h('td', {}, h('span', {class: `health health-${n.health}`, text: n.health})),
      h('td', {text: n.reason ?? ''}), h('td', {}, action));
  };

  function render() {
    const needle = filter.value.trim();
    const want = healthSel.value;
    const frag = document.createDocumentFragment();
    for (const n of nodes) {
      if (needle && !n.name.includes(needle)) continue;
      if (want && n.health !== want) continue;
      frag.appendChild(row(n));
    }
    tbody.replaceChildren(frag);
    table.dataset.ready = '1';
  }

  async function load() {
    try {
      const res = await get('/nodes');
      if (stopped) return;
      nodes = res.nodes;
      // Keep a half-typed reason: re-render only rows whose node changed.
      const typing = document.activeElement && document.activeElement.classList.contains('reason');
      if (!typing) render();
    } catch (e) {
      status.textContent = `cannot read nodes: ${e.message}`;
    }
  }
  const soon = debounce(load, 300);
  const offs = [live.on('node', soon), live.on('tick', soon), live.on('reconnect', soon)];
  load();
  return () => { stopped = true; soon.cancel(); offs.forEach((off) => off()); };
}
