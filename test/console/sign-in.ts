/** Signing in to the console through its form, for the console's HTTP tests. */
import assert from 'node:assert/strict';
import { ADMIN, type TestLrs, type TestUser } from '../helpers/lrs.ts';

export interface Signed {
  cookie: string;
  csrf: string;
}

/** Signs in through the form; the session cookie and the CSRF token of its pages. */
export async function signIn(t: Pick<TestLrs, 'url'>, user: TestUser = ADMIN, headers: Record<string, string> = {}): Promise<Signed> {
  const res = await fetch(`${t.url}/console/sign-in`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
    body: new URLSearchParams({ username: user.username, password: user.password }),
  });
  assert.equal(res.status, 303, await res.text());
  const cookie = res.headers.get('set-cookie')!.split(';')[0];
  const page = await (await fetch(`${t.url}/console/statements`, { headers: { cookie } })).text();
  return { cookie, csrf: /name="csrf-token" content="([^"]+)"/.exec(page)![1] };
}
