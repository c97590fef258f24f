import { api } from '../api.js';
import { copyable, field, h, notice, setFieldError, showNotice, toast, uid } from '../dom.js';
import { ago, dateTime } from '../format.js';
import { FilterInputError, filterEditor, filterText, rateText } from './webhook-filter.js';

// A destination's state and what its owner changes after creating it: enable and disable,
// the filter and rate, a new secret, recovery since a time (docs/events.md).

const DAY_S = 86_400;

/** "2024-05-01T12:00" in the browser's time zone, as a datetime-local input takes it. */
function localInputValue(date) {
  const pad = (n) => String(n).padStart(2, '0');
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}T${pad(date.getHours())}:${pad(date.getMinutes())}`;
}

/**
 * The controls of every card of one sync. A card is rebuilt at each refresh, but an open panel
 * (a form being filled in, a secret being copied) lives in a slot of its own that the refresh
 * leaves alone, so nothing typed or shown is lost.
 * @param {{ syncId: string, refresh: () => Promise<void> }} options
 */
export function webhookControls({ syncId, refresh }) {
  const path = (webhook) => `/api/syncs/${syncId}/webhooks/${webhook.id}`;
  /** webhook id → { slot, kind }: the panel slot of its card and which panel is open in it. */
  const slots = new Map();
  const slotOf = (id) => {
    if (!slots.has(id)) slots.set(id, { slot: h('div', { class: 'webhook-panel', id: uid('panel') }), kind: null });
    return slots.get(id);
  };

  /** Closes the card's panel; focus goes back to the button that opened it. */
  const close = (webhook) => {
    const entry = slotOf(webhook.id);
    const opener = entry.kind && document.querySelector(`[data-key="${webhook.id}:${entry.kind}"]`);
    entry.kind = null;
    entry.slot.replaceChildren();
    /** @type {HTMLElement | null} */ (opener)?.focus();
    void refresh();
  };

  const setEnabled = async (webhook, enabled) => {
    try {
      await api('PATCH', path(webhook), { enabled });
      toast(enabled ? 'Webhook enabled: delivery resumes where it stopped' : 'Webhook disabled: nothing is sent to it');
    } catch (error) {
      toast(`${enabled ? 'Enable' : 'Disable'} failed: ${error.message}`);
    }
    await refresh();
  };

  const editPanel = (webhook) => {
    const editor = filterEditor({ filter: webhook.filter, maxPerSecond: webhook.max_per_second });
    const status = h('div', { class: 'form-status' });
    const form = h(
      'form',
      { class: 'panel-form', novalidate: true, 'aria-label': `Filter and rate of the webhook to ${webhook.url}` },
      h('h4', null, 'Filter and rate'),
      h('p', { class: 'hint' }, 'Only matching events are sent; a change applies to events read from now on.'),
      editor.element,
      status,
      h(
        'div',
        { class: 'actions' },
        h('button', { type: 'submit' }, 'Save filter and rate'),
        h('button', { type: 'button', class: 'secondary', onclick: () => close(webhook) }, 'Cancel'),
      ),
    );
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      editor.clearErrors();
      showNotice(status, 'error', null);
      try {
        const body = editor.read();
        await api('PATCH', path(webhook), body);
        close(webhook);
        toast('Filter and rate saved');
      } catch (error) {
        if (error instanceof FilterInputError) error.control.focus();
        showNotice(status, 'error', `Not saved: ${error.message}`);
      }
    });
    return form;
  };

  const rotatePanel = (webhook) => {
    const name = uid('keep');
    const keepDay = h('input', { type: 'radio', name, value: String(DAY_S), id: `${name}-day`, checked: true });
    const dropNow = h('input', { type: 'radio', name, value: '0', id: `${name}-now` });
    const status = h('div', { class: 'form-status' });
    const form = h(
      'form',
      { class: 'panel-form', novalidate: true, 'aria-label': `New secret for the webhook to ${webhook.url}` },
      h('h4', null, 'Rotate the signing secret'),
      h('p', { class: 'hint' }, 'A new secret signs every delivery from now on. It is shown once, here.'),
      h(
        'fieldset',
        null,
        h('legend', null, 'The old secret'),
        h('label', { class: 'radio', for: keepDay.id }, keepDay, ' Keeps signing beside the new one for 24 hours, while you switch your receiver'),
        h('label', { class: 'radio', for: dropNow.id }, dropNow, ' Stops signing now'),
      ),
      status,
      h(
        'div',
        { class: 'actions' },
        h('button', { type: 'submit' }, 'Make a new secret'),
        h('button', { type: 'button', class: 'secondary', onclick: () => close(webhook) }, 'Cancel'),
      ),
    );
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      const seconds = /** @type {HTMLInputElement} */ (dropNow).checked ? 0 : DAY_S;
      try {
        const rotated = await api('POST', `${path(webhook)}/rotate-secret`, { previous_expires_in: seconds });
        const done = h('button', { type: 'button', class: 'secondary', onclick: () => close(webhook) }, 'I have copied it');
        slotOf(webhook.id).slot.replaceChildren(
          notice(
            'ok',
            h('p', null, h('strong', null, 'New secret made. '), 'It is shown only this once: copy it now.'),
            copyable('new webhook secret', rotated.secret),
            h(
              'p',
              { class: 'previous-expiry' },
              rotated.previous_expires_at
                ? [
                    'The old secret keeps signing beside it until ',
                    h('time', { datetime: rotated.previous_expires_at }, dateTime(rotated.previous_expires_at)),
                    ': switch your receiver to the new one before then.',
                  ]
                : 'The old secret no longer signs: deliveries carry the new signature only.',
            ),
            done,
          ),
        );
        done.focus();
        await refresh();
      } catch (error) {
        showNotice(status, 'error', `Not rotated: ${error.message}`);
      }
    });
    return form;
  };

  const recoverPanel = (webhook) => {
    const since = h('input', { type: 'datetime-local', step: 60, value: localInputValue(new Date(Date.now() - 3_600_000)) });
    const status = h('div', { class: 'form-status' });
    const form = h(
      'form',
      { class: 'panel-form', novalidate: true, 'aria-label': `Recover the webhook to ${webhook.url}` },
      h('h4', null, 'Recover since a time'),
      h(
        'p',
        { class: 'hint' },
        'Every event of its topics logged since then (that passes its filter) is sent again, in order per record and with the same webhook-id, then delivery goes on. Use it after your receiver lost data. A disabled webhook is enabled.',
      ),
      field({
        label: 'Send again every event since',
        control: since,
        hint: `Your local time (${Intl.DateTimeFormat().resolvedOptions().timeZone}). Not in the future, and within the event log's retention (7 days unless the operator set another).`,
      }),
      status,
      h(
        'div',
        { class: 'actions' },
        h('button', { type: 'submit' }, 'Recover'),
        h('button', { type: 'button', class: 'secondary', onclick: () => close(webhook) }, 'Cancel'),
      ),
    );
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      setFieldError(since, null);
      showNotice(status, 'error', null);
      const value = /** @type {HTMLInputElement} */ (since).value;
      const when = value ? new Date(value) : null;
      if (!when || Number.isNaN(when.getTime())) {
        setFieldError(since, 'Enter a date and time.');
        since.focus();
        return;
      }
      try {
        const answer = await api('POST', `${path(webhook)}/recover`, { since: when.toISOString() });
        close(webhook);
        toast(`Recovering: every event since ${dateTime(answer.since)} is sent again`);
      } catch (error) {
        setFieldError(since, error.message);
        since.focus();
        showNotice(status, 'error', `Not recovered: ${error.message}`);
      }
    });
    return form;
  };

  const PANELS = { edit: editPanel, rotate: rotatePanel, recover: recoverPanel };

  /** A button that opens (or closes) one of the card's panels. */
  const toggle = (webhook, kind, label) => {
    const entry = slotOf(webhook.id);
    const button = h(
      'button',
      { type: 'button', class: 'secondary', 'data-key': `${webhook.id}:${kind}`, 'aria-expanded': String(entry.kind === kind), 'aria-controls': entry.slot.id },
      label,
    );
    button.addEventListener('click', async () => {
      if (entry.kind === kind) return close(webhook);
      entry.kind = kind;
      // Said at once; the refresh that follows redraws every button of the card to match.
      button.setAttribute('aria-expanded', 'true');
      entry.slot.replaceChildren(PANELS[kind](webhook));
      /** @type {HTMLElement | null} */ (entry.slot.querySelector('input, select, button'))?.focus();
      await refresh();
    });
    return button;
  };

  return {
    /** The state next to the URL: a badge anyone scanning the list sees. */
    badge(webhook) {
      return webhook.state === 'disabled' ? h('span', { class: 'badge badge-disabled' }, 'Disabled') : h('span', { class: 'badge badge-enabled' }, 'Enabled');
    },
    /** Why and since when a destination is disabled, its filter and rate in words. */
    summary(webhook) {
      const disabled =
        webhook.state === 'disabled'
          ? h(
              'div',
              { class: 'notice notice-error webhook-disabled' },
              h('p', null, h('strong', null, 'Disabled '), ago(webhook.disabled_at), `: ${webhook.disabled_reason ?? 'no reason given'}.`),
              h('p', null, 'Nothing is sent to it. Enabled again, it resumes where it stopped: nothing logged meanwhile is lost, within the retention.'),
              h('button', { type: 'button', 'data-key': `${webhook.id}:enable`, onclick: () => setEnabled(webhook, true) }, 'Enable'),
            )
          : null;
      return [
        disabled,
        h('p', { class: 'webhook-filter' }, 'Filter: ', filterText(webhook.filter)),
        h('p', { class: 'webhook-rate' }, 'Rate: ', rateText(webhook.max_per_second)),
      ];
    },
    buttons(webhook) {
      return [
        webhook.state === 'enabled'
          ? h('button', { type: 'button', class: 'secondary', 'data-key': `${webhook.id}:disable`, onclick: () => setEnabled(webhook, false) }, 'Disable')
          : null,
        toggle(webhook, 'edit', 'Edit filter and rate'),
        toggle(webhook, 'rotate', 'Rotate secret'),
        toggle(webhook, 'recover', 'Recover since…'),
      ];
    },
    /** The card's panel slot: the same element at every refresh. */
    slot(webhook) {
      return slotOf(webhook.id).slot;
    },
    /** Forgets the cards of deleted webhooks. */
    keepOnly(ids) {
      for (const id of slots.keys()) if (!ids.has(id)) slots.delete(id);
    },
  };
}
