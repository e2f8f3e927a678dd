// Test harness for the dashboard's browser tests: a real railyard-scheduler on 127.0.0.1 with a temp
// SQLite file, its admin token, and headless Chromium driven by playwright-core.
//
// The scheduler serves web/dist itself when it knows `--web-root`; an older build without it is
// fronted by a small static server here that forwards /api and /metrics (HTTP and WebSocket
// upgrades) to it, so the tests run either way and say which they used.

import assert from 'node:assert/strict';
import {spawn, spawnSync} from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import {createRequire} from 'node:module';
import {after, before} from 'node:test';
import {fileURLToPath} from 'node:url';

export const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const webDist = path.join(repo, 'web', 'dist');
const require = createRequire(path.join(repo, 'web', 'package.json'));

export function binDir() {
  return process.env.RAILYARD_BIN_DIR || path.join(repo, 'build', 'web');
}

// A program from RAILYARD_BIN_DIR (flat) or the build tree (scheduler/, cli/, agent/, workloads/).
export function findBin(name) {
  const dir = binDir();
  for (const sub of ['', 'scheduler', 'cli', 'agent', 'workloads']) {
    const p = path.join(dir, sub, name);
    if (fs.existsSync(p)) return p;
  }
  return null;
}

export function tempDir(tag) {
  return fs.mkdtempSync(path.join(os.tmpdir(), `railyard-web-${tag}-`));
}

let webRootKnown;
function schedulerHasWebRoot(bin) {
  if (webRootKnown === undefined) {
    const r = spawnSync(bin, ['--help'], {encoding: 'utf8'});
    webRootKnown = `${r.stdout}${r.stderr}`.includes('--web-root');
  }
  return webRootKnown;
}

function createToken(bin, db, user, role) {
  const r = spawnSync(bin, ['token', 'create', '--db', db, '--user', user, '--role', role], {encoding: 'utf8'});
  if (r.status !== 0) throw new Error(`token create failed: ${r.stderr}`);
  return r.stdout.trim().split('\n').pop().trim();
}

// Starts the scheduler: {url (the dashboard's origin), api (scheduler origin), token, userToken, stop()}.
// opts.cluster: a cluster object written to a file; else opts.preset/opts.sus.
export async function startScheduler(opts = {}) {
  const bin = findBin('railyard-scheduler');
  if (!bin) throw new Error(`railyard-scheduler not found under ${binDir()} (set RAILYARD_BIN_DIR)`);
  const dir = tempDir('sched');
  const db = path.join(dir, 'state.db');
  const token = createToken(bin, db, 'admin', 'admin');
  const userToken = createToken(bin, db, 'ada', 'user');
  const args = ['--db', db, '--listen', '127.0.0.1:0'];
  if (opts.cluster) {
    const file = path.join(dir, 'cluster.json');
    fs.writeFileSync(file, JSON.stringify(opts.cluster));
    args.push('--cluster', file);
  } else {
    args.push('--preset', opts.preset || 'dgx-h100-superpod', '--sus', String(opts.sus || 1));
  }
  const served = schedulerHasWebRoot(bin);
  if (served) args.push('--web-root', webDist);
  const child = spawn(bin, args, {stdio: ['ignore', 'pipe', 'pipe']});
  let stderr = '';
  child.stderr.on('data', (d) => { stderr = (stderr + d).slice(-4000); });
  const api = await new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`scheduler did not start: ${stderr}`)), 20000);
    child.stdout.on('data', (d) => {
      out += d;
      const m = /listening on ([\d.]+:\d+)/.exec(out);
      if (m) { clearTimeout(timer); resolve(`http://${m[1]}`); }
    });
    child.on('exit', (code) => { clearTimeout(timer); reject(new Error(`scheduler exited ${code}: ${stderr}`)); });
  });
  child.stdout.resume();
  const front = served ? null : await startFront(new URL(api));
  const url = front ? front.url : api;
  return {
    url, api, token, userToken, dir, servedByScheduler: served,
    stderr: () => stderr,
    stop: async () => {
      if (front) await front.close();
      child.kill('SIGTERM');
      await new Promise((r) => (child.exitCode !== null ? r() : child.once('exit', r)));
      fs.rmSync(dir, {recursive: true, force: true});
    },
  };
}

// One unmasked text frame (server to client), RFC 6455 section 5.2.
function wsTextFrame(text) {
  const payload = Buffer.from(text, 'utf8');
  const n = payload.length;
  const head = n < 126 ? Buffer.from([0x81, n])
    : n < 65536 ? Buffer.from([0x81, 126, n >> 8, n & 255])
    : Buffer.concat([Buffer.from([0x81, 127]), (() => { const b = Buffer.alloc(8); b.writeBigUInt64BE(BigInt(n)); return b; })()]);
  return Buffer.concat([head, payload]);
}

const kTypes = {'.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.css': 'text/css',
                '.png': 'image/png', '.svg': 'image/svg+xml', '.txt': 'text/plain'};

// Static files of web/dist plus a pass-through of /api/* and /metrics to the scheduler. With
// {fakeWatch: true} the front answers /api/v1/watch itself and the test pushes messages with
// front.broadcast(obj): a stand-in for the scheduler's stream, to drive the live paths exactly.
export function startFront(target, {fakeWatch = false} = {}) {
  const watchers = new Set();
  const server = http.createServer((req, res) => {
    const p = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    if (p.startsWith('/api/') || p === '/metrics') {
      const up = http.request({host: target.hostname, port: target.port, method: req.method, path: req.url,
                               headers: req.headers}, (r) => { res.writeHead(r.statusCode, r.headers); r.pipe(res); });
      up.on('error', () => { res.writeHead(502); res.end(); });
      req.pipe(up);
      return;
    }
    const file = path.join(webDist, path.normalize(p === '/' ? '/index.html' : p));
    if (!file.startsWith(webDist) || !fs.existsSync(file) || fs.statSync(file).isDirectory()) {
      res.writeHead(404);
      res.end('not found');
      return;
    }
    res.writeHead(200, {'Content-Type': kTypes[path.extname(file)] || 'application/octet-stream'});
    fs.createReadStream(file).pipe(res);
  });
  server.on('upgrade', (req, socket, head) => {
    if (fakeWatch && req.url.startsWith('/api/v1/watch')) {
      const accept = crypto.createHash('sha1')
        .update(req.headers['sec-websocket-key'] + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest('base64');
      socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
                   `Sec-WebSocket-Accept: ${accept}\r\n\r\n`);
      watchers.add(socket);
      socket.on('data', () => {});  // the client's frames (auth) are not needed here
      socket.on('close', () => watchers.delete(socket));
      socket.on('error', () => watchers.delete(socket));
      return;
    }
    const up = net.connect(Number(target.port), target.hostname, () => {
      const lines = [`${req.method} ${req.url} HTTP/1.1`,
                     ...Object.entries(req.headers).map(([k, v]) => `${k}: ${v}`), '', ''];
      up.write(lines.join('\r\n'));
      if (head.length) up.write(head);
      up.pipe(socket);
      socket.pipe(up);
    });
    up.on('error', () => socket.destroy());
    socket.on('error', () => up.destroy());
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => {
    resolve({url: `http://127.0.0.1:${server.address().port}`,
             watchers: () => watchers.size,
             broadcast: (obj) => { for (const w of watchers) w.write(wsTextFrame(JSON.stringify(obj))); },
             close: () => new Promise((r) => {
               for (const w of watchers) w.destroy();
               server.closeAllConnections();
               server.close(r);
             })});
  }));
}

// JSON over HTTP with an optional bearer token.
export async function api(base, method, route, body, token) {
  const headers = {'Content-Type': 'application/json'};
  if (token) headers.Authorization = `Bearer ${token}`;
  const res = await fetch(`${base}/api/v1${route}`, {method, headers,
                                                      body: body === undefined ? undefined : JSON.stringify(body)});
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  if (!res.ok) throw new Error(`${method} ${route}: ${res.status} ${text}`);
  return json;
}

export async function waitFor(fn, {timeout = 10000, interval = 100, what = 'condition'} = {}) {
  const end = Date.now() + timeout;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, interval));
  }
}

export function chromiumPath() {
  for (const p of [process.env.CHROMIUM_PATH, '/usr/lib/chromium/chromium', '/usr/bin/chromium']) {
    if (p && fs.existsSync(p)) return p;
  }
  return null;
}

// A scheduler (startScheduler(opts)) and a browser for the tests of one describe block: started before them,
// stopped after. Returns {s, b}, set once both are up.
export function schedulerAndBrowser(opts) {
  const env = {s: null, b: null};
  before(async () => {
    env.s = await startScheduler(opts);
    env.b = await launchBrowser();
  });
  after(async () => {
    await env.b?.close();
    await env.s?.stop();
  });
  return env;
}

// For a describe block: `railyard up --nodes N` (a scheduler and real emulated agents, in a temporary state
// directory and HOME) and a browser; `railyard down` and cleanup after. Returns {dir, env, url, token, front,
// b, base()} filled in by `before`: `front` is the test's own web front when the scheduler `railyard up`
// started does not serve web/dist, and base() the URL pages load from.
export function localClusterAndBrowser({railyard, nodes, tag}) {
  const c = {dir: null, env: null, url: null, token: null, front: null, b: null,
             base: () => (c.front ? c.front.url : c.url)};
  before(async () => {
    c.dir = tempDir(tag);
    const pathDirs = [...new Set([railyard, findBin('railyard-agent'), findBin('railyard-scheduler')]
      .filter(Boolean).map((p) => path.dirname(p)))];
    c.env = {...process.env, PATH: `${pathDirs.join(':')}:${process.env.PATH}`, HOME: c.dir};
    const r = spawnSync(railyard, ['up', '--nodes', String(nodes), '--profile', 'dgx-h100', '--state-dir', c.dir,
                                   '--port', '0', '--no-config'], {encoding: 'utf8', env: c.env, timeout: 60000});
    assert.equal(r.status, 0, `railyard up failed: ${r.stderr}`);
    c.url = /RAILYARD_URL=(\S+)/.exec(r.stdout)[1];
    c.token = /RAILYARD_TOKEN=(\S+)/.exec(r.stdout)[1];
    const index = await fetch(`${c.url}/`).then((res) => (res.ok ? res.text() : '')).catch(() => '');
    if (!index.includes('Railyard')) {
      c.front = await startFront(new URL(c.url));
      console.log('# the scheduler started by `railyard up` does not serve web/dist: using the test front');
    }
    c.b = await launchBrowser();
  });
  after(async () => {
    await c.b?.close();
    if (c.front) await c.front.close();
    if (c.dir) {
      spawnSync(railyard, ['down', '--state-dir', c.dir], {env: c.env, timeout: 30000});
      fs.rmSync(c.dir, {recursive: true, force: true});
    }
  });
  return c;
}

// Headless Chromium with a throwaway profile. Returns {context, newPage(), close()}; every page records
// dialogs (none may open) and the URLs it requested (the token must never be in one).
export async function launchBrowser() {
  const {chromium} = require('playwright-core');
  const profile = tempDir('profile');
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: chromiumPath(),
    headless: true,
    viewport: {width: 1280, height: 800},
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const dialogs = [];
  const urls = [];
  const errors = [];
  context.on('request', (r) => urls.push(r.url()));
  const watch = (page) => {
    page.on('dialog', (d) => { dialogs.push(d.message()); d.dismiss().catch(() => {}); });
    page.on('pageerror', (e) => errors.push(String(e)));
  };
  context.pages().forEach(watch);
  context.on('page', watch);
  return {
    context, dialogs, urls, errors,
    newPage: async () => {
      const p = await context.newPage();
      return p;
    },
    close: async () => {
      await context.close();
      fs.rmSync(profile, {recursive: true, force: true});
    },
  };
}

// Screenshots are test output: under the build tree (RAILYARD_SCREENSHOT_DIR, which ctest sets to
// <build>/screenshots), else under the binary dir; never in the source tree.
export const screenshotDir = process.env.RAILYARD_SCREENSHOT_DIR || path.join(binDir(), 'screenshots');

export async function screenshot(page, name) {
  fs.mkdirSync(screenshotDir, {recursive: true});
  await page.screenshot({path: path.join(screenshotDir, `${name}.png`), fullPage: false});
}

// Whether the scheduler at `base` upgrades /api/v1/watch to a WebSocket (answers 101).
export function supportsWatch(base) {
  const u = new URL(base);
  return new Promise((resolve) => {
    const sock = net.connect(Number(u.port), u.hostname, () => {
      sock.write(['GET /api/v1/watch HTTP/1.1', `Host: ${u.host}`, 'Upgrade: websocket', 'Connection: Upgrade',
                  'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==', 'Sec-WebSocket-Version: 13', '', ''].join('\r\n'));
    });
    let got = '';
    sock.on('data', (d) => {
      got += d;
      if (got.includes('\r\n')) { sock.destroy(); resolve(/^HTTP\/1\.1 101/.test(got)); }
    });
    sock.on('error', () => resolve(false));
    sock.setTimeout(3000, () => { sock.destroy(); resolve(false); });
  });
}
