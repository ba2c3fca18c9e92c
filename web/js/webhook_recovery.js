// The webhook view's recovery actions: recover a destination's failed
// deliveries, replay a range of events to a subscription, skip a dead
// letter and send a test event. Each asks for confirmation first and
// reports its outcome in the view's status line.

import { confirmAction } from './confirm.js';
import { byId, h, shortText, showError } from './dom.js';
import { graphql } from './graphql.js';

const RECOVER = `mutation DashboardRecover($in: RecoverWebhookDeliveriesInput!) { recoverWebhookDeliveries(input: $in) { count } }`;
const REPLAY = `mutation DashboardReplay($in: ReplayWebhookEventsInput!) { replayWebhookEvents(input: $in) { count replayOf } }`;
const SKIP = `mutation DashboardSkip($id: ID!) { skipWebhookDelivery(input: { deliveryId: $id, confirm: true }) { delivery { id state } } }`;
const TEST_EVENT = `mutation DashboardTestEvent($id: ID!) {
  sendWebhookTestEvent(input: { destinationId: $id }) { webhookId attempt { outcome statusCode latencyMs errorClass error } }
}`;

/** Recovery actions of the webhook view (view: its WebhooksView). */
export class WebhookRecovery {
  constructor(view) {
    this.view = view;
    this.recoverForm = byId('recover-form');
    this.replayForm = byId('replay-form');
    this.recoverForm.addEventListener('submit', (e) => {
      e.preventDefault();
      this.recover();
    });
    this.replayForm.addEventListener('submit', (e) => {
      e.preventDefault();
      this.replay();
    });
  }

  /** Fills the forms' choices, keeping what is selected. */
  fill(destinations, subscriptions) {
    fillSelect(byId('recover-destination'), destinations.map((d) => [d.id, d.url]));
    fillSelect(byId('replay-subscription'), subscriptions.map((s) => [s.id, `${shortText(s.id)} ${s.eventTypes.join(', ')} (${s.ordering})`]));
  }

  async recover() {
    const select = byId('recover-destination');
    const since = byId('recover-since').value;
    if (!select.value || !since) return;
    const sinceISO = new Date(`${since}Z`).toISOString();
    const ok = await confirmAction({
      title: 'Recover failed deliveries?',
      text: `Every delivery to ${select.selectedOptions[0].textContent} whose last attempt failed since ${sinceISO} is sent again: dead letters with a fresh budget of attempts, retries at once.`,
      confirmLabel: 'Recover',
    });
    if (!ok) return;
    await this.#run(RECOVER, { in: { destinationId: select.value, since: sinceISO, confirm: true } },
      (d) => `${d.recoverWebhookDeliveries.count} deliveries re-queued.`);
  }

  async replay() {
    const select = byId('replay-subscription');
    const from = byId('replay-from').value;
    const to = byId('replay-to').value;
    if (!select.value || !from || !to) return;
    const ok = await confirmAction({
      title: 'Replay these events?',
      text: `The events ${from} to ${to} matching subscription ${shortText(select.value)} are delivered again, as new deliveries with new webhook-ids.`,
      confirmLabel: 'Replay',
    });
    if (!ok) return;
    await this.#run(REPLAY, { in: { subscriptionId: select.value, fromSequence: from, toSequence: to, confirm: true } },
      (d) => `${d.replayWebhookEvents.count} events replayed (replay ${shortText(d.replayWebhookEvents.replayOf)}).`);
  }

  /** The Skip button of a dead letter. */
  skipButton(d) {
    return h('button', {
      type: 'button',
      class: 'danger',
      dataset: { focusKey: `skip-${d.id}`, action: 'skip' },
      'aria-label': `Skip the delivery of event ${d.eventSequence} (${d.eventType})`,
      onClick: async () => {
        const ok = await confirmAction({
          title: 'Skip this delivery?',
          text: `Event ${d.eventSequence} (${d.eventType}) is never sent again; an ordered subscription it holds goes on with its next event.`,
          confirmLabel: 'Skip',
        });
        if (ok) await this.#run(SKIP, { id: d.id }, () => `Delivery of event ${d.eventSequence} skipped.`);
      },
    }, 'Skip…');
  }

  /** The test-event button of a destination. */
  testButton(dest) {
    return h('button', {
      type: 'button',
      dataset: { focusKey: `test-${dest.id}`, action: 'test-event' },
      'aria-label': `Send a test event to ${dest.url}`,
      onClick: () =>
        this.#run(TEST_EVENT, { id: dest.id }, (d) => {
          const a = d.sendWebhookTestEvent.attempt;
          return `Test event to ${dest.url}: ${a.outcome}${a.statusCode ? ` (HTTP ${a.statusCode})` : ''}${a.error ? `: ${a.errorClass} ${a.error}` : ''}.`;
        }),
    }, 'Send test event');
  }

  async #run(query, variables, describe) {
    const { view } = this;
    try {
      const data = await graphql(view.ctx.session, query, variables);
      view.statusEl.textContent = describe(data);
      view.noticeEl.textContent = view.statusEl.textContent;
      showError(view.errorEl, null);
    } catch (err) {
      showError(view.errorEl, err);
    }
    await view.refresh();
  }
}

function fillSelect(select, options) {
  const keep = select.value;
  select.replaceChildren(...options.map(([value, label]) => h('option', { value }, label)));
  if (options.some(([value]) => value === keep)) select.value = keep;
}
