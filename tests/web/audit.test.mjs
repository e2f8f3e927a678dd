// The admin-only Audit view against a real railyard-scheduler: a job submitted and cancelled through the
// API with an admin token shows up as rows (newest first: the cancel above the submit), with the actor, the
// source and the answer; a user token sees neither the tab nor the rows.

import assert from 'node:assert/strict';
import {describe, test} from 'node:test';
import {api, chromiumPath, schedulerAndBrowser, screenshot} from './harness.mjs';

const skip = chromiumPath() ? false : 'chromium is not installed (apt-get install chromium)';

describe('audit view', {skip}, () => {
  const env = schedulerAndBrowser({preset: 'dgx-h100-superpod', sus: 1});

  async function openAs(token) {
    const page = await env.b.newPage();
    await page.goto(`${env.s.url}/#/overview`);
    await page.evaluate((t) => sessionStorage.setItem('railyard.token', t), token);
    await page.reload();
    await page.waitForFunction(() => document.getElementById('token-status').textContent !== '');
    return page;
  }

  test('an admin sees the submit and the cancel, newest first', async () => {
    const {id} = await api(env.s.api, 'POST', '/jobs', {name: 'audited', gpus: 1}, env.s.token);
    await api(env.s.api, 'POST', `/jobs/${id}/cancel`, undefined, env.s.token);
    const page = await openAs(env.s.token);
    await page.waitForSelector('#nav-audit', {state: 'visible'});
    await page.click('#nav-audit');
    const cancel = page.locator(`#audit-table tr[data-target="/api/v1/jobs/${id}/cancel"]`);
    await cancel.waitFor({timeout: 10000});
    const cells = await cancel.locator('td').allTextContents();
    assert.equal(cells[1], 'admin');
    assert.equal(cells[2], '127.0.0.1');
    assert.equal(cells[3], 'POST');
    assert.equal(cells[5], '200');
    const targets = await page.locator('#audit-table tbody tr').evaluateAll(
      (rows) => rows.map((r) => `${r.dataset.target} ${r.dataset.status}`));
    assert.deepEqual(targets.slice(0, 2), [`/api/v1/jobs/${id}/cancel 200`, '/api/v1/jobs 201'],
                     'newest first');
    await screenshot(page, 'audit');
    await page.close();
  });

  test('a user token sees no Audit tab and no rows', async () => {
    const page = await openAs(env.s.userToken);
    await page.waitForFunction(() => document.getElementById('token-status').textContent.includes('not an admin'));
    assert.equal(await page.isVisible('#nav-audit'), false);
    await page.goto(`${env.s.url}/#/audit`);
    await page.waitForSelector('main .note');
    assert.match(await page.textContent('main .note'), /Audit view needs an admin token/);
    assert.equal(await page.locator('#audit-table').count(), 0);
    await page.close();
  });
});
