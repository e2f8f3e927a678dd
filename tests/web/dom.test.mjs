// The dashboard's time wording, without a browser: a waiting job's reason says when its reservation starts it
// as people read a time (issue 47), never a raw epoch.
import {test} from 'node:test';
import assert from 'node:assert/strict';
import {containerRows, reasonText, startsIn} from '../../web/src/dom.js';

const at = 1_796_606_064;

test('startsIn says how long and the local clock time', () => {
  assert.equal(startsIn(at - 5, at), 'starts any moment');
  assert.equal(startsIn(at + 30, at), 'starts in <1 min');
  const d = new Date((at + 240) * 1000);
  const clock = `${String(d.getHours()).padStart(2, '0')}:${String(d.getMinutes()).padStart(2, '0')}`;
  assert.equal(startsIn(at + 240, at), `starts in ~4 min, ${clock}`);
  assert.match(startsIn(at + 3 * 3600, at), /^starts in ~3 h, \d\d:\d\d$/);
  assert.match(startsIn(at + 5 * 86400, at), /^starts in ~5 days, .+ \d\d:\d\d$/);
});

test('reasonText adds the start to a waiting job only', () => {
  const waiting = {state: 'PENDING', reason: 'resources: 16 GPUs free of 32; reserved', estimated_start: Date.now() / 1000 + 600};
  assert.match(reasonText(waiting), /^resources: 16 GPUs free of 32; reserved; starts in ~10 min, \d\d:\d\d$/);
  assert.doesNotMatch(reasonText(waiting), /t=\d+/);
  assert.equal(reasonText({state: 'RUNNING', reason: '', estimated_start: 5}), '');
  assert.equal(reasonText({state: 'PENDING', reason: 'held'}), 'held');
});

test('containerRows gives the image and mounts of a job that runs in a container, nothing otherwise', () => {
  const spec = {container: {image: 'nvcr.io/nvidia/pytorch:24.04-py3', mounts: ['/lustre:/data:ro', '/scratch:/scratch'],
                            workdir: '', writable: false, name: ''}};
  assert.deepEqual(containerRows({spec}), [['image', 'nvcr.io/nvidia/pytorch:24.04-py3'],
                                           ['mounts', '/lustre:/data:ro, /scratch:/scratch']]);
  assert.deepEqual(containerRows({spec: {container: {image: 'ubuntu', mounts: [], writable: true}}}),
                   [['image', 'ubuntu (writable)']]);
  assert.deepEqual(containerRows({spec: {workdir: '/x'}}), []);
  assert.deepEqual(containerRows({}), []);
});
