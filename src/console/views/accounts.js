import { api } from '../api.js';
import { copyable, field, h, notice, setFieldError, showNotice } from '../dom.js';
import { at } from '../format.js';

/** The operator's page: every account, and a form to create one (its token is shown once). */
export async function accountsView(ctx) {
  ctx.title('Accounts');
  if (ctx.principal.kind !== 'admin') {
    ctx.root.append(h('h1', null, 'Accounts'), notice('error', 'Only the operator sees the accounts.'));
    return;
  }
  const listBox = h('div');
  const createdBox = h('div');
  const name = h('input', { type: 'text', name: 'name', maxlength: 200, autocomplete: 'off' });
  const status = h('div', { class: 'form-status' });
  const submit = h('button', { type: 'submit' }, 'Create account');
  const form = h(
    'form',
    { class: 'card', novalidate: true },
    h('h2', null, 'Create an account'),
    field({ label: 'Name', control: name, hint: 'Shown in the console; a customer or team name.' }),
    status,
    submit,
  );

  const refresh = async () => {
    const { data } = await api('GET', '/api/accounts');
    const headers = ['Name', 'ID', 'Created'];
    listBox.replaceChildren(
      data.length === 0
        ? h('p', { class: 'muted' }, 'No accounts yet.')
        : h(
            'div',
            { class: 'table-wrap' },
            h(
              'table',
              null,
              h('caption', { class: 'sr-only' }, 'Accounts'),
              h(
                'thead',
                null,
                h(
                  'tr',
                  null,
                  headers.map((x) => h('th', { scope: 'col' }, x)),
                ),
              ),
              h(
                'tbody',
                null,
                data.map((a) =>
                  h(
                    'tr',
                    null,
                    h('th', { scope: 'row', 'data-label': headers[0] }, a.name),
                    h('td', { 'data-label': headers[1] }, h('code', null, a.id)),
                    h('td', { 'data-label': headers[2] }, at(a.created_at)),
                  ),
                ),
              ),
            ),
          ),
    );
  };

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    setFieldError(name, null);
    showNotice(status, 'error', null);
    const value = /** @type {HTMLInputElement} */ (name).value.trim();
    if (!value) {
      setFieldError(name, 'Give the account a name.');
      name.focus();
      return;
    }
    submit.setAttribute('disabled', '');
    try {
      const created = await api('POST', '/api/accounts', { name: value });
      form.reset();
      createdBox.replaceChildren(
        notice(
          'ok',
          h('p', null, h('strong', null, `Account ${created.name} created. `), 'Its API token and event password are shown only this once: copy them now.'),
          h('p', { class: 'label' }, 'API token'),
          copyable('API token', created.api_token),
          h('p', { class: 'label' }, 'Event username'),
          copyable('event username', created.events.username),
          h('p', { class: 'label' }, 'Event password'),
          copyable('event password', created.events.password),
        ),
      );
      await refresh();
    } catch (error) {
      showNotice(status, 'error', `Not created: ${error.message}`);
    } finally {
      submit.removeAttribute('disabled');
    }
  });

  ctx.root.append(h('h1', null, 'Accounts'), listBox, createdBox, form);
  await refresh();
}
