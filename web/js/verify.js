// The verify view: verifies the selected project's hash chain with the
// auditChainVerification subscription over the dashboard's WebSocket,
// shows its progress live (events checked, sequence reached, events per
// second) and its verdict, can be cancelled, and resumes from the last
// progress item's resumeToken when the socket drops and comes back.

import { byId, showError } from './dom.js';

const VERIFY = `subscription DashboardVerifyChain($p: ID!, $from: Uint64, $to: Uint64, $resume: String) {
  auditChainVerification(projectId: $p, fromSequence: $from, toSequence: $to, resumeToken: $resume) {
    valid complete resumeToken checkedCount sequenceReached eventsPerSecond firstInvalidSequence
    headSequence purgedThroughSequence checkpointsChecked firstInvalidCheckpointSequence
  }
}`;

const number = new Intl.NumberFormat(undefined, { maximumFractionDigits: 0 });

/** The verify view; ctx.session and ctx.ws are the current session and socket (see FeedView). */
export class VerifyView {
  constructor(ctx) {
    this.ctx = ctx;
    this.form = byId('verify-form');
    this.startButton = byId('verify-start');
    this.cancelButton = byId('verify-cancel');
    this.errorEl = byId('verify-error');
    this.progressEl = byId('verify-progress');
    this.barEl = byId('verify-bar');
    this.verdictEl = byId('verify-verdict');
    /** The verification under way: {project, variables, resume, last, stop}. */
    this.run = null;
    this.form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      this.start();
    });
    this.cancelButton.addEventListener('click', () => this.cancel());
  }

  /** Starts verifying the session's project over the form's range (empty: all of it). */
  start() {
    if (this.run) return;
    const data = new FormData(this.form);
    const variables = { p: this.ctx.session.project };
    for (const name of ['from', 'to']) {
      const v = String(data.get(name) ?? '').trim();
      if (v) variables[name] = v;
    }
    const run = { project: variables.p, variables, resume: null, last: null, stop: null };
    this.run = run;
    showError(this.errorEl, null);
    this.#setVerdict(null, '');
    this.barEl.removeAttribute('value');
    this.barEl.hidden = false;
    this.progressEl.textContent = `Verifying ${run.project}…`;
    delete this.progressEl.dataset.checked;
    delete this.progressEl.dataset.reached;
    this.#setRunning(true);
    // Called on every (re)subscribe: after a dropped socket the verification
    // continues from the last progress item's token.
    const payload = () => ({
      query: VERIFY,
      variables: run.resume ? { p: run.project, resume: run.resume } : run.variables,
    });
    run.stop = this.ctx.ws.subscribe(payload, {
      next: (result) => {
        if (this.run !== run) return;
        if (result.errors?.length) {
          this.#fail({ code: result.errors[0].extensions?.code, message: result.errors[0].message });
          return;
        }
        const v = result.data.auditChainVerification;
        run.last = v;
        if (v.complete) this.#finish(v);
        else {
          run.resume = v.resumeToken;
          this.#progress(v);
        }
      },
      error: (errors) => {
        if (this.run !== run) return;
        this.#fail({ code: errors?.[0]?.extensions?.code, message: errors?.[0]?.message ?? 'the verification failed' });
      },
      complete: () => {
        if (this.run !== run) return;
        this.#fail({ code: 'INCOMPLETE', message: 'the verification ended without a verdict' });
      },
    });
  }

  /** Stops the verification under way, keeping its progress on screen. */
  cancel() {
    const run = this.run;
    if (!run) return;
    this.#end();
    const reached = run.last ? ` after ${number.format(Number(run.last.checkedCount))} events (through sequence ${run.last.sequenceReached})` : '';
    this.#setVerdict('cancelled', `Cancelled${reached}. Nothing was concluded about the rest of the chain.`);
  }

  /** Stops any verification and clears the view (sign-out, another project). */
  reset() {
    this.#end();
    showError(this.errorEl, null);
    this.#setVerdict(null, '');
    this.progressEl.textContent = '';
    this.barEl.hidden = true;
  }

  #progress(v) {
    const head = Number(v.headSequence);
    const reached = Number(v.sequenceReached);
    this.barEl.max = Math.max(head, 1);
    this.barEl.value = Math.min(reached, head);
    this.progressEl.textContent = `Checked ${number.format(Number(v.checkedCount))} events, through sequence ${v.sequenceReached} of ${v.headSequence}, ${number.format(v.eventsPerSecond)} events/s.`;
    this.progressEl.dataset.checked = v.checkedCount;
    this.progressEl.dataset.reached = v.sequenceReached;
  }

  #finish(v) {
    this.#progress(v);
    this.#end();
    if (v.valid) {
      const n = Number(v.checkpointsChecked);
      const checkpoints = n ? ` and ${v.checkpointsChecked} signed checkpoint${n === 1 ? '' : 's'}` : '';
      this.#setVerdict('valid', `Valid: ${number.format(Number(v.checkedCount))} events${checkpoints} recomputed and matched, through sequence ${v.sequenceReached} (head ${v.headSequence}).`);
    } else if (v.firstInvalidSequence) {
      this.#setVerdict('broken', `Broken at sequence ${v.firstInvalidSequence}: that event is missing, or its content no longer matches its stored chain hash (it was changed after it was recorded). The ${number.format(Number(v.checkedCount))} events before it match.`, v.firstInvalidSequence);
    } else {
      this.#setVerdict('broken', `Broken at the signed checkpoint of sequence ${v.firstInvalidCheckpointSequence}: it does not verify, or does not sign the chain recomputed there (history was rewritten consistently, or the checkpoint was forged).`, v.firstInvalidCheckpointSequence);
    }
  }

  #fail(err) {
    this.#end();
    this.progressEl.textContent = '';
    showError(this.errorEl, err);
  }

  /** Forgets the run, unsubscribing when it is still under way. */
  #end() {
    const run = this.run;
    this.run = null;
    run?.stop?.();
    this.barEl.hidden = true;
    this.#setRunning(false);
  }

  #setRunning(running) {
    this.startButton.disabled = running;
    this.cancelButton.disabled = !running;
    this.form.setAttribute('aria-busy', String(running));
  }

  #setVerdict(state, text, sequence) {
    this.verdictEl.textContent = text;
    this.verdictEl.hidden = !state;
    if (state) this.verdictEl.dataset.verdict = state;
    else delete this.verdictEl.dataset.verdict;
    if (sequence) this.verdictEl.dataset.sequence = sequence;
    else delete this.verdictEl.dataset.sequence;
  }
}
