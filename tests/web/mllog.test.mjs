// MLPerf logs before v0.7, end to end (issue 47): on a local cluster (`railyard up`, real agents) a job whose
// output is a v0.6-format log (jobs/testdata/mllog_v06_success.log, `cat` as the job) shows MLPerf's
// time-to-train in `railyard show` and on the dashboard; an aborted run with a line Railyard cannot read
// says why it has none, in both. Skipped until `railyard`, `railyard-agent` and `railyard-scheduler` are
// built (RAILYARD_BIN_DIR) or without chromium.

import assert from 'node:assert/strict';
import {spawnSync} from 'node:child_process';
import path from 'node:path';
import {describe, test} from 'node:test';
import {api, chromiumPath, findBin, localClusterAndBrowser, repo, screenshot, waitFor} from './harness.mjs';

const bins = {railyard: findBin('railyard'), agent: findBin('railyard-agent'), scheduler: findBin('railyard-scheduler')};
const missing = Object.entries(bins).filter(([, p]) => !p).map(([k]) => k);
const skip = !chromiumPath() ? 'chromium is not installed'
  : missing.length ? `needs built ${missing.join(', ')} (RAILYARD_BIN_DIR or build/web)` : false;
const testdata = path.join(repo, 'jobs', 'testdata');

describe('MLPerf v0.6 logs on a local cluster', {skip}, () => {
  const c = localClusterAndBrowser({railyard: bins.railyard, nodes: 1, tag: 'mllog'});

  // Submits a one-GPU job running `command`, waits for it to end and for the agent's last word to land.
  const runJob = async (name, command) => {
    const {id} = await api(c.url, 'POST', '/jobs', {name, gpus: 1, launcher: 'env', time_limit: 120, command}, c.token);
    const job = await waitFor(async () => {
      const j = await api(c.url, 'GET', `/jobs/${id}`);
      return ['COMPLETED', 'FAILED', 'CANCELLED', 'TIMEOUT', 'NODE_FAIL'].includes(j.state) && j;
    }, {timeout: 60000, interval: 300, what: `job ${name} to end`});
    assert.equal(job.state, 'COMPLETED', `job ${name} ended ${job.state}: ${job.reason}`);
    return id;
  };
  const show = (id) => {
    const r = spawnSync(bins.railyard, ['show', String(id), '--url', c.url, '--token', c.token],
                        {encoding: 'utf8', env: {...c.env, NO_COLOR: '1'}, timeout: 30000});
    assert.equal(r.status, 0, `railyard show failed: ${r.stderr}`);
    return r.stdout;
  };
  const dashboardTtt = async (id) => {
    const page = await c.b.newPage();
    await page.goto(`${c.base()}/#/job/${id}`);
    await page.waitForSelector('[data-ready]', {timeout: 20000});
    return page;
  };

  test('a v0.6 log that succeeded shows its time-to-train in show and on the dashboard', async () => {
    // The fixture's run_start is 1558666210.123 s and its run_stop 1558666290.456 s with status "success":
    // 290.456 - 210.123 = 80.333 s, 1.34 min.
    const id = await runJob('resnet-v06', ['cat', path.join(testdata, 'mllog_v06_success.log')]);
    const job = await waitFor(async () => {
      const j = await api(c.url, 'GET', `/jobs/${id}`);
      return j.time_to_train_s != null && j;
    }, {timeout: 20000, what: 'the time-to-train to be recorded'});
    assert.ok(Math.abs(job.time_to_train_s - 80.333) < 1e-6, `time_to_train_s ${job.time_to_train_s}`);
    const out = show(id);
    assert.match(out, /time-to-train\s+80\.333 s \(1\.34 min\)/, out);
    assert.match(out, /allreduce est\.\s+none: one GPU, no collective crosses a link/, out);
    assert.doesNotMatch(out, /slowest link inf/, out);
    const page = await dashboardTtt(id);
    await page.waitForFunction(() => document.getElementById('ttt')?.title === '80.333 s', null, {timeout: 10000});
    assert.equal(await page.textContent('#ttt'), '1m 20s');
    assert.equal(await page.textContent('#estimate'), 'one GPU: no collective crosses a link');
    await screenshot(page, 'job-mllog-v06');
    await page.close();
  });

  test('an aborted v0.6 run and an unreadable line say so in show and on the dashboard', async () => {
    const aborted = path.join(testdata, 'mllog_v06_aborted.log');
    const id = await runJob('aborted-v06',
                            ['sh', '-c', `cat '${aborted}'; echo ':::MLPv0.4.0 resnet 1.0 (a.py:1) run_start'`]);
    const out = await waitFor(() => {
      const text = show(id);
      return /MLPerf log/.test(text) && /time-to-train\s+none/.test(text) && text;
    }, {timeout: 20000, what: 'the agent\'s notes in the history'});
    assert.match(out, /time-to-train\s+none: the run did not succeed \(run_stop status "aborted"\) \(MLPerf v0\.6 log\)/, out);
    assert.match(out, /MLPerf log\s+line 4 of rank 0's output could not be read: .*:::MLPv0\.4\.0 is not one Railyard reads/, out);
    const page = await dashboardTtt(id);
    await page.waitForFunction(() => /^none: /.test(document.getElementById('ttt')?.textContent || ''), null,
                               {timeout: 10000});
    assert.match(await page.textContent('#ttt'), /run_stop status "aborted"/);
    assert.match(await page.textContent('.events'), /could not be read/);
    await page.close();
  });
});
