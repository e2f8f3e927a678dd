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

// GET that answers null for a route this daemon does not have (404/405/501), for optional routes.
export async function getOptional(path) {
  try {
    return await get(path);
  } catch (e) {
    if (e instanceof ApiError && [404, 405, 501].includes(e.status)) return null;
    throw e;
  }
}

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

// Checks the stored token against the API without changing anything: a drain of a node that cannot
// exist answers 404 to an admin, 403 to a user and 401 to an unknown token.
export async function tokenRole() {
  if (!getToken()) return null;
  try {
    await post('/nodes/railyard-token-check.invalid/drain', {reason: 'token check'});
    return 'admin';
  } catch (e) {
    if (e.status === 404 || e.status === 400) return 'admin';
    if (e.status === 403) return 'user';
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
