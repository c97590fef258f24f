// The console's only way to the server: the management API, with the session cookie
// (sent by the browser, HttpOnly) and the session's CSRF token on state-changing requests.

export class ApiError extends Error {
  /** @param {number} status @param {string} code @param {string} message */
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

let csrfToken = '';
/** Whose session the CSRF token is for ('admin' or the account id). */
let signedInAs = '';
/** @type {() => void} */
let onSessionEnded = () => {};

const whoIs = (principal) => (principal.kind === 'admin' ? 'admin' : principal.account.id);

function remember(answer) {
  csrfToken = answer.csrf_token;
  signedInAs = whoIs(answer.principal);
  return answer.principal;
}

/** Called when an API answer says the session is gone (401): the app shows the sign-in. */
export function whenSessionEnds(handler) {
  onSessionEnded = handler;
}

/**
 * One JSON request. Errors become ApiError with the server's own message, so forms can show
 * it; a network failure gets a message of its own rather than a blank page.
 * @param {string} method
 * @param {string} path
 * @param {unknown} [body]
 */
export async function api(method, path, body) {
  try {
    return await request(method, path, body);
  } catch (error) {
    // A sign-in in another tab makes a new session and CSRF token: the cookie is shared, this
    // tab's token is stale. Asked again once; another account's session reloads the page.
    if (!(error instanceof ApiError) || error.status !== 403 || method === 'GET' || (method === 'POST' && path === '/console/session')) throw error;
    const now = await request('GET', '/console/session').catch(() => null);
    if (!now || whoIs(now.principal) !== signedInAs) {
      location.reload();
      throw error;
    }
    csrfToken = now.csrf_token;
    return request(method, path, body);
  }
}

async function request(method, path, body) {
  /** @type {Record<string, string>} */
  const headers = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (method !== 'GET' && csrfToken) headers['X-CSRF-Token'] = csrfToken;
  let response;
  try {
    response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'same-origin',
      cache: 'no-store',
    });
  } catch {
    throw new ApiError(0, 'network', 'The server could not be reached. Check that Tributary is running, then try again.');
  }
  const text = await response.text();
  let data;
  try {
    data = text ? JSON.parse(text) : undefined;
  } catch {
    data = undefined;
  }
  if (!response.ok) {
    const error = data?.error;
    const message = error?.message || `The server answered ${response.status} ${response.statusText}.`;
    if (response.status === 401 && !path.startsWith('/console/session')) onSessionEnded();
    throw new ApiError(response.status, error?.code || `http_${response.status}`, message);
  }
  return data;
}

/** Who is signed in: { kind: 'admin' } | { kind: 'account', account }, or null. */
export async function currentSession() {
  try {
    return remember(await api('GET', '/console/session'));
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) return null;
    throw error;
  }
}

export async function signIn(token) {
  return remember(await api('POST', '/console/session', { token }));
}

export async function signOut() {
  await api('DELETE', '/console/session');
  csrfToken = '';
  signedInAs = '';
}
