// Live updates. One WebSocket to /api/v1/watch (PROTOCOL.md, last section) feeds 'job', 'node' and
// 'metrics' messages to whichever view is mounted. When the socket cannot be opened (a proxy that drops
// upgrades, a scheduler restarting), the hub emits 'tick' every second instead and views re-read what
// they show; it retries the socket every 10 s. Views subscribe on mount and unsubscribe on unmount.

import {getToken} from './api.js';

const handlers = new Map();  // type -> Set(fn)
let socket = null;
let mode = 'connecting';     // 'live' | 'polling' | 'connecting'
let pollTimer = null;
let retryTimer = null;
const modeListeners = new Set();

export function on(type, fn) {
  if (!handlers.has(type)) handlers.set(type, new Set());
  handlers.get(type).add(fn);
  return () => handlers.get(type).delete(fn);
}

export function onMode(fn) {
  modeListeners.add(fn);
  fn(mode);
}

export const currentMode = () => mode;

function emit(type, msg) {
  for (const fn of handlers.get(type) || []) {
    try { fn(msg); } catch (e) { console.error(e); }
  }
}

function setMode(m) {
  mode = m;
  for (const fn of modeListeners) fn(m);
  if (m === 'polling' && !pollTimer) pollTimer = setInterval(() => emit('tick', {}), 1000);
  if (m === 'live' && pollTimer) { clearInterval(pollTimer); pollTimer = null; }
}

export function start() {
  if (socket) return;
  const url = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/api/v1/watch`;
  let opened = false;
  try {
    socket = new WebSocket(url);
  } catch {
    return fallback();
  }
  socket.onopen = () => {
    opened = true;
    const token = getToken();
    if (token) socket.send(JSON.stringify({type: 'auth', token}));
    setMode('live');
    emit('reconnect', {});  // views re-read: changes during the gap were not streamed
  };
  socket.onmessage = (ev) => {
    let msg;
    try { msg = JSON.parse(ev.data); } catch { return; }
    if (msg && typeof msg.type === 'string') emit(msg.type, msg);
  };
  socket.onclose = () => {
    socket = null;
    fallback();
    if (opened) console.warn('watch socket closed; polling until it reconnects');
  };
}

function fallback() {
  setMode('polling');
  clearTimeout(retryTimer);
  retryTimer = setTimeout(start, 10000);
}

// Restart the socket (after the token changed: the auth frame goes first).
export function restart() {
  if (socket) {
    socket.onclose = null;
    socket.close();
    socket = null;
  }
  clearTimeout(retryTimer);
  start();
}
