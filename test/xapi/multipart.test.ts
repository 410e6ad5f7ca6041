import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { LrsError } from '../../src/errors.ts';
import { buildMultipartMixed, buildStatementsMultipart, parseMultipartMixed } from '../../src/xapi/multipart.ts';
import { type AttachmentPart, matchAttachments, statementParts } from '../../src/xapi/attachments.ts';
import { mediaTypeOf, parseContentType } from '../../src/xapi/media.ts';
import type { Attachment, Statement } from '../../src/xapi/types.ts';

/** The request path: the codec decodes, the xAPI layer splits. */
const extractStatementParts = (contentType: string, body: Buffer) => statementParts(parseMultipartMixed(contentType, body));
const sha256 = (data: Buffer | string): string => createHash('sha256').update(data).digest('hex');

/** Asserts that `fn` throws a 400 LrsError whose message matches `pattern`. */
function rejects400(fn: () => unknown, pattern: RegExp): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof LrsError, `expected an LrsError, got ${String(err)}`);
    assert.equal(err.kind, 'bad_request');
    assert.equal(err.status, 400);
    assert.match(err.message, pattern);
    return true;
  });
}

const crlf = (...lines: string[]): Buffer => Buffer.from(lines.join('\r\n'), 'latin1');

const B = 'simple-boundary';
const CT = `multipart/mixed; boundary=${B}`;

// The example of xAPI-Communication.md §1.5.2.s6, byte for byte (with CRLF line endings).
const SPEC_BOUNDARY = "abcABC0123'()+_,-./:=?";
const SPEC_CT = `multipart/mixed; boundary="${SPEC_BOUNDARY}"`;
const SPEC_STATEMENT = {
  actor: { mbox: 'mailto:sample.agent@example.com', name: 'Sample Agent', objectType: 'Agent' },
  verb: { id: 'http://adlnet.gov/expapi/verbs/answered', display: { 'en-US': 'answered' } },
  object: { id: 'http://www.example.com/tincan/activities/multipart', objectType: 'Activity' },
  attachments: [
    {
      usageType: 'http://example.com/attachment-usage/test',
      display: { 'en-US': 'A test attachment' },
      description: { 'en-US': 'A test attachment (description)' },
      contentType: 'text/plain; charset=ascii',
      length: 27,
      sha2: '495395e777cd98da653df9615d09c0fd6bb2f8d4788394cd53c56a3bfdcd848a',
    },
  ],
};
const SPEC_BODY = crlf(
  '',
  `--${SPEC_BOUNDARY}`,
  'Content-Type:application/json',
  '',
  JSON.stringify(SPEC_STATEMENT, null, 4).replace(/\n/g, '\r\n'),
  `--${SPEC_BOUNDARY}`,
  'Content-Type:text/plain',
  'Content-Transfer-Encoding:binary',
  'X-Experience-API-Hash:495395e777cd98da653df9615d09c0fd6bb2f8d4788394cd53c56a3bfdcd848a',
  '',
  'here is a simple attachment',
  `--${SPEC_BOUNDARY}--`,
);

/** A statement request body with the given attachment parts (CRLF, no preamble). */
function statementRequest(json: string, attachments: { headers: string[]; body: Buffer | string }[], boundary = B): Buffer {
  const chunks: Buffer[] = [crlf(`--${boundary}`, 'Content-Type: application/json', '', json, '')];
  for (const a of attachments) {
    chunks.push(crlf(`--${boundary}`, ...a.headers, '', ''));
    chunks.push(typeof a.body === 'string' ? Buffer.from(a.body) : a.body);
    chunks.push(crlf('', ''));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return Buffer.concat(chunks);
}

const attachmentHeaders = (body: Buffer | string, contentType = 'text/plain'): string[] => [
  `Content-Type: ${contentType}`,
  'Content-Transfer-Encoding: binary',
  `X-Experience-API-Hash: ${sha256(body)}`,
];

describe('parseContentType / mediaTypeOf', () => {
  it('splits the media type and parameters, unquoting quoted strings', () => {
    assert.deepEqual(parseContentType(SPEC_CT), { mediaType: 'multipart/mixed', params: { boundary: SPEC_BOUNDARY } });
    assert.deepEqual(parseContentType('Multipart/Mixed ; Boundary = abc ; charset="utf-8"'), {
      mediaType: 'multipart/mixed',
      params: { boundary: 'abc', charset: 'utf-8' },
    });
    assert.deepEqual(parseContentType('multipart/mixed; boundary="a\\"b;c"; x=1').params, { boundary: 'a"b;c', x: '1' });
    assert.deepEqual(parseContentType('text/plain; flag; a=b').params, { a: 'b' });
  });

  it('rejects an unterminated quoted string', () => {
    rejects400(() => parseContentType('multipart/mixed; boundary="abc'), /unterminated/);
  });

  it('mediaTypeOf lower-cases and drops parameters', () => {
    assert.equal(mediaTypeOf('Application/JSON; charset=UTF-8'), 'application/json');
    assert.equal(mediaTypeOf(undefined), '');
  });
});

describe('parseMultipartMixed', () => {
  it('parses the xAPI specification example (quoted boundary with special characters, empty preamble)', () => {
    const parts = parseMultipartMixed(SPEC_CT, SPEC_BODY);
    assert.equal(parts.length, 2);
    assert.deepEqual(parts[0]!.headers, { 'content-type': 'application/json' });
    assert.deepEqual(JSON.parse(parts[0]!.body.toString()), SPEC_STATEMENT);
    assert.deepEqual(parts[1]!.headers, {
      'content-type': 'text/plain',
      'content-transfer-encoding': 'binary',
      'x-experience-api-hash': '495395e777cd98da653df9615d09c0fd6bb2f8d4788394cd53c56a3bfdcd848a',
    });
    assert.equal(parts[1]!.body.toString(), 'here is a simple attachment');
    assert.equal(sha256(parts[1]!.body), parts[1]!.headers['x-experience-api-hash']);
  });

  it('accepts an unquoted boundary with the delimiter at offset 0', () => {
    const parts = parseMultipartMixed(CT, crlf(`--${B}`, 'A: 1', '', 'one', `--${B}`, 'B: 2', '', 'two', `--${B}--`));
    assert.deepEqual(
      parts.map((p) => [p.headers, p.body.toString()]),
      [
        [{ a: '1' }, 'one'],
        [{ b: '2' }, 'two'],
      ],
    );
  });

  it('ignores a preamble and an epilogue', () => {
    const body = crlf('This is a preamble.', 'More preamble', `--${B}`, 'A: 1', '', 'one', `--${B}--`, 'epilogue', `--${B}`, 'junk');
    const parts = parseMultipartMixed(CT, body);
    assert.equal(parts.length, 1);
    assert.equal(parts[0]!.body.toString(), 'one');
  });

  it('accepts transport padding after delimiters', () => {
    const body = crlf(`--${B}  `, 'A: 1', '', 'one', `--${B}\t`, 'A: 2', '', 'two', `--${B}--  `);
    assert.deepEqual(
      parseMultipartMixed(CT, body).map((p) => p.body.toString()),
      ['one', 'two'],
    );
  });

  it('is lenient to bare LF line endings', () => {
    const body = Buffer.from(`--${B}\nContent-Type: application/json\n\n{"a":1}\n--${B}\nX: y\n\nline1\r\nline2\n--${B}--\n`);
    const parts = parseMultipartMixed(CT, body);
    assert.deepEqual(parts[0]!.headers, { 'content-type': 'application/json' });
    assert.equal(parts[0]!.body.toString(), '{"a":1}');
    assert.deepEqual(parts[1]!.headers, { x: 'y' });
    assert.equal(parts[1]!.body.toString(), 'line1\r\nline2');
  });

  it('parses parts without headers, headers without body, empty parts and folded headers', () => {
    const body = crlf(`--${B}`, '', 'no headers here', `--${B}`, 'Only: headers', `--${B}`, '', '', `--${B}`, 'X-Long: first', '  second', '\tthird', 'Y:', '', 'body', `--${B}--`);
    const parts = parseMultipartMixed(CT, body);
    assert.deepEqual(
      parts.map((p) => [p.headers, p.body.toString()]),
      [
        [{}, 'no headers here'],
        [{ only: 'headers' }, ''],
        [{}, ''],
        [{ 'x-long': 'first second third', y: '' }, 'body'],
      ],
    );
  });

  it('keeps binary bodies intact: CRLFs, dashes and near-boundaries', () => {
    const tricky = Buffer.concat([
      Buffer.from(`\r\n\r\n--${B}x\r\n--${B.slice(0, -1)}\r\n-- ${B}\r\n${B}--\r\n`, 'latin1'),
      Buffer.from([0, 0xff, 0x0d, 0x0a, 0x2d, 0x2d, 0x0d, 0x0d, 0x0a]),
      Buffer.from(`\r\n--${B}-not-a-delimiter\r\n`, 'latin1'),
      Buffer.from('\r\n'),
    ]);
    const body = statementRequest('{}', [
      { headers: ['X: 1'], body: tricky },
      { headers: ['X: 2'], body: '\r\n' },
    ]);
    const parts = parseMultipartMixed(CT, body);
    assert.equal(parts.length, 3);
    assert.ok(parts[1]!.body.equals(tricky));
    assert.equal(parts[2]!.body.toString(), '\r\n');
  });

  it('returns views into the request buffer, not copies', () => {
    const body = statementRequest('{"x":1}', []);
    const [part] = parseMultipartMixed(CT, body);
    assert.equal(part!.body.buffer, body.buffer);
  });

  describe('rejects', () => {
    const valid = crlf(`--${B}`, 'A: 1', '', 'one', `--${B}--`);

    it('a Content-Type without boundary', () => {
      rejects400(() => parseMultipartMixed('multipart/mixed', valid), /no boundary parameter/);
      rejects400(() => parseMultipartMixed('multipart/mixed;', valid), /no boundary parameter/);
      rejects400(() => parseMultipartMixed('multipart/mixed; boundary=""', valid), /no boundary parameter/);
    });

    it('multipart/form-data and other media types', () => {
      rejects400(() => parseMultipartMixed(`multipart/form-data; boundary=${B}`, valid), /multipart\/form-data is not supported/);
      rejects400(() => parseMultipartMixed('application/json', valid), /expected Content-Type multipart\/mixed/);
    });

    it('a body that never contains the boundary delimiter', () => {
      rejects400(() => parseMultipartMixed('multipart/mixed; boundary=other', valid), /does not contain the boundary delimiter "--other"/);
      // "--boundary" not at the start of a line is not a delimiter: that line is preamble
      rejects400(() => parseMultipartMixed(CT, Buffer.from(`x--${B}\r\nA: 1\r\n\r\none\r\n--${B}--`)), /contains no parts/);
      rejects400(() => parseMultipartMixed(CT, Buffer.alloc(0)), /does not contain the boundary delimiter/);
      // the boundary text only as a prefix of a longer line is not a delimiter
      rejects400(() => parseMultipartMixed(CT, Buffer.from(`--${B}abc\r\n`)), /does not contain the boundary delimiter/);
    });

    it('a body without closing delimiter', () => {
      rejects400(() => parseMultipartMixed(CT, crlf(`--${B}`, 'A: 1', '', 'one')), /no closing delimiter "--simple-boundary--"/);
      rejects400(() => parseMultipartMixed(CT, crlf(`--${B}`, 'A: 1', '', 'one', `--${B}`, 'A: 2', '', 'two')), /no closing delimiter/);
      rejects400(() => parseMultipartMixed(CT, crlf(`--${B}`, 'A: 1', '', 'one', `--${B}-`)), /no closing delimiter/);
    });

    it('malformed part headers', () => {
      rejects400(
        () => parseMultipartMixed(CT, crlf(`--${B}`, 'A: 1', '', 'one', `--${B}`, 'Content-Type: text/plain', 'not a header', '', 'two', `--${B}--`)),
        /multipart part 2: malformed header line "not a header"/,
      );
      rejects400(() => parseMultipartMixed(CT, crlf(`--${B}`, ': no name', '', 'x', `--${B}--`)), /part 1: malformed header line/);
      rejects400(() => parseMultipartMixed(CT, crlf(`--${B}`, 'Bad Name: x', '', 'x', `--${B}--`)), /part 1: malformed header line/);
      rejects400(() => parseMultipartMixed(CT, crlf(`--${B}`, ' folded: x', '', 'x', `--${B}--`)), /continuation line/);
      rejects400(() => parseMultipartMixed(CT, crlf(`--${B}`, 'A: 1', 'a: 2', '', 'x', `--${B}--`)), /part 1: duplicate a header/);
    });

    it('zero parts', () => {
      rejects400(() => parseMultipartMixed(CT, Buffer.from(`--${B}--\r\n`)), /contains no parts/);
      rejects400(() => parseMultipartMixed(CT, Buffer.from(`preamble\r\n--${B}--`)), /contains no parts/);
    });
  });
});

describe('buildMultipartMixed', () => {
  it('round-trips binary bodies through parseMultipartMixed', () => {
    const bodies = [Buffer.from('{"statements":[]}'), randomBytes(70_000), Buffer.from('\r\n--lectern-\r\n--\r\n\r\n'), Buffer.alloc(0), Buffer.from([0x0d])];
    const built = buildMultipartMixed(bodies.map((body, i) => ({ headers: { 'Content-Type': 'application/octet-stream', 'X-Index': String(i) }, body })));
    assert.match(built.boundary, /^lectern-[A-Za-z0-9_-]{24}$/);
    assert.equal(built.contentType, `multipart/mixed; boundary=${built.boundary}`);
    assert.ok(built.body.subarray(0, built.boundary.length + 4).equals(Buffer.from(`--${built.boundary}\r\n`)));
    assert.ok(built.body.toString('latin1').endsWith(`\r\n--${built.boundary}--\r\n`));
    const parsed = parseMultipartMixed(built.contentType, built.body);
    assert.equal(parsed.length, bodies.length);
    parsed.forEach((part, i) => {
      assert.deepEqual(part.headers, { 'content-type': 'application/octet-stream', 'x-index': String(i) });
      assert.ok(part.body.equals(bodies[i]!), `part ${i} differs`);
    });
  });

  it('uses a fresh random boundary each time', () => {
    const a = buildMultipartMixed([{ headers: {}, body: Buffer.from('x') }]);
    const b = buildMultipartMixed([{ headers: {}, body: Buffer.from('x') }]);
    assert.notEqual(a.boundary, b.boundary);
  });

  it('refuses header injection', () => {
    assert.throws(() => buildMultipartMixed([{ headers: { 'X-A': 'a\r\nX-B: b' }, body: Buffer.alloc(0) }]), TypeError);
    assert.throws(() => buildMultipartMixed([{ headers: { 'X A': 'a' }, body: Buffer.alloc(0) }]), TypeError);
  });

  it('buildStatementsMultipart writes the xAPI attachment response format', () => {
    const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
    const json = JSON.stringify({ statements: [], more: '' });
    const built = buildStatementsMultipart(json, [{ sha2: sha256(png), contentType: 'image/png', body: png }]);
    const { json: first, attachments } = extractStatementParts(built.contentType, built.body);
    assert.equal(first.toString(), json);
    assert.deepEqual([...attachments.keys()], [sha256(png)]);
    assert.equal(attachments.get(sha256(png))!.contentType, 'image/png');
    assert.ok(attachments.get(sha256(png))!.body.equals(png));
    const parts = parseMultipartMixed(built.contentType, built.body);
    assert.deepEqual(parts[1]!.headers, {
      'content-type': 'image/png',
      'content-transfer-encoding': 'binary',
      'x-experience-api-hash': sha256(png),
    });
  });
});

describe('extractStatementParts', () => {
  it('extracts the statements and the attachments of the specification example', () => {
    const { json, attachments } = extractStatementParts(SPEC_CT, SPEC_BODY);
    assert.deepEqual(JSON.parse(json.toString()), SPEC_STATEMENT);
    assert.deepEqual([...attachments.keys()], [SPEC_STATEMENT.attachments[0]!.sha2]);
    const part = attachments.get(SPEC_STATEMENT.attachments[0]!.sha2)!;
    assert.equal(part.contentType, 'text/plain');
    assert.equal(part.body.toString(), 'here is a simple attachment');
  });

  it('accepts a request with the statements only, and a charset on the first part', () => {
    const body = crlf(`--${B}`, 'Content-Type: Application/JSON; charset=UTF-8', '', '[]', `--${B}--`);
    const { json, attachments } = extractStatementParts(CT, body);
    assert.equal(json.toString(), '[]');
    assert.equal(attachments.size, 0);
  });

  it('verifies SHA-256, SHA-384 and SHA-512 hashes, in any case', () => {
    const data = randomBytes(1000);
    const h384 = createHash('sha384').update(data).digest('hex');
    const h512 = createHash('sha512').update(data).digest('hex');
    const body = statementRequest('{}', [
      { headers: ['Content-Type: a/b', 'Content-Transfer-Encoding: BINARY', `X-Experience-API-Hash: ${sha256(data).toUpperCase()}`], body: data },
      { headers: ['Content-Type: a/b', 'Content-Transfer-Encoding: binary', `X-Experience-API-Hash: ${h384}`], body: data },
      { headers: ['Content-Type: a/b', 'Content-Transfer-Encoding: binary', `X-Experience-API-Hash: ${h512}`], body: data },
    ]);
    const { attachments } = extractStatementParts(CT, body);
    assert.deepEqual([...attachments.keys()], [sha256(data), h384, h512]);
    for (const part of attachments.values()) assert.ok(part.body.equals(data));
  });

  it('keeps one copy of data sent twice, and defaults a missing part Content-Type', () => {
    const body = statementRequest('{}', [
      { headers: ['Content-Transfer-Encoding: binary', `X-Experience-API-Hash: ${sha256('abc')}`], body: 'abc' },
      { headers: attachmentHeaders('abc'), body: 'abc' },
    ]);
    const { attachments } = extractStatementParts(CT, body);
    assert.equal(attachments.size, 1);
    assert.equal(attachments.get(sha256('abc'))!.contentType, 'application/octet-stream');
  });

  it('accepts a matching Content-Length', () => {
    const body = statementRequest('{}', [{ headers: [...attachmentHeaders('abc'), 'Content-Length: 3'], body: 'abc' }]);
    assert.equal(extractStatementParts(CT, body).attachments.size, 1);
  });

  describe('rejects', () => {
    it('multipart/form-data', () => {
      rejects400(() => extractStatementParts(`multipart/form-data; boundary=${B}`, statementRequest('{}', [])), /multipart\/form-data/);
    });

    it('a first part that is not application/json', () => {
      const noType = crlf(`--${B}`, '', '{}', `--${B}--`);
      rejects400(() => extractStatementParts(CT, noType), /first multipart part \(the statements\) has no Content-Type/);
      const text = crlf(`--${B}`, 'Content-Type: text/plain', '', '{}', `--${B}--`);
      rejects400(() => extractStatementParts(CT, text), /first multipart part \(the statements\) must be application\/json, not "text\/plain"/);
    });

    it('statements split over two parts (the second has no hash)', () => {
      const body = statementRequest('{}', [{ headers: ['Content-Type: application/json'], body: '{}' }]);
      rejects400(() => extractStatementParts(CT, body), /part 2 \(an attachment\) has no X-Experience-API-Hash header/);
    });

    it('an attachment part without X-Experience-API-Hash, or with a malformed one', () => {
      const missing = statementRequest('{}', [{ headers: ['Content-Type: text/plain', 'Content-Transfer-Encoding: binary'], body: 'x' }]);
      rejects400(() => extractStatementParts(CT, missing), /part 2 \(an attachment\) has no X-Experience-API-Hash header/);
      const short = statementRequest('{}', [{ headers: ['Content-Transfer-Encoding: binary', 'X-Experience-API-Hash: abc123'], body: 'x' }]);
      rejects400(() => extractStatementParts(CT, short), /"abc123" is not a hex SHA-256, SHA-384 or SHA-512 digest/);
      const notHex = statementRequest('{}', [{ headers: ['Content-Transfer-Encoding: binary', `X-Experience-API-Hash: ${'z'.repeat(64)}`], body: 'x' }]);
      rejects400(() => extractStatementParts(CT, notHex), /is not a hex SHA-256/);
    });

    it('a hash that does not match the content', () => {
      const body = statementRequest('{}', [
        { headers: attachmentHeaders('abc'), body: 'abc' },
        { headers: attachmentHeaders('the declared data'), body: 'other data' },
      ]);
      rejects400(() => extractStatementParts(CT, body), /part 3: X-Experience-API-Hash [0-9a-f]{64} does not match the SHA256 of its content/);
    });

    it('a missing or non-binary Content-Transfer-Encoding', () => {
      const missing = statementRequest('{}', [{ headers: ['Content-Type: text/plain', `X-Experience-API-Hash: ${sha256('x')}`], body: 'x' }]);
      rejects400(() => extractStatementParts(CT, missing), /part 2 \(an attachment\) has no Content-Transfer-Encoding header; it must be "binary"/);
      const base64 = statementRequest('{}', [
        { headers: ['Content-Type: text/plain', 'Content-Transfer-Encoding: base64', `X-Experience-API-Hash: ${sha256('x')}`], body: 'eA==' },
      ]);
      rejects400(() => extractStatementParts(CT, base64), /Content-Transfer-Encoding must be "binary", not "base64"/);
    });

    it('a Content-Length that does not match', () => {
      const body = statementRequest('{}', [{ headers: [...attachmentHeaders('abc'), 'Content-Length: 4'], body: 'abc' }]);
      rejects400(() => extractStatementParts(CT, body), /Content-Length "4" does not match its 3 bytes/);
    });

    it('a part header line without colon (ADL conformance suite "excess multipart sections" case)', () => {
      const body = statementRequest('{}', [{ headers: ['Content-Type: text/plain', 'Content-Transfer-Encoding: binary', sha256('x')], body: 'x' }]);
      rejects400(() => extractStatementParts(CT, body), /part 2: malformed header line/);
    });
  });
});

describe('matchAttachments', () => {
  const attachment = (data: string, extra: Partial<Attachment> = {}): Attachment => ({
    usageType: 'http://example.com/usage',
    display: { en: 'file' },
    contentType: 'text/plain',
    length: Buffer.byteLength(data),
    sha2: sha256(data),
    ...extra,
  });
  const statement = (attachments: Attachment[], object?: Statement['object']): Statement => ({
    actor: { mbox: 'mailto:a@example.com' },
    verb: { id: 'http://example.com/verb' },
    object: object ?? { id: 'http://example.com/activity' },
    attachments,
  });
  const partsOf = (...data: string[]): Map<string, AttachmentPart> => new Map(data.map((d) => [sha256(d), { contentType: 'text/plain', body: Buffer.from(d) }]));

  it('accepts attachments matched by parts or carrying a fileUrl', () => {
    matchAttachments([statement([attachment('a'), attachment('b', { fileUrl: 'http://example.com/b' })]), statement([attachment('c'), attachment('a')])], partsOf('a', 'c'));
    // a part may also supply the data of an attachment that has a fileUrl
    matchAttachments([statement([attachment('a', { fileUrl: 'http://example.com/a' })])], partsOf('a'));
    // statements without attachments, no parts
    matchAttachments([statement([]), { ...statement([]), attachments: undefined }], new Map());
  });

  it('compares sha2 case-insensitively', () => {
    matchAttachments([statement([attachment('a', { sha2: sha256('a').toUpperCase() })])], partsOf('a'));
  });

  it('rejects an attachment with neither fileUrl nor part', () => {
    rejects400(
      () => matchAttachments([statement([attachment('a'), attachment('missing')])], partsOf('a')),
      new RegExp(`attachments\\[1\\] has no fileUrl and no multipart part has X-Experience-API-Hash ${sha256('missing')}`),
    );
    rejects400(() => matchAttachments([statement([]), statement([attachment('missing')])], partsOf('a')), /statements\[1\]\.attachments\[0\] has no fileUrl/);
  });

  it('rejects, for an application/json request (no parts), an attachment without fileUrl', () => {
    rejects400(() => matchAttachments([statement([attachment('a')])], new Map()), /attachments\[0\] has no fileUrl, so its data must be sent as a multipart\/mixed part/);
  });

  it('rejects a part that matches no attachment', () => {
    rejects400(
      () => matchAttachments([statement([attachment('a')])], partsOf('a', 'extra')),
      new RegExp(`X-Experience-API-Hash ${sha256('extra')} does not match the sha2 of any attachment`),
    );
    rejects400(() => matchAttachments([statement([])], partsOf('extra')), /does not match the sha2 of any attachment/);
  });

  it('counts SubStatement attachments like the statement’s own', () => {
    const sub = (attachments: Attachment[]): Statement['object'] => ({
      objectType: 'SubStatement',
      actor: { mbox: 'mailto:b@example.com' },
      verb: { id: 'http://example.com/verb' },
      object: { id: 'http://example.com/activity' },
      attachments,
    });
    matchAttachments([statement([], sub([attachment('s')]))], partsOf('s'));
    matchAttachments([statement([], sub([attachment('s', { fileUrl: 'http://example.com/s' })]))], new Map());
    rejects400(() => matchAttachments([statement([], sub([attachment('s')]))], new Map()), /object\.attachments\[0\] has no fileUrl/);
  });

  it('works end to end with extractStatementParts', () => {
    const stmt = statement([attachment('here is a simple attachment')]);
    const body = statementRequest(JSON.stringify(stmt), [{ headers: attachmentHeaders('here is a simple attachment'), body: 'here is a simple attachment' }]);
    const { json, attachments } = extractStatementParts(CT, body);
    matchAttachments([JSON.parse(json.toString()) as Statement], attachments);
  });
});

describe('parseMultipartMixed: bounded work (issue 27, item 6)', () => {
  it('refuses the first part beyond maxParts, whatever follows', () => {
    const parts = (n: number) => Buffer.from(`--${B}\r\n${'\r\n'.repeat(1)}${`--${B}\r\n\r\n`.repeat(n - 1)}--${B}--\r\n`);
    assert.equal(parseMultipartMixed(CT, parts(5), { maxParts: 5 }).length, 5);
    rejects400(() => parseMultipartMixed(CT, parts(6), { maxParts: 5 }), /more than 5 parts/);
    // Never looked at: no closing delimiter after the part too many.
    rejects400(() => parseMultipartMixed(CT, parts(6).subarray(0, -10), { maxParts: 5 }), /more than 5 parts/);
  });

  it("a part's header block is bounded (4 KiB), and folded lines within it are joined", () => {
    const folded = Array.from({ length: 400 }, (_, i) => ` v${i}`).join('\r\n');
    const [part] = parseMultipartMixed(CT, crlf(`--${B}`, `X-Long: v`, folded, '', 'body', `--${B}--`));
    assert.equal(part.headers['x-long'], ['v', ...Array.from({ length: 400 }, (_, i) => `v${i}`)].join(' '));
    // Folded lines past the bound (which took seconds before: each one re-trimmed the whole value).
    rejects400(() => parseMultipartMixed(CT, crlf(`--${B}`, 'X-Long: v', ' y\r\n'.repeat(80_000), '', 'body', `--${B}--`)), /part 1: its headers are longer than 4096 bytes/);
    // A part with no blank line at all is not read as one huge header block.
    rejects400(() => parseMultipartMixed(CT, crlf(`--${B}`, `A: ${'x'.repeat(20_000)}`, `--${B}--`)), /headers are longer than 4096 bytes/);
  });

  it('a part has at most 16 header fields; "constructor" and "__proto__" are header names like others', () => {
    const fields = (n: number) => Array.from({ length: n }, (_, i) => `X-${i}: v`);
    assert.equal(Object.keys(parseMultipartMixed(CT, crlf(`--${B}`, ...fields(16), '', 'body', `--${B}--`))[0].headers).length, 16);
    rejects400(() => parseMultipartMixed(CT, crlf(`--${B}`, ...fields(17), '', 'body', `--${B}--`)), /part 1: more than 16 header fields/);
    const [part] = parseMultipartMixed(CT, crlf(`--${B}`, 'Constructor: c', '__proto__: p', '', 'body', `--${B}--`));
    assert.equal(part.headers['constructor'], 'c');
    // biome-ignore lint/suspicious/noProto: a header named __proto__ must be an ordinary key
    assert.equal(part.headers['__proto__'], 'p');
  });

  it('refuses the part whose headers take the request past maxHeaderBytes in all', () => {
    const body = crlf(...[1, 2, 3].flatMap((i) => [`--${B}`, `X-Pad: ${'y'.repeat(93)}`, '', `part ${i}`]), `--${B}--`);
    assert.equal(parseMultipartMixed(CT, body, { maxHeaderBytes: 300 }).length, 3);
    rejects400(() => parseMultipartMixed(CT, body, { maxHeaderBytes: 299 }), /^multipart part 3: the parts' headers come to more than 299 bytes in all/);
  });

  it('refuses a boundary longer than 70 characters (RFC 2046 §5.1.1) without echoing it', () => {
    const at70 = 'b'.repeat(70);
    assert.equal(parseMultipartMixed(`multipart/mixed; boundary=${at70}`, crlf(`--${at70}`, '', 'x', `--${at70}--`)).length, 1);
    const long = 'b'.repeat(8_000);
    assert.throws(
      () => parseMultipartMixed(`multipart/mixed; boundary=${long}`, crlf(`--${long}`, '', 'x', `--${long}--`)),
      (err: LrsError) => err.status === 400 && err.message === 'multipart/mixed boundary is 8000 characters long; RFC 2046 §5.1.1 allows at most 70',
    );
  });
});
