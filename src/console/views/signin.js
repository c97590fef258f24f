import { signIn } from '../api.js';
import { field, h, setFieldError, showNotice } from '../dom.js';

/** Sign-in with an API token: an account's (trb_…) or the operator's. */
export async function signInView(ctx, signedIn) {
  ctx.title('Sign in');
  const token = h('input', { type: 'password', name: 'token', autocomplete: 'current-password', spellcheck: 'false', required: true, autofocus: true });
  const status = h('div', { class: 'form-status' });
  const submit = h('button', { type: 'submit' }, 'Sign in');
  const form = h(
    'form',
    { class: 'card narrow', novalidate: true, 'aria-labelledby': 'signin-title' },
    h('h1', { id: 'signin-title' }, 'Sign in to Tributary'),
    h('p', null, 'Use your account’s API token, or the operator token to see every account.'),
    field({ label: 'API token', control: token, hint: 'An account token starts with trb_; the operator token is in .tributary/admin-token.' }),
    status,
    submit,
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const value = /** @type {HTMLInputElement} */ (token).value.trim();
    setFieldError(token, null);
    showNotice(status, 'error', null);
    if (!value) {
      setFieldError(token, 'Paste your API token.');
      token.focus();
      return;
    }
    submit.setAttribute('disabled', '');
    try {
      const principal = await signIn(value);
      await signedIn(principal);
    } catch (error) {
      setFieldError(token, error instanceof Error ? error.message : String(error));
      token.focus();
    } finally {
      submit.removeAttribute('disabled');
    }
  });
  ctx.root.append(form);
  token.focus();
}
