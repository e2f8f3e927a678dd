// End to end with real agents: `railyard up` starts a scheduler and emulated DGX nodes, a training job
// (railyard-train, MLLOG) is submitted over HTTP, and the dashboard shows it run, reach its target and
// report its time-to-train, live. Skipped until `railyard`, `railyard-agent` and `railyard-train` are built.

import assert from 'node:assert/strict';
import {spawnSync} from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import {after, before, describe, test} from 'node:test';
import {api, chromiumPath, findBin, launchBrowser, screenshot, startFront, tempDir, waitFor} from './harness.mjs';

const bins = {railyard: findBin('railyard'), agent: findBin('railyard-agent'), scheduler: findBin('railyard-scheduler'),
              train: findBin('railyard-train')};
const missing = Object.entries(bins).filter(([, p]) => !p).map(([k]) => k);
const skip = !chromiumPath() ? 'chromium is not installed'
  : missing.length ? `needs built ${missing.join(', ')} (RAILYARD_BIN_DIR or build/web)` : false;

describe('dashboard on a local cluster (railyard up)', {skip}, () => {
  let dir;
  let env;
  let url;
  let token;
  let front = null;
  let b;
  before(async () => {
    dir = tempDir('up');
    const pathDirs = [...new Set(Object.values(bins).map((p) => path.dirname(p)))];
    env = {...process.env, PATH: `${pathDirs.join(':')}:${process.env.PATH}`, HOME: dir};
    const r = spawnSync(bins.railyard, ['up', '--nodes', '2', '--profile', 'dgx-h100', '--state-dir', dir,
                                        '--port', '0', '--no-config'], {encoding: 'utf8', env, timeout: 60000});
    assert.equal(r.status, 0, `railyard up failed: ${r.stderr}`);
    url = /RAILYARD_URL=(\S+)/.exec(r.stdout)[1];
    token = /RAILYARD_TOKEN=(\S+)/.exec(r.stdout)[1];
    const index = await fetch(`${url}/`).then((res) => (res.ok ? res.text() : '')).catch(() => '');
    if (!index.includes('Railyard')) {
      front = await startFront(new URL(url));
      console.log('# the scheduler started by `railyard up` does not serve web/dist: using the test front');
    }
    b = await launchBrowser();
  });
  after(async () => {
    await b?.close();
    if (front) await front.close();
    if (dir) {
      spawnSync(bins.railyard, ['down', '--state-dir', dir], {env, timeout: 30000});
      fs.rmSync(dir, {recursive: true, force: true});
    }
  });

  test('a training job appears, runs, reaches its target and shows its time-to-train', async () => {
    const page = await b.newPage();
    const base = front ? front.url : url;
    await page.goto(`${base}/#/jobs`);
    await page.waitForSelector('#jobs-table[data-ready]');
    const spec = {name: 'digits-web', gpus: 1, launcher: 'env', time_limit: 300,
                  command: [bins.train, '--target-accuracy', '0.9'], target: {metric: 'eval_accuracy', value: 0.9}};
    const {id} = await api(url, 'POST', '/jobs', spec, token);
    await page.locator(`#jobs-table tr[data-id="${id}"]`).waitFor({timeout: 10000});
    await page.goto(`${base}/#/job/${id}`);
    await page.waitForFunction(() => /RUNNING|COMPLETED/.test(document.querySelector('h1 .st')?.textContent || ''),
                               null, {timeout: 60000});
    const job = await waitFor(async () => {
      const j = await api(url, 'GET', `/jobs/${id}`);
      return ['COMPLETED', 'FAILED', 'CANCELLED', 'TIMEOUT', 'NODE_FAIL'].includes(j.state) && j;
    }, {timeout: 120000, interval: 500, what: 'the training job to finish'});
    assert.equal(job.state, 'COMPLETED', `job ended ${job.state}: ${job.reason}`);
    assert.ok(job.time_to_train_s > 0, 'time-to-train recorded');
    await page.waitForFunction(() => document.getElementById('ttt')?.textContent !== 'not reached', null,
                               {timeout: 10000});
    await page.waitForSelector('#quality-chart .u-wrap, #quality-chart canvas', {timeout: 10000});
    await screenshot(page, 'job-trained');
    await page.goto(`${base}/#/ttt`);
    await page.waitForSelector('.workload');
    assert.match(await page.textContent('.workload'), /digits-web/);
    await screenshot(page, 'ttt-trained');
    await page.close();
  });
});
