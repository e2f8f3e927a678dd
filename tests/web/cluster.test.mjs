// End to end with real agents: `railyard up` starts a scheduler and emulated DGX nodes, a training job
// (railyard-train, MLLOG) is submitted over HTTP, and the dashboard shows it run, reach its target and
// report its time-to-train, live. Skipped until `railyard`, `railyard-agent` and `railyard-train` are built.

import assert from 'node:assert/strict';
import {describe, test} from 'node:test';
import {api, chromiumPath, findBin, localClusterAndBrowser, screenshot, waitFor} from './harness.mjs';

const bins = {railyard: findBin('railyard'), agent: findBin('railyard-agent'), scheduler: findBin('railyard-scheduler'),
              train: findBin('railyard-train')};
const missing = Object.entries(bins).filter(([, p]) => !p).map(([k]) => k);
const skip = !chromiumPath() ? 'chromium is not installed'
  : missing.length ? `needs built ${missing.join(', ')} (RAILYARD_BIN_DIR or build/web)` : false;

describe('dashboard on a local cluster (railyard up)', {skip}, () => {
  const c = localClusterAndBrowser({railyard: bins.railyard, nodes: 2, tag: 'up'});

  test('a training job appears, runs, reaches its target and shows its time-to-train', async () => {
    const page = await c.b.newPage();
    const base = c.base();
    await page.goto(`${base}/#/jobs`);
    await page.waitForSelector('#jobs-table[data-ready]');
    const spec = {name: 'digits-web', gpus: 1, launcher: 'env', time_limit: 300,
                  command: [bins.train, '--target-accuracy', '0.9'], target: {metric: 'eval_accuracy', value: 0.9}};
    const {id} = await api(c.url, 'POST', '/jobs', spec, c.token);
    await page.locator(`#jobs-table tr[data-id="${id}"]`).waitFor({timeout: 10000});
    await page.goto(`${base}/#/job/${id}`);
    await page.waitForFunction(() => /RUNNING|COMPLETED/.test(document.querySelector('h1 .st')?.textContent || ''),
                               null, {timeout: 60000});
    const job = await waitFor(async () => {
      const j = await api(c.url, 'GET', `/jobs/${id}`);
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
