import { api } from '../api.js';
import { field, h, showNotice, toast } from '../dom.js';
import { syncName } from '../format.js';
import { navigate } from '../nav.js';

/** Deleting a sync, confirmed by typing its id. */
export async function deleteTab(_ctx, panel, sync) {
  const confirmInput = h('input', { type: 'text', name: 'confirm', spellcheck: 'false', autocomplete: 'off' });
  const keep = h('input', { type: 'checkbox', name: 'keep_database', id: 'keep-database' });
  const status = h('div', { class: 'form-status' });
  const submit = h('button', { type: 'submit', class: 'danger', disabled: true }, 'Delete this sync');
  confirmInput.addEventListener('input', () => {
    if (/** @type {HTMLInputElement} */ (confirmInput).value.trim() === sync.id) submit.removeAttribute('disabled');
    else submit.setAttribute('disabled', '');
  });
  const form = h(
    'form',
    { class: 'card danger-zone', novalidate: true },
    h(
      'p',
      null,
      `Deleting ${syncName(sync)} stops the sync, removes its webhooks and event topics, and drops its database ${sync.database.name} unless you keep it. This cannot be undone.`,
    ),
    h(
      'div',
      { class: 'field checkbox' },
      h('label', { for: 'keep-database' }, keep, ' Keep the database (it stays readable with the same URL, but is no longer updated)'),
    ),
    field({ label: `Type the sync ID ${sync.id} to confirm`, control: confirmInput }),
    status,
    submit,
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    if (/** @type {HTMLInputElement} */ (confirmInput).value.trim() !== sync.id) {
      showNotice(status, 'error', 'Type the sync ID exactly to confirm.');
      return;
    }
    submit.setAttribute('disabled', '');
    showNotice(status, 'info', 'Deleting…');
    try {
      const keepIt = /** @type {HTMLInputElement} */ (keep).checked;
      await api('DELETE', `/api/syncs/${sync.id}${keepIt ? '?keep_database=true' : ''}`);
      toast(`Deleted ${syncName(sync)}`);
      navigate('#/');
    } catch (error) {
      showNotice(status, 'error', `Not deleted: ${error.message}`);
      submit.removeAttribute('disabled');
    }
  });
  panel.append(form);
}
