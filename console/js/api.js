// The console's one way to the API: every call carries the signed-in token, asks for
// JSON:API, and turns an error document into an ApiError the views can show.

import { t } from './strings.js';

const TOKEN = 'coursed.token';
const CALLER = 'coursed.caller';
export const MEDIA = 'application/vnd.api+json';

/** The token of this tab: kept in sessionStorage (never a cookie: the browser sends nothing
 * by itself, so no other site can make a request in the teacher's name). */
export const session = {
  token: () => sessionStorage.getItem(TOKEN),
  signIn(token, caller) {
    sessionStorage.setItem(TOKEN, token);
    sessionStorage.setItem(CALLER, JSON.stringify(caller));
  },
  signOut() {
    sessionStorage.removeItem(TOKEN);
    sessionStorage.removeItem(CALLER);
  },
  /** Who the token is: `{name, scope, writes}`, as `GET /v1` said at sign-in. */
  caller() {
    try {
      return JSON.parse(sessionStorage.getItem(CALLER) ?? 'null');
    } catch {
      return null;
    }
  },
};

export class ApiError extends Error {
  constructor(status, errors, etag) {
    const first = errors[0];
    super(first?.detail ?? first?.title ?? t('error.status', { status }));
    this.status = status;
    this.errors = errors;
    this.etag = etag;
  }
}

/** What to do when the token is refused (set by the router: back to the sign-in page). */
let unauthorized = () => {};
export function onUnauthorized(f) {
  unauthorized = f;
}

/** Calls the API: `path` under `/v1` (with its query), `body` an object sent as JSON:API,
 * `ifMatch` the tag the change is based on (`ifNoneMatch: '*'`: only if the target is gone).
 * Resolves to `{status, doc, etag}`; rejects with an ApiError for a status other than 2xx (a network failure is status 0). */
export async function call(method, path, { body, ifMatch, ifNoneMatch, token, signal } = {}) {
  const headers = { Accept: MEDIA, Authorization: `Bearer ${token ?? session.token() ?? ''}` };
  if (body !== undefined) headers['Content-Type'] = MEDIA;
  if (ifMatch) headers['If-Match'] = ifMatch;
  if (ifNoneMatch) headers['If-None-Match'] = ifNoneMatch;
  let res;
  try {
    res = await fetch(`/v1${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      // Revalidated every time: a view shows what the server holds now.
      cache: 'no-cache',
      credentials: 'omit',
      signal,
    });
  } catch (e) {
    if (e?.name === 'AbortError') throw e;
    throw new ApiError(0, [{ title: t('error.network') }]);
  }
  const etag = res.headers.get('ETag');
  let doc = null;
  const text = res.status === 204 ? '' : await res.text();
  if (text) {
    try {
      doc = JSON.parse(text);
    } catch {
      doc = null;
    }
  }
  if (!res.ok) {
    if (res.status === 401 && !token) unauthorized();
    throw new ApiError(res.status, Array.isArray(doc?.errors) ? doc.errors : [], etag);
  }
  return { status: res.status, doc, etag };
}

/** A query string from pairs, the API's brackets left readable. */
export function query(params) {
  const parts = [];
  for (const [key, value] of Object.entries(params)) {
    if (value === undefined || value === null || value === '') continue;
    parts.push(`${key}=${encodeURIComponent(value)}`);
  }
  return parts.length ? `?${parts.join('&')}` : '';
}

/** Who `token` is, from the API's entry point; rejects with an ApiError (401 for a token the
 * server does not accept). */
export async function whoami(token) {
  const { doc } = await call('GET', '', { token });
  return doc?.meta?.caller ?? null;
}

let description = null;
/** The OpenAPI document, read once: the field rules of the forms and the API reference come
 * from it, so that the console follows the server's own declarations. */
export function openapi() {
  description ??= fetch('/v1/openapi.json', { cache: 'no-cache', credentials: 'omit' })
    .then((r) => (r.ok ? r.json() : Promise.reject(new ApiError(r.status, []))))
    .catch((e) => {
      description = null;
      throw e;
    });
  return description;
}
