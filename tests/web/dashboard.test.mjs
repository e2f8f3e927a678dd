// Browser tests of the dashboard against a real railyard-scheduler (no agents needed): live job list,
// escaping, admin drain/resume with the scheduler's placement reacting, every view, and the first
// render with 10,000 jobs in history (printed, not asserted). Run with tests/web/run.sh.

import assert from 'node:assert/strict';
import {after, before, describe, test} from 'node:test';
import {api, chromiumPath, launchBrowser, screenshot, startFront, startScheduler, supportsWatch, waitFor}
  from './harness.mjs';

// Two leaves of two DGX H100 nodes; n1 alone has the feature "special", so a job asking for it can
// only go there.
const kCluster = {
  version: 1, name: 'web-test',
  nodes: [{name: 'n1', profile: 'dgx-h100', features: ['special']}, {names: 'n[2-4]', profile: 'dgx-h100'}],
  switches: [{name: 'leaf1', level: 'leaf', nodes: 'n[1-2]'}, {name: 'leaf2', level: 'leaf', nodes: 'n[3-4]'},
             {name: 'spine', level: 'spine', children: ['leaf1', 'leaf2']}],
};

// Jobs in history for the scale test: 10,000 (RAILYARD_WEB_HISTORY lowers it for slow sanitizer builds, or
// raises it: 100,000 was checked too).
const kHistory = Number(process.env.RAILYARD_WEB_HISTORY) || 10000;

const skipBrowser = chromiumPath() ? false : 'chromium is not installed (apt-get install chromium)';

describe('dashboard', {skip: skipBrowser}, () => {
  let s;
  let b;
  before(async () => {
    s = await startScheduler({cluster: kCluster});
    b = await launchBrowser();
    console.log(`# dashboard served by ${s.servedByScheduler ? 'railyard-scheduler --web-root' : 'the test front (scheduler has no --web-root yet)'}`);
  });
  after(async () => {
    await b?.close();
    await s?.stop();
  });

  test('a job submitted over HTTP appears in the Jobs view without reload', async () => {
    await api(s.url, 'POST', '/jobs', {name: 'before-open', gpus: 1}, s.token);
    const page = await b.newPage();
    await page.goto(`${s.url}/#/jobs`);
    await page.waitForSelector('#jobs-table[data-ready]');
    const navigations = [];
    page.on('framenavigated', (f) => { if (f === page.mainFrame()) navigations.push(f.url()); });
    const {id} = await api(s.url, 'POST', '/jobs', {name: 'live-one', gpus: 2}, s.token);
    const row = page.locator(`#jobs-table tr[data-id="${id}"]`);
    await row.waitFor({timeout: 5000});
    assert.match(await row.textContent(), /live-one/);
    assert.deepEqual(navigations, [], 'the page did not reload');
    if (await supportsWatch(s.api)) {
      await page.waitForFunction(() => document.getElementById('live').textContent === 'live');
      console.log('# live updates: watch WebSocket');
    } else {
      assert.equal(await page.textContent('#live'), 'polling (1 s)');
      console.log('# live updates: polling (the scheduler has no /api/v1/watch yet)');
    }
    await page.close();
  });

  // The scheduler's /api/v1/watch is stood in for by the test front, so the live paths (rows, quality
  // curve, time-to-train) are driven message by message, with no agent and no polling.
  test('watch messages update a row, the quality curve and the time-to-train live', async () => {
    const front = await startFront(new URL(s.api), {fakeWatch: true});
    try {
      const page = await b.newPage();
      const {id} = await api(s.api, 'POST', '/jobs', {name: 'bert-live', gpus: 8,
                                                      target: {metric: 'eval_accuracy', value: 0.72}}, s.token);
      await page.goto(`${front.url}/#/jobs`);
      await page.waitForFunction(() => document.getElementById('live').textContent === 'live');
      await page.locator(`#jobs-table tr[data-id="${id}"]`).waitFor();
      const job = await api(s.api, 'GET', `/jobs/${id}`);
      front.broadcast({type: 'job', job: {...job, state: 'RUNNING'}});
      await page.waitForFunction((jid) =>
        document.querySelector(`#jobs-table tr[data-id="${jid}"] .st`)?.textContent === 'RUNNING', id);
      await page.click(`#jobs-table tr[data-id="${id}"] a`);
      await page.waitForSelector('#quality .qinfo');
      const t0 = Math.floor(Date.now() / 1000) - 60;
      const acc = [0.31, 0.52, 0.64, 0.70, 0.735];
      front.broadcast({type: 'metrics', job: id, events: [
        {key: 'run_start', t: t0},
        ...acc.map((value, i) => ({key: 'eval_accuracy', t: t0 + 10 * (i + 1), value, epoch: i + 1})),
        {key: 'throughput', t: t0 + 50, value: 2345.6, unit: 'samples/s'}]});
      await page.waitForSelector('#quality-chart canvas');
      const info = await page.textContent('#quality .qinfo');
      assert.match(info, /0\.7350 at 50 s/);
      assert.match(info, /2345\.6 samples\/s/);
      assert.match(info, /eval_accuracy ≥ 0\.72/);
      front.broadcast({type: 'job', job: {...job, state: 'COMPLETED', time_to_train_s: 50, end_time: t0 + 55}});
      await page.waitForFunction(() => document.getElementById('ttt')?.textContent === '50 s');
      await page.waitForTimeout(500);  // the extras reload must not wipe the streamed curve
      assert.equal(await page.locator('#quality-chart canvas').count() > 0, true);
      await screenshot(page, 'job-live');
      await page.close();
    } finally {
      await front.close();
    }
  });

  test('a job named <script>alert(1)</script> renders as text', async () => {
    const names = ['<script>alert(1)</script>', '<img src=x onerror=alert(2)>'];
    const ids = [];
    for (const name of names) ids.push((await api(s.url, 'POST', '/jobs', {name, gpus: 1}, s.token)).id);
    const page = await b.newPage();
    await page.goto(`${s.url}/#/jobs`);
    for (const [i, id] of ids.entries()) {
      const cell = page.locator(`#jobs-table tr[data-id="${id}"] td:nth-child(2)`);
      await cell.waitFor();
      assert.equal(await cell.textContent(), names[i]);
    }
    assert.equal(await page.locator('#jobs-table img, #jobs-table script').count(), 0);
    await page.goto(`${s.url}/#/job/${ids[0]}`);
    await page.waitForSelector('.jobname');
    assert.equal(await page.locator('h1 .jobname').textContent(), names[0]);
    await page.waitForTimeout(300);  // give any injected script the chance to run
    assert.deepEqual(b.dialogs, [], 'no dialog opened');
    assert.deepEqual(b.errors, [], 'no page errors');
    await page.close();
  });

  test('a job page shows env keys but not their values to a reader who is not the owner', async () => {
    const {id} = await api(s.url, 'POST', '/jobs', {name: 'secretive', gpus: 1, env: {HF_TOKEN: 'hf_notForYou'}},
                           s.token);
    const page = await b.newPage();  // no token: an anonymous reader
    await page.goto(`${s.url}/#/job/${id}`);
    const env = page.locator('#env');
    await env.waitFor({timeout: 5000});
    const text = await env.textContent();
    assert.match(text, /HF_TOKEN/);
    assert.match(text, /values hidden/);
    assert.doesNotMatch(await page.content(), /hf_notForYou/);
    await page.close();
  });

  test('a job page shows the image and mounts of a job that runs in a container', async () => {
    const container = {image: 'nvcr.io#nvidia/pytorch:24.04-py3', mounts: ['/lustre:/data:ro', '/scratch:/scratch']};
    const {id} = await api(s.url, 'POST', '/jobs', {name: 'boxed', gpus: 1, container}, s.token);
    const page = await b.newPage();
    await page.goto(`${s.url}/#/job/${id}`);
    const image = page.locator('table.kv tr:has(th:text-is("image")) td');
    await image.waitFor({timeout: 5000});
    assert.equal(await image.textContent(), 'nvcr.io/nvidia/pytorch:24.04-py3');
    assert.equal(await page.locator('table.kv tr:has(th:text-is("mounts")) td').textContent(),
                 '/lustre:/data:ro, /scratch:/scratch');
    await page.close();
  });

  test('an array shows its progress, its tasks as name[index], and a cancel live', async () => {
    const {id} = await api(s.url, 'POST', '/jobs', {name: 'sweep', gpus: 8, array: '0-5'}, s.token);
    const page = await b.newPage();
    await page.goto(`${s.url}/#/jobs`);
    const row = page.locator(`#jobs-table tr[data-id="${id}"]`);
    await row.waitFor();
    assert.match(await row.textContent(), /array 0-5: 6 active, 0 ended of 6/);
    const tasks = (await api(s.url, 'GET', `/jobs?array=${id}`, undefined, s.token)).jobs;
    assert.equal(tasks.length, 6);
    const task = page.locator(`#jobs-table tr[data-id="${tasks[3].id}"] td:nth-child(2)`);
    await task.waitFor();
    assert.equal(await task.textContent(), `sweep[${tasks[3].array_task}]`);
    const after = await api(s.url, 'POST', '/jobs', {name: 'after', gpus: 1, dependency: `afterany:${id}_3`}, s.token);
    await api(s.url, 'POST', `/jobs/${id}/cancel`, undefined, s.token);  // also frees the GPUs for the tests after
    await waitFor(async () => /0 active, 6 ended of 6 \(6 not completed\)/.test(await row.textContent()),
                  {what: 'the array row after the cancel'});
    assert.match(await row.textContent(), /CANCELLED/);
    await page.goto(`${s.url}/#/job/${tasks[3].id}`);
    await page.waitForSelector('.jobname');
    await waitFor(async () => (await page.textContent('body')).includes(`task ${tasks[3].array_task} of array ${id}`),
                  {what: 'the task page naming its array'});
    await page.goto(`${s.url}/#/job/${after.id}`);  // task 3 ended (cancelled): afterany lets it start
    await waitFor(async () => (await page.textContent('body')).includes(`afterany:${id}_3`),
                  {what: 'the dependent job page naming the task it waited for'});
    await waitFor(async () => (await api(s.url, 'GET', `/jobs/${after.id}`, undefined, s.token)).state !== 'PENDING',
                  {what: 'the dependent job leaving PENDING'});
    await api(s.url, 'POST', `/jobs/${after.id}/cancel`, undefined, s.token).catch(() => {});
    assert.deepEqual(b.errors, [], 'no page errors');
    await page.close();
  });

  test('admin drains a node in the Nodes view and the scheduler stops placing on it', async () => {
    const own = await startScheduler({cluster: kCluster});  // its own: earlier jobs may sit on n1
    try {
      await drainAndResume(own);
    } finally {
      await own.stop();
    }
  });

  async function drainAndResume(s) {
    const page = await b.newPage();
    await page.goto(`${s.url}/#/overview`);
    assert.equal(await page.isVisible('#nav-nodes'), false, 'Nodes view hidden without a token');
    // A user token is refused as an admin token.
    await page.click('#token-btn');
    await page.fill('#token-input', s.userToken);
    await page.click('#token-form button[type=submit]');
    await page.waitForFunction(() => document.getElementById('token-status').textContent.includes('not an admin'));
    assert.equal(await page.isVisible('#nav-nodes'), false);
    await page.fill('#token-input', s.token);
    await page.click('#token-form button[type=submit]');
    await page.waitForSelector('#nav-nodes', {state: 'visible'});
    // The role comes from GET /whoami; nothing is POSTed to find it out.
    assert.ok(b.urls.some((u) => new URL(u).pathname === '/api/v1/whoami'), 'role read from /api/v1/whoami');
    assert.ok(b.urls.every((u) => !new URL(u).pathname.endsWith('/drain')), 'no drain before the admin asks for one');
    await page.click('#nav-nodes');
    const n1 = page.locator('#nodes-table tr[data-node="n1"]');
    await n1.locator('input.reason').fill('bad fan <b>1</b>');
    await n1.locator('button.drain').click();
    await page.waitForFunction(() =>
      document.querySelector('#nodes-table tr[data-node="n1"] .health')?.textContent === 'drain');
    assert.match(await n1.textContent(), /bad fan <b>1<\/b>/);
    const nodes = (await api(s.url, 'GET', '/nodes')).nodes;
    assert.equal(nodes.find((n) => n.name === 'n1').health, 'drain');
    await screenshot(page, 'nodes');

    // The control job can go anywhere; the special one only on n1, which is drained.
    const control = (await api(s.url, 'POST', '/jobs', {name: 'control', gpus: 8}, s.token)).id;
    const special = (await api(s.url, 'POST', '/jobs', {name: 'needs-n1', gpus: 8, features: ['special']}, s.token)).id;
    const placed = await waitFor(async () => {
      const j = await api(s.url, 'GET', `/jobs/${control}`);
      return j.state !== 'PENDING' && j;
    }, {timeout: 5000, what: 'the control job to leave PENDING'}).catch(() => null);
    const sj = await api(s.url, 'GET', `/jobs/${special}`);
    assert.equal(sj.state, 'PENDING', 'no placement on a drained node');
    console.log(`# job needing the drained node: ${sj.state}, reason: ${sj.reason}`);
    if (placed) assert.ok(!placed.nodes.includes('n1'), 'the control job avoided n1');

    // Resume from the UI: the waiting job now starts on n1 (when this daemon places without agents).
    await n1.locator('button.resume').click();
    await page.waitForFunction(() =>
      document.querySelector('#nodes-table tr[data-node="n1"] .health')?.textContent === 'up');
    if (placed) {
      const started = await waitFor(async () => {
        const j = await api(s.url, 'GET', `/jobs/${special}`);
        return j.state !== 'PENDING' && j;
      }, {timeout: 5000, what: 'the special job to start after resume'});
      assert.deepEqual(started.nodes, ['n1']);
    } else {
      console.log('# control job never placed (daemon needs agents to place): resume → start not checked');
    }
    assert.ok(b.urls.every((u) => !u.includes(s.token) && !u.includes(s.userToken)), 'token never in a URL');
    await page.close();
  }

  test('every view renders', async () => {
    const {id} = await api(s.url, 'POST', '/jobs', {name: 'resnet50', gpus: 16,
                                                    target: {metric: 'eval_accuracy', value: 0.759}}, s.token);
    // Placed (the daemon places without agents): the show route carries the cost-model estimate.
    const placed = await waitFor(async () => {
      const j = await api(s.url, 'GET', `/jobs/${id}`);
      return j.nodes.length > 0 && j;
    }, {timeout: 10000, what: 'resnet50 to be placed'});
    assert.equal(placed.estimate.allreduce_bytes, 2 ** 30);
    assert.ok(placed.estimate.seconds > 0 && placed.estimate.bus_gbytes_s > 0, JSON.stringify(placed.estimate));
    const page = await b.newPage();
    const views = [['overview', '.cards .card'], ['jobs', '#jobs-table[data-ready]'],
                   [`job/${id}`, '#placement h2'], ['ttt', 'main[data-ready], #view[data-ready]'],
                   ['map', '#view[data-ready] #map-canvas']];
    for (const [view, sel] of views) {
      await page.goto(`${s.url}/#/${view}`);
      await page.reload();
      await page.waitForSelector(sel, {timeout: 10000});
      await page.waitForTimeout(view === 'overview' ? 3000 : 200);  // a few utilization samples
      await screenshot(page, view.startsWith('job/') ? 'job' : view);
    }
    await page.goto(`${s.url}/#/job/${id}`);
    const estimate = await page.textContent('#placement #estimate');
    assert.match(estimate, new RegExp(`^1 GiB in .*bus ${placed.estimate.bus_gbytes_s.toFixed(1)} GB/s.*` +
                                      `within one ${placed.estimate.span}`));
    await page.goto(`${s.url}/#/overview`);
    await page.waitForSelector('.cards .card');
    assert.match(await page.textContent('.cards'), /GPUs busy/);
    // Hovering a GPU of n3 (placed job or free) names the node.
    await page.goto(`${s.url}/#/map`);
    await page.waitForSelector('#view[data-ready] #map-canvas');
    const box = await page.locator('#map-canvas').boundingBox();
    await page.mouse.move(box.x + 20, box.y + 50);  // first GPU of the first node (n1)
    await page.waitForSelector('#map-tip:not([hidden])');
    assert.match(await page.textContent('#map-tip'), /^n1 · GPU 0/);
    assert.deepEqual(b.errors, [], 'no page errors');
    await page.close();
  });
});

describe('dashboard at scale', {skip: skipBrowser}, () => {
  let s;
  let b;
  before(async () => {
    s = await startScheduler({preset: 'dgx-h100-superpod', sus: 32});  // 1,024 nodes, 8,192 GPUs
    b = await launchBrowser();
    const names = ['resnet50', 'bert-large', 'llama-70b', 'gnmt', '<b>odd</b>'];
    const users = ['ada', 'grace', 'alan', 'edsger'];
    // 800 jobs to place (the map fills up); the other 9,200 wait on job 1, which never completes
    // without agents, so the scheduling passes stay cheap even in an ASan build.
    const jobs = Array.from({length: kHistory}, (_, i) => ({name: names[i % names.length], user: users[i % users.length],
                                                         gpus: [1, 2, 4, 8, 16][i % 5],
                                                         ...(i >= 800 ? {afterok: [1]} : {})}));
    const t0 = Date.now();
    for (let i = 0; i < jobs.length; i += 10000) {  // the batch route takes 10,000 at most
      await api(s.url, 'POST', '/jobs:batch', {jobs: jobs.slice(i, i + 10000)}, s.token);
    }
    // Measure the page, not the daemon's first pass over the new queue: wait until it has looked at
    // the last job (its pending reason is set).
    await waitFor(async () => (await api(s.url, 'GET', `/jobs/${kHistory}`)).reason, {timeout: 120000, interval: 250,
                                                                                     what: 'the first pass'});
    console.log(`# submitted ${kHistory} jobs in ${Date.now() - t0} ms (until the first pass ended)`);
  });
  after(async () => {
    await b?.close();
    await s?.stop();
  });

  test('first render with 10,000 jobs in history', async () => {
    const page = await b.newPage();
    // Each view loaded twice from a blank page: the first load of a fresh browser pays its warm-up. The
    // Nodes view needs the admin token, which costs every later load a token check: it goes last.
    const views = [['jobs', '#jobs-table[data-ready]'], ['overview', '.cards .card'],
                   [`job/${kHistory}`, '#view[data-ready] #placement h2'], ['ttt', '#view[data-ready]'],
                   ['map', '#view[data-ready] #map-canvas']];
    const figures = {'first load': [], 'second load': []};
    let jobsRequests = null;
    const load = async (round, view, sel) => {
      await page.goto('about:blank');
      const seen = b.urls.length;
      const t0 = Date.now();
      await page.goto(`${s.url}/#/${view}`);
      await page.waitForSelector(sel, {timeout: 30000});
      figures[round].push(`${view.replace(/\/\d+$/, '')} ${Date.now() - t0} ms`);
      if (view === 'jobs' && jobsRequests === null) {
        jobsRequests = b.urls.slice(seen).filter((u) => new URL(u).pathname.startsWith('/api/v1/jobs'));
      }
    };
    for (const round of Object.keys(figures)) for (const [view, sel] of views) await load(round, view, sel);
    await page.evaluate((t) => sessionStorage.setItem('railyard.token', t), s.token);
    for (const round of Object.keys(figures)) await load(round, 'nodes', '#nodes-table[data-ready]');
    console.log(`# first render, ${kHistory} jobs / 1,024 nodes: ` +
                Object.entries(figures).map(([round, f]) => `${round}: ${f.join(', ')}`).join('; '));
    // The newest page is one request (order=desc), whatever the history behind it; the watch socket's
    // opening may re-read it once (views resync on 'reconnect').
    assert.ok(jobsRequests.length >= 1 && jobsRequests.length <= 2, jobsRequests.join(' '));
    for (const u of jobsRequests) assert.match(u, /[?&]limit=100&order=desc$/);
    await page.goto(`${s.url}/#/map`);
    await page.waitForSelector('#view[data-ready] #map-canvas');
    console.log(`# map: ${await page.textContent('#map-summary')}`);
    assert.equal(await page.getAttribute('#map-canvas', 'data-nodes'), '1024');
    await screenshot(page, 'map-1024-nodes');
    await page.goto(`${s.url}/#/jobs`);
    await page.waitForSelector('#jobs-table[data-ready]');
    const rows = await page.locator('#jobs-table tbody tr').count();
    assert.equal(rows, 100, `one page of 100 (${await page.textContent('.toolbar .muted')})`);
    assert.equal(await page.getAttribute('#jobs-table tbody tr:first-child', 'data-id'), String(kHistory), 'newest first');
    await page.click('text=‹ Prev');
    await page.waitForFunction((n) => document.querySelector('#jobs-table tbody tr')?.dataset.id === String(n - 100),
                               kHistory);
    await page.click('text=Newest »');
    await page.waitForFunction((n) => document.querySelector('#jobs-table tbody tr')?.dataset.id === String(n), kHistory);
    await page.selectOption('#f-state', 'PENDING');
    await page.waitForFunction(() => [...document.querySelectorAll('#jobs-table tbody tr .st')]
      .every((e) => e.textContent === 'PENDING'));
    assert.equal(await page.getAttribute('#jobs-table tbody tr:first-child', 'data-id'), String(kHistory));
    // Sorting applies to the page shown: by GPUs, largest first.
    await page.click('#jobs-table th[data-key="gpus"]');
    await page.waitForFunction(() => document.querySelector('#jobs-table th[data-key="gpus"]').textContent.endsWith('▼'));
    const gpus = await page.$$eval('#jobs-table tbody tr td:nth-child(5)', (tds) => tds.map((td) => Number(td.textContent)));
    assert.deepEqual(gpus, [...gpus].sort((a, b) => b - a));
    await page.click('#jobs-table th[data-key="id"]');
    await screenshot(page, 'jobs-10000');
    await page.close();
  });
});
