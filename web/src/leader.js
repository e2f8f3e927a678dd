// The header's high-availability badge: which scheduler leads, its epoch and since when, and how many
// standbys follow (GET /api/v1/leader, answered only by a scheduler run with --ha-etcd). Hidden on a
// scheduler without HA (404). Polled: a leader change moves the dashboard to the new leader's address
// only on a reload (a standby redirects the page). data-state: 'shown', or 'none' once it knows there is
// nothing to show.

import {get} from './api.js';

const kPollMs = 5000;

// The badge's text and tooltip for a /leader answer, or null when there is no leader to show.
export function leaderBadge(answer) {
  const leader = answer && answer.leader;
  if (!leader) return {text: 'no leader', title: 'no scheduler holds the lease', warn: true};
  const members = Array.isArray(answer.members) ? answer.members : [];
  const standbys = members.filter((m) => m.role !== 'leader').length;
  const since = leader.since_ms ? new Date(leader.since_ms).toLocaleTimeString() : '?';
  const text = `leader ${leader.name} · epoch ${leader.epoch} · since ${since}` +
               (standbys ? ` · ${standbys} standby${standbys === 1 ? '' : 's'}` : '');
  const title = members.map((m) => `${m.name} (${m.role}) ${m.address || ''}`).join('\n');
  return {text, title, warn: false};
}

export function start(el) {
  let timer = null;
  const poll = async () => {
    try {
      const b = leaderBadge(await get('/leader'));
      el.textContent = b.text;
      el.title = b.title;
      el.classList.toggle('leader-warn', b.warn);
      el.hidden = false;
      el.dataset.state = 'shown';
    } catch (err) {
      // No HA (404), or a scheduler that asks for a token first: nothing to show, ask no more.
      if ([401, 403, 404].includes(err.status)) {
        el.hidden = true;
        el.dataset.state = 'none';
        return;
      }
      el.textContent = 'leader unknown';
      el.title = String(err.message || err);
      el.classList.add('leader-warn');
      el.hidden = false;
      el.dataset.state = 'shown';
    }
    timer = setTimeout(poll, kPollMs);
  };
  poll();
  return () => clearTimeout(timer);
}
