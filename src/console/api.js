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
/** @type {() => void} */
let onSessionEnded = () => {};

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
    const error = data && data.error;
    const message = (error && error.message) || `The server answered ${response.status} ${response.statusText}.`;
    if (response.status === 401 && !path.startsWith('/console/session')) onSessionEnded();
    throw new ApiError(response.status, (error && error.code) || `http_${response.status}`, message);
  }
  return data;
}

/** Who is signed in: { kind: 'admin' } | { kind: 'account', account }, or null. */
export async function currentSession() {
  try {
    const answer = await api('GET', '/console/session');
    csrfToken = answer.csrf_token;
    return answer.principal;
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) return null;
    throw error;
  }
}

export async function signIn(token) {
  const answer = await api('POST', '/console/session', { token });
  csrfToken = answer.csrf_token;
  return answer.principal;
}

export async function signOut() {
  try {
    await api('DELETE', '/console/session');
  } finally {
    csrfToken = '';
  }
}
