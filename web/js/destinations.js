// The destination rows of the webhook view: lifecycle state, health
// summary, and the lifecycle actions (disable, enable, delete), each
// confirmed first.

import { confirmAction } from './confirm.js';
import { badge, h, shortId, time } from './dom.js';
import { graphql } from './graphql.js';

/** The destination fields the view selects. */
export const DESTINATION_FIELDS = `id url description createdAt secretRotatedAt activeSecrets
  state disabledReason disabledAt rateLimitPerSecond maxInFlight
  health { consecutiveFailures lastSuccessAt lastFailureAt successRateLastHour attemptsLastHour circuit circuitOpenUntil }`;

/** How many columns a destination row has. */
export const DESTINATION_COLUMNS = 8;

const RESULT = `destination { id state }`;
const DISABLE = `mutation DashboardDisableDestination($id: ID!) { disableWebhookDestination(input: { destinationId: $id, reason: "disabled from the dashboard" }) { ${RESULT} } }`;
const ENABLE = `mutation DashboardEnableDestination($id: ID!) { enableWebhookDestination(input: { destinationId: $id }) { ${RESULT} } }`;
const DELETE = `mutation DashboardDeleteDestination($id: ID!) { deleteWebhookDestination(input: { destinationId: $id, confirm: true }) { ${RESULT} } }`;

/**
 * The row of destination d. act(label, run) is called by an action once the
 * user confirmed it, with a short past-tense label and the request to run;
 * extra are further action elements (the test event's button).
 */
export function destinationRow(d, session, act, extra = []) {
  const run = (query) => () => graphql(session, query, { id: d.id });
  const button = (label, action, confirm, query, danger) =>
    h('button', {
      type: 'button',
      class: danger ? 'danger' : false,
      dataset: { focusKey: `${action}-${d.id}`, action },
      'aria-label': `${label} the destination ${d.url}`,
      onClick: async () => {
        if (await confirmAction({ ...confirm, confirmLabel: label })) act(`${d.url}: ${action}d`, run(query));
      },
    }, `${label}…`);
  const actions = [];
  if (d.state === 'ENABLED') {
    actions.push(button('Disable', 'disable', {
      title: 'Disable this destination?',
      text: `Deliveries to ${d.url} wait as PAUSED, without using attempts, until it is enabled again.`,
    }, DISABLE, false));
  } else {
    actions.push(button('Enable', 'enable', {
      title: 'Enable this destination?',
      text: `Its paused deliveries are sent again, in order of sequence, to ${d.url}.`,
    }, ENABLE, false));
  }
  actions.push(button('Delete', 'delete', {
    title: 'Delete this destination?',
    text: `Its subscriptions end and its pending deliveries are cancelled. ${d.url} is not shown again; its deliveries stay as evidence.`,
  }, DELETE, true));
  return h(
    'tr',
    { dataset: { destinationId: d.id, state: d.state } },
    h('td', {}, shortId(d.id)),
    h('td', { class: 'mono' }, d.url),
    h('td', {}, d.description || '—'),
    h('td', {}, badge(d.state), d.disabledReason ? h('p', { class: 'meta' }, d.disabledReason) : null),
    h('td', {}, health(d.health)),
    h('td', {}, limits(d)),
    h('td', { class: 'num' }, d.activeSecrets),
    h('td', { class: 'actions' }, ...actions, ...extra),
  );
}

/** The health summary: breaker, failures in a row, success rate, last outcomes. */
function health(x) {
  const rate = x.successRateLastHour == null ? 'no attempts in the last hour'
    : `${Math.round(x.successRateLastHour * 100)} % of ${x.attemptsLastHour} in the last hour`;
  return [
    badge(x.circuit),
    h('p', { class: 'meta' }, rate),
    h('p', { class: 'meta' }, `${x.consecutiveFailures} failure${x.consecutiveFailures === 1 ? '' : 's'} in a row`),
    x.circuitOpenUntil ? h('p', { class: 'meta' }, 'next probe ', time(x.circuitOpenUntil)) : null,
    h('p', { class: 'meta' }, 'last success ', x.lastSuccessAt ? time(x.lastSuccessAt) : '—',
      ', last failure ', x.lastFailureAt ? time(x.lastFailureAt) : '—'),
  ];
}

function limits(d) {
  return [
    h('p', { class: 'meta' }, d.rateLimitPerSecond ? `${d.rateLimitPerSecond}/s` : 'no rate limit'),
    h('p', { class: 'meta' }, d.maxInFlight ? `${d.maxInFlight} in flight` : 'default in flight'),
  ];
}
