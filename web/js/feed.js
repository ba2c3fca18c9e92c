// The live audit feed: the newest page of matching events, then every event
// as it commits (auditEventRecorded over the WebSocket), resumed after a
// dropped connection from the last sequence seen, with no duplicates.

import { badge, byId, h, showError, time } from './dom.js';
import { graphql } from './graphql.js';

/** Rows kept on screen; older ones are dropped as new ones arrive. */
export const MAX_ROWS = 500;
/** Events loaded when the feed opens (or its filters change). */
const INITIAL_PAGE = 100;
/** Least time between two screen-reader announcements of new events. */
const ANNOUNCE_EVERY_MS = 5_000;

const ROW_FIELDS = 'id sequence action occurredAt outcome subject { type id displayName } resource { type id }';

const PAGE_QUERY = `query DashboardFeedPage($p: ID!, $f: AuditEventFilter, $n: Int) {
  auditEvents(projectId: $p, filter: $f, first: $n, order: NEWEST_FIRST) { edges { node { ${ROW_FIELDS} } } }
}`;

const FEED_SUBSCRIPTION = `subscription DashboardFeed($p: ID!, $after: Uint64, $f: AuditEventFilter) {
  auditEventRecorded(projectId: $p, afterSequence: $after, filter: $f) { ${ROW_FIELDS} }
}`;

const DETAIL_QUERY = `query DashboardEvent($p: ID!, $id: ID!) {
  auditEvent(projectId: $p, id: $id) {
    id tenantId projectId sequence action occurredAt recordedAt
    subject { type id displayName }
    resource { type id }
    outcome
    governance { reason ticket risk confirmedBy }
    correlation { traceId requestId causationId }
    evidenceDigests { algorithm value label }
    details
    chainHash
  }
}`;

/**
 * The live feed view. ctx.session is {token, project, onUnauthenticated} and
 * ctx.ws the GraphQLWsClient; both are replaced when the user signs in again
 * or opens another project, and start() is called then.
 */
export class FeedView {
  constructor(ctx) {
    this.ctx = ctx;
    this.rows = byId('feed-rows');
    this.errorEl = byId('feed-error');
    this.countEl = byId('feed-count');
    this.announceEl = byId('feed-announce');
    this.form = byId('feed-filters');
    this.dialog = byId('event-detail');
    byId('feed-cap').textContent = String(MAX_ROWS);
    /** Highest sequence shown (BigInt); the subscription resumes after it. */
    this.lastSequence = 0n;
    /** Sequences on screen, for the duplicate check. */
    this.seen = new Set();
    this.total = 0;
    this.unannounced = 0;
    this.announceTimer = null;
    this.lastAnnounce = 0;
    this.generation = 0;
    this.unsubscribe = null;
    this.filter = {};

    this.form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      this.filter = this.#readFilter();
      this.start();
    });
    this.form.addEventListener('reset', () => {
      // After the browser has cleared the fields.
      setTimeout(() => {
        this.filter = {};
        this.start();
      });
    });
    this.dialog.addEventListener('click', (ev) => {
      if (ev.target.closest('[data-close]') || ev.target === this.dialog) this.dialog.close();
    });
  }

  #readFilter() {
    const data = new FormData(this.form);
    const filter = {};
    for (const key of ['action', 'subjectId', 'resourceType', 'resourceId']) {
      const v = String(data.get(key) ?? '').trim();
      if (v) filter[key] = v;
    }
    const outcome = String(data.get('outcome') ?? '');
    if (outcome) filter.outcome = [outcome];
    return filter;
  }

  /** (Re)starts the feed: clears it, loads the newest page, subscribes after it. */
  async start() {
    this.stop();
    const gen = ++this.generation;
    this.rows.replaceChildren(h('tr', { class: 'empty' }, h('td', { colspan: 6 }, 'Loading…')));
    this.seen.clear();
    this.lastSequence = 0n;
    this.total = 0;
    showError(this.errorEl, null);
    const filter = Object.keys(this.filter).length ? this.filter : null;
    let edges;
    try {
      const data = await graphql(this.ctx.session, PAGE_QUERY, { p: this.ctx.session.project, f: filter, n: INITIAL_PAGE });
      edges = data.auditEvents.edges;
    } catch (err) {
      if (gen !== this.generation) return;
      this.rows.replaceChildren();
      this.#updateCount();
      showError(this.errorEl, err);
      return;
    }
    if (gen !== this.generation) return;
    this.rows.replaceChildren();
    // Oldest first, so that each lands on top of the one before.
    for (const { node } of edges.slice().reverse()) this.#add(node, false);
    this.#updateCount();
    this.unsubscribe = this.ctx.ws.subscribe(
      () => ({
        query: FEED_SUBSCRIPTION,
        variables: { p: this.ctx.session.project, after: this.lastSequence.toString(), f: filter },
      }),
      {
        next: (result) => {
          if (gen !== this.generation) return;
          if (result.errors?.length) {
            showError(this.errorEl, { code: result.errors[0].extensions?.code, message: result.errors[0].message });
            return;
          }
          showError(this.errorEl, null);
          this.#add(result.data.auditEventRecorded, true);
          this.#updateCount();
        },
        error: (errors) => {
          if (gen !== this.generation) return;
          const first = errors?.[0] ?? {};
          showError(this.errorEl, { code: first.extensions?.code, message: `the live feed stopped: ${first.message}` });
        },
        complete: () => {},
      },
    );
  }

  /** Stops the live subscription. */
  stop() {
    this.generation++;
    if (this.unsubscribe) this.unsubscribe();
    this.unsubscribe = null;
  }

  /** Adds one event on top, unless its sequence was already shown. */
  #add(ev, live) {
    const seq = BigInt(ev.sequence);
    if (seq <= this.lastSequence || this.seen.has(ev.sequence)) return;
    this.lastSequence = seq;
    this.seen.add(ev.sequence);
    this.total++;
    const subject = ev.subject.displayName ? `${ev.subject.displayName} (${ev.subject.id})` : ev.subject.id;
    const row = h(
      'tr',
      { class: live ? 'fresh' : null, dataset: { sequence: ev.sequence, id: ev.id } },
      h('td', { class: 'num' }, ev.sequence),
      h('td', {}, time(ev.occurredAt)),
      h(
        'td',
        {},
        h('button', {
          type: 'button',
          class: 'link',
          'aria-label': `${ev.action}, sequence ${ev.sequence}: show details`,
          dataset: { focusKey: `event-${ev.sequence}` },
          onClick: (e) => this.showDetail(ev, e.currentTarget),
        }, ev.action),
      ),
      h('td', {}, badge(ev.outcome)),
      h('td', {}, h('span', { class: 'mono' }, `${ev.subject.type.toLowerCase()}:`), ' ', subject),
      h('td', {}, `${ev.resource.type}/${ev.resource.id}`),
    );
    this.rows.prepend(row);
    while (this.rows.childElementCount > MAX_ROWS) {
      const last = this.rows.lastElementChild;
      this.seen.delete(last.dataset.sequence);
      last.remove();
    }
    if (live) this.#announce();
  }

  #updateCount() {
    const shown = this.rows.childElementCount;
    if (this.total === 0) {
      this.countEl.textContent = 'No events yet: record one and it appears here.';
    } else {
      this.countEl.textContent = `${shown} event${shown === 1 ? '' : 's'} shown, up to sequence ${this.lastSequence}.`;
    }
  }

  /** Tells screen readers how many events arrived, at most once per ANNOUNCE_EVERY_MS. */
  #announce() {
    this.unannounced++;
    if (this.announceTimer) return;
    const wait = Math.max(0, this.lastAnnounce + ANNOUNCE_EVERY_MS - Date.now());
    this.announceTimer = setTimeout(() => {
      this.announceTimer = null;
      this.lastAnnounce = Date.now();
      const n = this.unannounced;
      this.unannounced = 0;
      this.announceEl.textContent = `${n} new event${n === 1 ? '' : 's'}`;
    }, wait);
  }

  /** Opens the detail dialog of one event, loading every field. */
  async showDetail(ev, trigger) {
    const dialog = this.dialog;
    const fields = byId('event-detail-fields');
    const json = byId('event-detail-json');
    const errorEl = byId('event-detail-error');
    byId('event-detail-title').textContent = `Event ${ev.sequence}: ${ev.action}`;
    fields.replaceChildren();
    json.textContent = 'Loading…';
    showError(errorEl, null);
    dialog.addEventListener('close', () => trigger?.isConnected && trigger.focus(), { once: true });
    if (!dialog.open) dialog.showModal();
    let event;
    try {
      const data = await graphql(this.ctx.session, DETAIL_QUERY, { p: this.ctx.session.project, id: ev.id });
      event = data.auditEvent;
    } catch (err) {
      json.textContent = '';
      showError(errorEl, err);
      return;
    }
    if (!event) {
      json.textContent = '';
      showError(errorEl, { code: 'NOT_FOUND', message: 'this event is not visible with the current token' });
      return;
    }
    const rows = [
      ['Id', event.id],
      ['Sequence', event.sequence],
      ['Tenant / project', `${event.tenantId} / ${event.projectId}`],
      ['Action', event.action],
      ['Outcome', badge(event.outcome)],
      ['Occurred', time(event.occurredAt)],
      ['Recorded', time(event.recordedAt)],
      ['Subject', `${event.subject.type} ${event.subject.id}${event.subject.displayName ? ` (${event.subject.displayName})` : ''}`],
      ['Resource', `${event.resource.type}/${event.resource.id}`],
    ];
    if (event.governance) {
      const g = event.governance;
      rows.push(['Governance', `risk ${g.risk}${g.reason ? `, reason: ${g.reason}` : ''}${g.ticket ? `, ticket ${g.ticket}` : ''}${g.confirmedBy ? `, confirmed by ${g.confirmedBy}` : ''}`]);
    }
    if (event.correlation) {
      const c = event.correlation;
      rows.push(['Trace id', c.traceId || '—'], ['Request id', c.requestId || '—'], ['Causation id', c.causationId || '—']);
    }
    for (const d of event.evidenceDigests) rows.push([`Evidence${d.label ? ` (${d.label})` : ''}`, `${d.algorithm}:${d.value}`]);
    rows.push(['Chain hash', h('span', { class: 'mono' }, event.chainHash)]);
    fields.replaceChildren(...rows.flatMap(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
    json.textContent = JSON.stringify(event.details, null, 2);
  }
}
