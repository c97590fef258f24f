import { api } from '../api.js';
import { field, h, setFieldError, showNotice } from '../dom.js';

const MAX_DEBOUNCE_MS = 86_400_000;

const TURBO_ADVICE = {
  airtable:
    'Turbo lets the sync use 5 requests per second of the base’s Airtable limit instead of 3 (66% more), so a full sync takes 40% less time. Recommended only when your reads use the database and your writes go through the proxy: other clients of the base then have no room left in Airtable’s 5 requests per second.',
  stripe:
    'Turbo lets the sync use all of the account’s Stripe rate limit instead of 80%. Recommended only when your reads use the database and your writes go through the proxy, which always goes first.',
};

function checkbox(name, checked) {
  return h('input', { type: 'checkbox', name, checked });
}

function checkboxField(label, control, hint) {
  const id = control.id || (control.id = `setting-${control.getAttribute('name')}`);
  control.setAttribute('aria-describedby', `${id}-hint`);
  return h('div', { class: 'field checkbox' }, h('label', { for: id }, control, ' ', label), h('p', { class: 'hint', id: `${id}-hint` }, hint));
}

/** Turbo and, for Airtable, the Advanced settings; saved together, with what happens next. */
export async function settingsTab(_ctx, panel, sync, updated) {
  const s = sync.settings;
  const turbo = checkbox('turbo', s.turbo);
  const airtable = sync.kind === 'airtable';
  const debounce = airtable
    ? h('input', { type: 'number', name: 'debounce_ms', min: 0, max: MAX_DEBOUNCE_MS, step: 1, inputmode: 'numeric', value: String(s.debounce_ms) })
    : null;
  const lookupAs = airtable
    ? h(
        'select',
        { name: 'lookup_as' },
        h('option', { value: 'text[]', selected: s.lookup_as === 'text[]' }, 'text[] (an array of values)'),
        h('option', { value: 'text', selected: s.lookup_as === 'text' }, 'text (the values joined)'),
      )
    : null;
  const intelligentCast = airtable ? checkbox('intelligent_cast', s.intelligent_cast) : null;
  const stableLinks = airtable ? checkbox('stable_attachment_links', s.stable_attachment_links === true) : null;
  const connected = airtable ? null : checkbox('connected_accounts', s.connected_accounts);
  const status = h('div', { class: 'form-status' });
  const save = h('button', { type: 'submit' }, 'Save settings');

  const form = h(
    'form',
    { class: 'card', novalidate: true },
    h('fieldset', null, h('legend', null, 'Turbo'), checkboxField('Turbo', turbo, TURBO_ADVICE[sync.kind])),
    airtable
      ? h(
          'fieldset',
          null,
          h('legend', null, 'Advanced'),
          field({
            label: 'Debounce Updates (ms)',
            control: debounce,
            hint: 'Wait until a record has been stable for this many milliseconds before writing it (approximate); 0 turns debouncing off. Deletes are immediate.',
          }),
          field({ label: 'Lookup as', control: lookupAs, hint: 'The column type of Lookup fields.' }),
          checkboxField(
            'Intelligent cast',
            intelligentCast,
            'On: a link field that allows one record is text (ready for foreign keys), one that allows several is text[]. Off: every link field is text[].',
          ),
          checkboxField(
            'Stable attachment links',
            stableLinks,
            'On: attachment columns (and lookups of them) hold links of this service that keep working, each redirecting to a fresh Airtable URL; anyone who has a link can open the file until you turn this off or delete the sync. Off: Airtable’s own URLs, which expire after a few hours.',
          ),
        )
      : h(
          'fieldset',
          null,
          h('legend', null, 'Connect'),
          checkboxField(
            'Connected accounts',
            connected,
            'For a platform: each connected account’s objects are synced too, into the same tables, with the account’s id in the stripe_account column (NULL for the platform’s own). Turning it off removes them.',
          ),
        ),
    status,
    save,
  );

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    showNotice(status, 'error', null);
    /** @type {Record<string, unknown>} */
    const settings = { turbo: /** @type {HTMLInputElement} */ (turbo).checked };
    if (airtable) {
      setFieldError(debounce, null);
      const raw = /** @type {HTMLInputElement} */ (debounce).value.trim();
      if (!/^\d+$/.test(raw) || Number(raw) > MAX_DEBOUNCE_MS) {
        setFieldError(debounce, `Enter a whole number of milliseconds from 0 to ${MAX_DEBOUNCE_MS.toLocaleString('en-US')} (0 turns debouncing off).`);
        showNotice(status, 'error', 'Nothing was saved: please correct the field marked above.');
        debounce.focus();
        return;
      }
      settings.debounce_ms = Number(raw);
      settings.lookup_as = /** @type {HTMLSelectElement} */ (lookupAs).value;
      settings.intelligent_cast = /** @type {HTMLInputElement} */ (intelligentCast).checked;
      settings.stable_attachment_links = /** @type {HTMLInputElement} */ (stableLinks).checked;
    } else {
      settings.connected_accounts = /** @type {HTMLInputElement} */ (connected).checked;
    }
    const before = sync.settings;
    const reshapes =
      airtable &&
      (settings.lookup_as !== before.lookup_as ||
        settings.intelligent_cast !== before.intelligent_cast ||
        settings.stable_attachment_links !== (before.stable_attachment_links === true));
    save.setAttribute('disabled', '');
    showNotice(status, 'info', 'Saving…');
    try {
      sync = await api('PATCH', `/api/syncs/${sync.id}`, { settings });
      updated(sync);
      showNotice(
        status,
        'ok',
        reshapes
          ? 'Saved. The next sync cycle rebuilds the tables whose column types change: expect them in about a sync time plus a minute; readers see the old tables until then.'
          : 'Saved. The sync uses the new settings from its next cycle.',
      );
    } catch (error) {
      showNotice(status, 'error', `Not saved: ${error.message}`);
    } finally {
      save.removeAttribute('disabled');
    }
  });
  panel.append(form);
}
