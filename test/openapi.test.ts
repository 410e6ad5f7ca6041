/**
 * GET /openapi.json and the /docs page: the description covers every route and its parameters are
 * exactly those the server accepts; the page works in a real headless Chromium, offline.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Validator } from '@seriousme/openapi-schema-validator';
import { chromium } from 'playwright-core';
import { acceptedBy, RESOURCES, type ParamSpec } from '../src/xapi/params.ts';
import { startTestLrs, type TestLrs } from './helpers/lrs.ts';

type Doc = {
  openapi: string;
  paths: Record<string, Record<string, { parameters?: { name?: string; in?: string; required?: boolean; $ref?: string }[]; responses: Record<string, unknown> }>>;
};

let t: TestLrs;
let doc: Doc;
before(async () => {
  t = await startTestLrs();
  const res = await t.fetch('/openapi.json', { user: null, version: null });
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
  doc = (await res.json()) as Doc;
});
after(() => t.close());

describe('GET /openapi.json', () => {
  test('is a valid OpenAPI 3.1 document', async () => {
    const result = await new Validator().validate(doc as unknown as Record<string, unknown>);
    assert.deepEqual(result.errors ?? [], []);
    assert.equal(result.valid, true);
  });

  test('describes every route the server answers, with its methods', async () => {
    assert.equal(doc.openapi, '3.1.0');
    assert.equal((doc as { 'x-undescribed'?: string[] })['x-undescribed'], undefined, 'every route needs its description in src/http/openapi.ts');
    for (const r of Object.values(RESOURCES)) {
      assert.deepEqual(Object.keys(doc.paths[r.path]).sort(), r.methods.map((m) => m.toLowerCase()).sort(), r.path);
    }
    for (const path of ['/whoami', '/lbheartbeat', '/__lbheartbeat__', '/heartbeat', '/__heartbeat__', '/metrics', '/openapi.json', '/docs']) {
      assert.ok(doc.paths[path]?.get, path);
      // ...and each answers something other than 404.
      assert.notEqual((await t.fetch(path, { version: null })).status, 404, path);
    }
    // A method the description does not list is refused by the server.
    assert.equal((await t.fetch('/xAPI/activities?activityId=http://example.com/a', { method: 'DELETE' })).status, 405);
  });

  test('query parameters are those the server accepts, no more, no fewer', async () => {
    const unknown = async (path: string, method: string, name: string) => {
      const res = await t.fetch(`${path}?${encodeURIComponent(name)}=x`, {
        method,
        ...(method === 'PUT' || method === 'POST' ? { body: '{}', headers: { 'content-type': 'application/json' } } : {}),
      });
      const body = res.status === 400 ? ((await res.json()) as { detail: { loc: string[]; msg: string }[] | string }) : undefined;
      return Array.isArray(body?.detail) && body.detail.some((d) => d.loc[1] === name && /unknown parameter/.test(d.msg));
    };
    for (const r of Object.values(RESOURCES)) {
      for (const method of r.methods.filter((m) => m !== 'HEAD')) {
        const documented = (doc.paths[r.path][method.toLowerCase()].parameters ?? []).filter((p) => p.in === 'query').map((p) => p.name!);
        assert.deepEqual(
          documented,
          (r.params as readonly ParamSpec[]).filter((p) => acceptedBy(p, method)).map((p) => p.name),
          `${method} ${r.path}`,
        );
        for (const name of documented) assert.equal(await unknown(r.path, method, name), false, `${method} ${r.path} ${name}`);
        assert.equal(await unknown(r.path, method, 'notAParameter'), true, `${method} ${r.path}`);
      }
    }
    const state = doc.paths['/xAPI/activities/state'];
    const required = (method: string) => (state[method].parameters ?? []).filter((p) => p.required && p.in === 'query').map((p) => p.name);
    assert.deepEqual(required('put'), ['activityId', 'agent', 'stateId']);
    assert.deepEqual(required('get'), ['activityId', 'agent']);
    assert.ok(doc.paths['/xAPI/statements'].put.parameters!.some((p) => p.name === 'statementId' && p.required));
  });
});

describe('/docs in a real browser', () => {
  test('headless Chromium loads the page from this server alone and finds the statements route', async () => {
    const browser = await chromium.launch({
      executablePath: '/usr/bin/chromium',
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    try {
      const page = await browser.newPage();
      const requested: string[] = [];
      page.on('request', (r) => requested.push(r.url()));
      const errors: string[] = [];
      page.on('pageerror', (e) => errors.push(e.message));
      const res = await page.goto(`${t.url}/docs`);
      assert.equal(res?.status(), 200);
      const statements = page.locator('.opblock-summary-path[data-path="/xAPI/statements"]');
      await statements.first().waitFor({ timeout: 30_000 });
      assert.ok((await statements.count()) >= 4, 'GET, HEAD, PUT, POST');
      assert.equal(
        await page
          .locator('.info .title')
          .first()
          .textContent()
          .then((s) => /Lectern LRS/.test(s ?? '')),
        true,
      );
      // Expanding an operation shows its parameters, from the same table.
      await page.locator('#operations-Statements-get_xAPI_statements .opblock-summary').click();
      await page.locator('#operations-Statements-get_xAPI_statements tr[data-param-name="verb"]').waitFor({ timeout: 10_000 });
      assert.deepEqual(errors, []);
      assert.ok(requested.length >= 4);
      for (const url of requested) assert.ok(url.startsWith(t.url) || url.startsWith('data:'), `fetched from elsewhere: ${url}`);
    } finally {
      await browser.close();
    }
  });
});
