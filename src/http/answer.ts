/**
 * What a route answers, as data until it is written: the three front doors (xAPI, the admin API,
 * the console) build answers and write them with the one `send`.
 */
import type { FastifyReply } from 'fastify';

export interface Answer {
  status: number;
  headers?: Record<string, string>;
  body?: string | Buffer;
}

export const JSON_UTF8 = 'application/json; charset=utf-8';

export const json = (status: number, value: unknown, headers: Record<string, string> = {}): Answer => ({
  status,
  headers: { 'content-type': JSON_UTF8, ...headers },
  body: JSON.stringify(value),
});

/**
 * Writes `answer`. `method` is the one the request was served as, when it differs from the HTTP
 * method (the xAPI alternate syntax). HEAD gets the GET's body too: Node drops it from the wire and
 * Content-Length stays right. An alternate-syntax HEAD (§1.3) travels as a POST, whose body Node
 * would send: it is dropped here.
 */
export function send(reply: FastifyReply, answer: Answer, method: string = reply.request.method): FastifyReply {
  reply.status(answer.status);
  if (answer.headers) reply.headers(answer.headers);
  const bodyless = answer.body === undefined || (method === 'HEAD' && reply.request.method !== 'HEAD');
  return bodyless ? reply.send() : reply.send(answer.body);
}
