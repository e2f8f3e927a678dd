// The header's high-availability badge on a local HA cluster (`railyard up --ha 2`: 2 etcd members, 2
// schedulers sharing the database): it names the leader and its epoch and counts the standby, and the
// dashboard of a scheduler without HA shows no badge. Skipped where etcd is not installed.

import assert from 'node:assert/strict';
import {spawnSync} from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import {after, before, describe, test} from 'node:test';
import {chromiumPath, findBin, launchBrowser, screenshot, startFront, startScheduler, tempDir} from './harness.mjs';

const bins = {railyard: findBin('railyard'), agent: findBin('railyard-agent'), scheduler: findBin('railyard-scheduler')};
const missing = Object.entries(bins).filter(([, p]) => !p).map(([k]) => k);
const etcd = spawnSync('sh', ['-c', 'command -v etcd'], {encoding: 'utf8'}).stdout.trim();
const skip = !chromiumPath() ? 'chromium is not installed'
  : missing.length ? `needs built ${missing.join(', ')} (RAILYARD_BIN_DIR or build/web)`
  : !etcd ? 'etcd is not installed (deploy/bootstrap.sh installs etcd-server)' : false;

describe('high-availability badge', {skip}, () => {
  let dir;
  let env;
  let urls;
  let front = null;
  let b;
  before(async () => {
    dir = tempDir('ha');
    const pathDirs = [...new Set(Object.values(bins).map((p) => path.dirname(p)))];
    env = {...process.env, PATH: `${pathDirs.join(':')}:${process.env.PATH}`, HOME: dir};
    const r = spawnSync(bins.railyard, ['up', '--nodes', '1', '--profile', 'dgx-h100', '--state-dir', dir,
                                        '--port', '0', '--ha', '2', '--no-config'],
                        {encoding: 'utf8', env, timeout: 120000});
    assert.equal(r.status, 0, `railyard up --ha 2 failed: ${r.stderr}`);
    urls = /RAILYARD_URL=(\S+)/.exec(r.stdout)[1].split(',');
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

  test('names the leader, its epoch and one standby', async () => {
    const leaders = await Promise.all(urls.map((u) => fetch(`${u}/api/v1/leader`).then((r) => r.json()).catch(() => null)));
    const answer = leaders.find((a) => a && a.self && a.self.role === 'leader');
    assert.ok(answer, `no scheduler says it leads: ${JSON.stringify(leaders)}`);
    // This tree's web/dist in front of the leader (the schedulers serve the web root beside their binary).
    front = await startFront(new URL(answer.leader.address));
    const page = await b.newPage();
    await page.goto(`${front.url}/#/overview`);
    const badge = page.locator('#leader');
    await badge.waitFor({state: 'visible', timeout: 15000});
    await page.waitForFunction(() => /standby/.test(document.getElementById('leader').textContent), null, {timeout: 15000});
    const text = await badge.textContent();
    assert.match(text, new RegExp(`^leader ${answer.leader.name} · epoch ${answer.leader.epoch} · since .+ · 1 standby$`));
    assert.match(await badge.getAttribute('title'), /\(standby\)/);
    await screenshot(page, 'ha-badge');
  });

  test('a scheduler without HA shows no badge', async () => {
    const s = await startScheduler();
    try {
      const page = await b.newPage();
      await page.goto(`${s.url}/#/overview`);
      await page.waitForSelector('#leader[data-state="none"]', {state: 'attached'});
      assert.equal(await page.locator('#leader').isHidden(), true);
    } finally {
      await s.stop();
    }
  });
});
