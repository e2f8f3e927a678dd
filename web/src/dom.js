// DOM helpers. Every piece of data reaches the page through textContent or an attribute set by
// setAttribute/properties: nothing here parses HTML, so a job named "<script>" renders as text.

// h('td', {class: 'num', title: 'x', onclick: fn}, child...) where a child is a Node, a string or
// number (made a text node), or null/undefined/false (skipped).
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = String(v);
    else if (k in el && typeof v !== 'string') el[k] = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

export function fmtDuration(s) {
  if (s === null || s === undefined || !Number.isFinite(s)) return '';
  s = Math.max(0, s);
  if (s < 1) return `${Math.round(s * 1000)} ms`;
  if (s < 60) return s < 10 ? `${s.toFixed(1)} s` : `${Math.round(s)} s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${String(Math.floor(s % 60)).padStart(2, '0')}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
  return `${Math.floor(s / 86400)}d ${Math.floor((s % 86400) / 3600)}h`;
}

export function fmtTime(t) {
  if (t === null || t === undefined) return '';
  const d = new Date(t * 1000);
  return d.toISOString().replace('T', ' ').slice(0, 19);
}

export const now = () => Date.now() / 1000;

// When a reserved start is, as people read it: "starts in ~4 min, 00:19" (local time; with the day when it
// is not within one), "starts in <1 min", "starts any moment".
export function startsIn(t, at = now()) {
  const d = t - at;
  if (!(d > 0)) return 'starts any moment';
  if (d < 60) return 'starts in <1 min';
  const inText = d < 5400 ? `~${Math.round(d / 60)} min` : d < 172800 ? `~${Math.round(d / 3600)} h`
    : `~${Math.round(d / 86400)} days`;
  const date = new Date(t * 1000);
  const clock = `${String(date.getHours()).padStart(2, '0')}:${String(date.getMinutes()).padStart(2, '0')}`;
  const day = d < 86400 ? '' : date.toLocaleDateString(undefined, {weekday: 'short', day: 'numeric', month: 'short'}) + ' ';
  return `starts in ${inText}, ${day}${clock}`;
}

// A job's reason, with when its reservation starts it while it waits.
export function reasonText(job) {
  const reason = job.reason || '';
  if (job.state !== 'PENDING' || !job.estimated_start) return reason;
  return (reason ? reason + '; ' : '') + startsIn(job.estimated_start);
}

// A stable colour per job id, spread around the hue circle.
export function jobColor(id) {
  const hue = (Number(id) * 137.508) % 360;
  return `hsl(${hue.toFixed(0)}, 62%, 52%)`;
}

export function stateClass(state) {
  return 'st st-' + String(state || '').toLowerCase();
}

// Runs fn at most once per animation frame however often it is asked.
export function coalesce(fn) {
  let queued = false;
  return () => {
    if (queued) return;
    queued = true;
    requestAnimationFrame(() => { queued = false; fn(); });
  };
}

// Runs fn once, `ms` after the last of a burst of calls.
export function debounce(fn, ms) {
  let timer = null;
  const call = () => {
    clearTimeout(timer);
    timer = setTimeout(() => { timer = null; fn(); }, ms);
  };
  call.cancel = () => clearTimeout(timer);
  return call;
}

// A job's dependencies as its owner wrote them ("afterok:12, afterany:40, afterok:12_3"), else "".
export const dependsOn = (j) =>
  [...(j.spec?.afterok ?? []).map((id) => `afterok:${id}`), ...(j.spec?.after ?? [])].join(', ');

// A job's container as detail rows, like `railyard show`: [['image', ...], ['mounts', ...]]; [] for a job
// that runs on the node's own file system.
export const containerRows = (j) => {
  const c = j.spec?.container;
  if (!c?.image) return [];
  const rows = [['image', c.writable ? `${c.image} (writable)` : c.image]];
  if (c.mounts?.length) rows.push(['mounts', c.mounts.join(', ')]);
  return rows;
};

// "array 0-999: 3 active, 10 ended of 1000" for an array (its tasks are jobs of their own), else "".
export const arrayProgress = (j) => {
  const a = j.array_tasks;
  if (!a) return '';
  return `array ${j.spec?.array ?? ''}: ${a.active} active, ${a.completed + a.failed} ended of ${a.total}` +
    (a.failed ? ` (${a.failed} not completed)` : '');
};
