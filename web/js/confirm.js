// A confirmation dialog (native <dialog>: focus is trapped, Escape cancels).

import { byId } from './dom.js';

/**
 * Asks the user to confirm; resolves true only when they press the confirm
 * button. Focus starts on Cancel, so that Enter alone never confirms.
 */
export function confirmAction({ title, text, confirmLabel = 'Confirm' }) {
  const dialog = byId('confirm');
  const ok = byId('confirm-ok');
  const cancel = byId('confirm-cancel');
  const opener = document.activeElement;
  byId('confirm-title').textContent = title;
  byId('confirm-text').textContent = text;
  ok.textContent = confirmLabel;
  return new Promise((resolve) => {
    let answer = false;
    const onOk = () => {
      answer = true;
      dialog.close();
    };
    const onCancel = () => dialog.close();
    ok.addEventListener('click', onOk);
    cancel.addEventListener('click', onCancel);
    dialog.addEventListener(
      'close',
      () => {
        ok.removeEventListener('click', onOk);
        cancel.removeEventListener('click', onCancel);
        if (opener && opener.isConnected) opener.focus();
        resolve(answer);
      },
      { once: true },
    );
    dialog.showModal();
    cancel.focus();
  });
}
