/** Reading a secret from the terminal (`lectern auth`, `lectern import --from-lrs --user`). */
import { createInterface } from 'node:readline';

/** Reads a password from the terminal without echoing it. */
export async function promptPassword(): Promise<string> {
  const rl = createInterface({ input: process.stdin, output: process.stderr, terminal: true });
  const out = rl as unknown as { _writeToOutput: (s: string) => void; output: NodeJS.WriteStream };
  let prompted = false;
  out._writeToOutput = (s: string) => {
    if (!prompted) {
      process.stderr.write(s);
      prompted = true;
    }
  };
  return new Promise((res) =>
    rl.question('Password: ', (answer) => {
      rl.close();
      process.stderr.write('\n');
      res(answer);
    }),
  );
}
