/**
 * How a long use case reports progress: a callback given events, never output. A phase is
 * started (with its total, when known), advanced (`done` units so far, plus the use case's own
 * figures) and ended; the CLI draws a bar per phase, an HTTP adapter could stream them.
 */
export type ProgressEvent<Phase extends string, Figures extends object = object> =
  | { type: 'start'; phase: Phase; total?: number }
  | ({ type: 'advance'; phase: Phase; done: number } & Figures)
  | { type: 'end'; phase: Phase };

export type OnProgress<Phase extends string, Figures extends object = object> = (event: ProgressEvent<Phase, Figures>) => void;

/** Where a use case writes text it produces (an export's lines, an import's rejects): a file, stdout, a response. */
export interface TextSink {
  write(text: string): Promise<void>;
}
