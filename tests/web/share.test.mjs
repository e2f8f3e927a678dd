// The Sharing view against a real railyard-scheduler: with a quota of 8 GPUs and 3 shares on user ada and two
// 8-GPU jobs of ada's, the quota table shows 8 in use of 8 (marked) and the shares, and the fair-share table
// lists ada with 3 shares, 8 GPUs in use and one job waiting; lifted, the quota row goes and the waiting job
// starts.

import assert from 'node:assert/strict';
import {describe, test} from 'node:test';
import {api, chromiumPath, schedulerAndBrowser, screenshot} from './harness.mjs';

const skip = chromiumPath() ? false : 'chromium is not installed (apt-get install chromium)';

describe('sharing view', {skip}, () => {
  const env = schedulerAndBrowser({preset: 'dgx-h100-superpod', sus: 1});

  test('quotas and fair share of a user held back by a quota', async () => {
    await api(env.s.api, 'POST', '/quotas/user/ada', {gpus: 8, shares: 3}, env.s.token);
    for (let i = 0; i < 2; i++) await api(env.s.api, 'POST', '/jobs', {name: `q${i}`, gpus: 8}, env.s.userToken);
    const page = await env.b.newPage();
    await page.goto(`${env.s.url}/#/overview`);
    await page.click('#nav-share');
    const quota = page.locator('#quota-table tr[data-kind="user"][data-name="ada"]');
    await quota.waitFor({timeout: 10000});
    assert.deepEqual(await quota.locator('td').allTextContents(), ['user', 'ada', '8', '8', '3']);
    assert.match(await quota.locator('td').nth(3).getAttribute('class'), /error/, 'a full quota is marked');
    const ada = page.locator('#share-table tr[data-name="ada"]');
    await page.waitForFunction(() => {
      const row = document.querySelector('#share-table tr[data-name="ada"]');
      return row && row.cells[7].textContent === '1';
    }, null, {timeout: 10000});
    const cells = await ada.locator('td').allTextContents();
    assert.equal(cells[3], '3', 'shares');
    assert.equal(cells[6], '8', 'GPUs in use');
    assert.equal(cells[7], '1', 'jobs waiting');
    assert.match(await page.textContent('#share-half-life'), /halves every 7 days/);
    await screenshot(page, 'share');

    await api(env.s.api, 'POST', '/quotas/user/ada/lift', undefined, env.s.token);
    await page.waitForFunction(() => {
      const row = document.querySelector('#share-table tr[data-name="ada"]');
      return !document.querySelector('#quota-table tr[data-name="ada"]') && row && row.cells[6].textContent === '16';
    }, null, {timeout: 10000});
    await page.selectOption('#share-by', 'project');
    await page.waitForSelector('#share-table tr[data-name="ada"]');  // a job's project is its user's by default
    await page.close();
  });
});
