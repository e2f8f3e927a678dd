// The scheduler's public HTTP API (scheduler/API.md) and its live stream (`/api/v1/watch`, PROTOCOL.md).
// The token lives in sessionStorage (or localStorage when the user asks to be remembered) and is sent
// only in the Authorization header or the watch socket's first frame: never in a URL.

const BASE = '/api/v1';
const KEY = 'railyard.token';

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export function getToken() {
  return sessionStorage.getItem(KEY) || localStorage.getItem(KEY) || '';
}

export function setToken(token, remember) {
  sessionStorage.removeItem(KEY);
  localStorage.removeItem(KEY);
  if (token) (remember ? localStorage : sessionStorage).setItem(KEY, token);
}

async function request(method, path, body) {
  const headers = {};
  const token = getToken();
  // Sent on reads too: logs always need it, and every read does under --private.
  if (token) headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(BASE + path, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: 'no-store',
  });
  const type = res.headers.get('content-type') || '';
  const payload = type.includes('json') ? await res.json().catch(() => null) : await res.text();
  if (!res.ok) {
    const err = payload && payload.error ? payload.error : {};
    throw new ApiError(res.status, err.code || String(res.status), err.message || res.statusText);
  }
  return payload;
}

export const get = (path) => request('GET', path);
export const post = (path, body) => request('POST', path, body);

export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') q.set(k, v);
  const s = q.toString();
  return s ? `?${s}` : '';
}

// Prometheus text → {'name{labels}': value}, plus unlabelled names.
export function parseMetrics(text) {
  const out = {};
  for (const line of String(text || '').split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const sp = line.lastIndexOf(' ');
    if (sp < 0) continue;
    out[line.slice(0, sp)] = Number(line.slice(sp + 1));
  }
  return out;
}

// The stored token's role from GET /whoami ({"user", "role"}): 'admin' or 'user'; null without a token or
// when the scheduler refuses it.
export async function tokenRole() {
  if (!getToken()) return null;
  try {
    const me = await get('/whoami');
    return me.role === 'admin' || me.role === 'user' ? me.role : null;
  } catch {
    return null;
  }
}

// Every job whose id is above `after`, page by page (limit 10,000), up to `max` jobs.
export async function listAll(params, max = 50000) {
  const jobs = [];
  let after = 0;
  for (;;) {
    const page = await get('/jobs' + query({...params, limit: 10000, after: after || undefined}));
    jobs.push(...page.jobs);
    if (page.next_after === null || page.next_after === undefined || jobs.length >= max) return jobs;
    after = page.next_after;
  }
}
