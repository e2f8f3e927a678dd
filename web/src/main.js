// The dashboard shell: hash routes (#/overview, #/jobs, #/job/ID, #/ttt, #/map, #/share, #/nodes, #/audit), the admin
// token form, and the live-update indicator. Each view module exports mount(root, params) → unmount.

import {getToken, setToken, tokenRole} from './api.js';
import {clear, h} from './dom.js';
import * as leader from './leader.js';
import * as live from './live.js';
import * as overview from './views/overview.js';
import * as jobs from './views/jobs.js';
import * as job from './views/job.js';
import * as ttt from './views/ttt.js';
import * as map from './views/map.js';
import * as share from './views/share.js';
import * as nodes from './views/nodes.js';
import * as audit from './views/audit.js';

const views = {overview, jobs, job, ttt, map, share, nodes, audit};
// Views only an admin sees: their nav links are hidden, and opening one by URL shows a note instead.
const adminViews = {nodes: 'Nodes', audit: 'Audit'};
const root = document.getElementById('view');
let unmount = null;
let isAdmin = false;

function parseHash() {
  const [path, qs] = (location.hash.replace(/^#\/?/, '') || 'overview').split('?');
  const [name, ...rest] = path.split('/');
  return {name: views[name] ? name : 'overview', args: rest, params: new URLSearchParams(qs || '')};
}

function route() {
  const r = parseHash();
  if (unmount) unmount();
  unmount = null;
  clear(root);
  delete root.dataset.ready;
  for (const a of document.querySelectorAll('#nav a'))
    a.classList.toggle('active', a.dataset.view === (r.name === 'job' ? 'jobs' : r.name));
  if (adminViews[r.name] && !isAdmin) {
    root.appendChild(h('p', {class: 'note'}, `The ${adminViews[r.name]} view needs an admin token: use "Admin token" above.`));
    return;
  }
  document.body.dataset.view = r.name;
  const res = views[r.name].mount(root, r);
  unmount = typeof res === 'function' ? res : null;
}

async function refreshRole() {
  const status = document.getElementById('token-status');
  const role = await tokenRole();
  isAdmin = role === 'admin';
  for (const name of Object.keys(adminViews)) document.getElementById(`nav-${name}`).hidden = !isAdmin;
  document.getElementById('token-btn').textContent = isAdmin ? 'Admin ✓' : 'Admin token';
  status.textContent = !getToken() ? '' : role === 'admin' ? 'admin token accepted'
                       : role === 'user' ? 'this token is not an admin token' : 'token refused';
  document.body.classList.toggle('admin', isAdmin);
}

function setupToken() {
  const form = document.getElementById('token-form');
  const input = document.getElementById('token-input');
  document.getElementById('token-btn').addEventListener('click', () => {
    form.hidden = !form.hidden;
    if (!form.hidden) input.focus();
  });
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    setToken(input.value.trim(), document.getElementById('token-remember').checked);
    input.value = '';
    await refreshRole();
    live.restart();
    if (isAdmin) form.hidden = true;
    route();
  });
  document.getElementById('token-forget').addEventListener('click', async () => {
    setToken('', false);
    await refreshRole();
    live.restart();
    route();
  });
}

function setupLive() {
  const el = document.getElementById('live');
  live.onMode((m) => {
    el.textContent = m === 'live' ? 'live' : m === 'polling' ? 'polling (1 s)' : 'connecting';
    el.className = `live live-${m}`;
  });
  live.start();
}

setupToken();
setupLive();
leader.start(document.getElementById('leader'));
window.addEventListener('hashchange', route);
refreshRole().finally(route);
