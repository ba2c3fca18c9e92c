// The webhook view: destinations, subscriptions, deliveries with their
// attempts, dead letters with a confirmed redrive or skip, and the recovery
// actions of webhook_recovery.js (recover, replay, test event). Deliveries have no
// subscription of their own, so the view refreshes itself every few seconds
// while it is shown.

import { confirmAction } from './confirm.js';
import { DESTINATION_COLUMNS, DESTINATION_FIELDS, destinationRow } from './destinations.js';
import { badge, byId, h, keepFocus, shortId, showError, time } from './dom.js';
import { graphql } from './graphql.js';
import { WebhookRecovery } from './webhook_recovery.js';

/** Refresh interval while the view is visible. */
const REFRESH_MS = 3_000;

const DELIVERY_FIELDS = `id subscriptionId destinationId eventId eventSequence eventType idempotencyKey
  state attemptCount maxAttempts nextAttemptAt createdAt updatedAt deliveredAt deadLetteredAt lastError replayOf
  attempts { number outcome startedAt finishedAt statusCode latencyMs errorClass error }`;

const VIEW_QUERY = `query DashboardWebhooks($p: ID!, $state: WebhookDeliveryState) {
  destinations: webhookDestinations(projectId: $p) { ${DESTINATION_FIELDS} }
  subscriptions: webhookSubscriptions(projectId: $p, first: 100) {
    edges { node { id destinationId eventTypes description state afterSequence createdAt disabledAt ordering pausedByDeliveryId } }
  }
  deliveries: webhookDeliveries(projectId: $p, filter: { state: $state }, first: 50) { edges { node { ${DELIVERY_FIELDS} } } }
  deadLetters: webhookDeliveries(projectId: $p, filter: { state: DEAD_LETTERED }, first: 50) { edges { node { ${DELIVERY_FIELDS} } } }
}`;

const REDRIVE = `mutation DashboardRedrive($id: ID!) {
  redriveWebhookDelivery(input: { deliveryId: $id, confirm: true }) { delivery { id state attemptCount maxAttempts } }
}`;

/** The webhook view; ctx.session is the current session (see FeedView). */
export class WebhooksView {
  constructor(ctx) {
    this.ctx = ctx;
    this.errorEl = byId('webhooks-error');
    this.statusEl = byId('webhooks-status');
    this.noticeEl = byId('webhooks-notice');
    this.updatedEl = byId('webhooks-updated');
    this.stateSelect = byId('delivery-state');
    this.section = byId('view-webhooks');
    this.timer = null;
    this.active = false;
    this.loading = null;
    /** Delivery ids whose attempt list the user opened. */
    this.open = new Set();
    this.recovery = new WebhookRecovery(this);
    byId('webhooks-refresh').addEventListener('click', () => this.refresh());
    this.stateSelect.addEventListener('change', () => this.refresh());
  }

  /** Shows the view: refreshes now and then every REFRESH_MS until hide(). */
  show() {
    this.active = true;
    this.refresh();
  }

  /** Forgets the previous project's state; refreshes now when shown. */
  reset() {
    this.open.clear();
    this.statusEl.textContent = '';
    for (const id of ['dead-letter-rows', 'delivery-rows', 'subscription-rows', 'destination-rows']) byId(id).replaceChildren();
    if (this.active) this.refresh();
  }

  /** Stops the periodic refresh. */
  hide() {
    this.active = false;
    clearTimeout(this.timer);
  }

  /** Loads everything once (concurrent calls share one request). */
  refresh() {
    if (this.loading) return this.loading;
    clearTimeout(this.timer);
    this.loading = this.#load().finally(() => {
      this.loading = null;
      if (this.active) this.timer = setTimeout(() => this.refresh(), REFRESH_MS);
    });
    return this.loading;
  }

  async #load() {
    let data;
    try {
      data = await graphql(this.ctx.session, VIEW_QUERY, { p: this.ctx.session.project, state: this.stateSelect.value || null });
    } catch (err) {
      showError(this.errorEl, err);
      return;
    }
    showError(this.errorEl, null);
    const urls = new Map(data.destinations.map((d) => [d.id, d.url]));
    keepFocus(this.section, () => {
      this.#renderDeadLetters(data.deadLetters.edges.map((e) => e.node), urls);
      this.#renderDeliveries(data.deliveries.edges.map((e) => e.node));
      this.#renderSubscriptions(data.subscriptions.edges.map((e) => e.node), urls);
      this.#renderDestinations(data.destinations);
      this.recovery.fill(data.destinations, data.subscriptions.edges.map((e) => e.node));
    });
    this.updatedEl.textContent = `Updated ${new Date().toLocaleTimeString()}; refreshes every ${REFRESH_MS / 1000} s.`;
  }

  #renderDeadLetters(list, urls) {
    const body = byId('dead-letter-rows');
    if (!list.length) {
      body.replaceChildren(empty(7, 'No dead letters.'));
      return;
    }
    body.replaceChildren(
      ...list.map((d) =>
        h(
          'tr',
          { dataset: { deliveryId: d.id } },
          h('td', { class: 'num' }, d.eventSequence),
          h('td', {}, d.eventType),
          h('td', { class: 'mono' }, urls.get(d.destinationId) ?? d.destinationId),
          h('td', { class: 'num' }, `${d.attemptCount}/${d.maxAttempts}`),
          h('td', {}, d.lastError || '—'),
          h('td', {}, time(d.deadLetteredAt)),
          h(
            'td',
            {},
            h('button', {
              type: 'button',
              class: 'danger',
              dataset: { focusKey: `redrive-${d.id}`, action: 'redrive' },
              'aria-label': `Redrive the delivery of event ${d.eventSequence} (${d.eventType})`,
              onClick: () => this.redrive(d, urls.get(d.destinationId)),
            }, 'Redrive…'),
            ' ',
            this.recovery.skipButton(d),
          ),
        ),
      ),
    );
  }

  #renderDeliveries(list) {
    const body = byId('delivery-rows');
    if (!list.length) {
      body.replaceChildren(empty(6, 'No deliveries.'));
      return;
    }
    body.replaceChildren(
      ...list.map((d) => {
        const details = h(
          'details',
          { open: this.open.has(d.id) },
          h('summary', { dataset: { focusKey: `attempts-${d.id}` } }, `${d.attempts.length} attempt${d.attempts.length === 1 ? '' : 's'}`),
          h('p', { class: 'meta' }, 'webhook-id ', h('span', { class: 'mono' }, d.idempotencyKey),
            d.nextAttemptAt ? [', next attempt ', time(d.nextAttemptAt)] : null,
            d.replayOf ? [', replay ', h('span', { class: 'mono' }, shortId(d.replayOf))] : null),
          attemptsTable(d.attempts),
        );
        details.addEventListener('toggle', () => (details.open ? this.open.add(d.id) : this.open.delete(d.id)));
        return h(
          'tr',
          { dataset: { deliveryId: d.id, state: d.state } },
          h('td', { class: 'num' }, d.eventSequence),
          h('td', {}, d.eventType),
          h('td', {}, badge(d.state)),
          h('td', { class: 'num' }, `${d.attemptCount}/${d.maxAttempts}`),
          h('td', {}, time(d.updatedAt)),
          h('td', {}, details),
        );
      }),
    );
  }

  #renderSubscriptions(list, urls) {
    const body = byId('subscription-rows');
    if (!list.length) {
      body.replaceChildren(empty(7, 'No subscriptions.'));
      return;
    }
    body.replaceChildren(
      ...list.map((s) =>
        h(
          'tr',
          {},
          h('td', {}, shortId(s.id)),
          h('td', { class: 'mono' }, urls.get(s.destinationId) ?? s.destinationId),
          h('td', { class: 'mono' }, s.eventTypes.join(', ')),
          h('td', {}, badge(s.state)),
          h('td', {}, s.ordering, s.pausedByDeliveryId ? [' ', badge('PAUSED'), ' by ', shortId(s.pausedByDeliveryId)] : null),
          h('td', { class: 'num' }, s.afterSequence),
          h('td', {}, s.description || '—'),
        ),
      ),
    );
  }

  #renderDestinations(list) {
    const body = byId('destination-rows');
    if (!list.length) {
      body.replaceChildren(empty(DESTINATION_COLUMNS, 'No destinations.'));
      return;
    }
    body.replaceChildren(...list.map((d) => destinationRow(d, this.ctx.session, (label, run) => this.act(label, run), [this.recovery.testButton(d)])));
  }

  /** Runs a confirmed action, announces it and refreshes the view. */
  async act(label, run) {
    try {
      await run();
      this.statusEl.textContent = label;
      showError(this.errorEl, null);
    } catch (err) {
      showError(this.errorEl, err);
    }
    await this.refresh();
  }

  /** Asks for confirmation, then redrives one dead-lettered delivery. */
  async redrive(d, url) {
    const ok = await confirmAction({
      title: 'Redrive this delivery?',
      text: `Event ${d.eventSequence} (${d.eventType}) is sent again to ${url ?? d.destinationId} with the same webhook-id and a fresh budget of attempts.`,
      confirmLabel: 'Redrive',
    });
    if (!ok) return;
    try {
      const data = await graphql(this.ctx.session, REDRIVE, { id: d.id });
      const r = data.redriveWebhookDelivery.delivery;
      this.statusEl.textContent = `Delivery of event ${d.eventSequence} redriven: now ${r.state}.`;
      showError(this.errorEl, null);
    } catch (err) {
      showError(this.errorEl, err);
    }
    await this.refresh();
  }
}

function attemptsTable(attempts) {
  if (!attempts.length) return h('p', { class: 'meta' }, 'No attempt yet.');
  return h(
    'table',
    { class: 'grid' },
    h('thead', {}, h('tr', {}, ...['#', 'Outcome', 'Started', 'Status', 'Latency', 'Error'].map((c) => h('th', { scope: 'col' }, c)))),
    h(
      'tbody',
      {},
      ...attempts.map((a) =>
        h(
          'tr',
          {},
          h('td', { class: 'num' }, a.number),
          h('td', {}, badge(a.outcome)),
          h('td', {}, time(a.startedAt)),
          h('td', { class: 'num' }, a.statusCode ?? '—'),
          h('td', { class: 'num' }, a.latencyMs == null ? '—' : `${Math.round(a.latencyMs)} ms`),
          h('td', {}, a.error ? `${a.errorClass}: ${a.error}` : '—'),
        ),
      ),
    ),
  );
}

function empty(cols, text) {
  return h('tr', { class: 'empty' }, h('td', { colspan: cols }, text));
}
